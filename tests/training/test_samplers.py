"""Batch samplers (Annamalai et al. §7): what each one guarantees about the batches it draws."""

from __future__ import annotations

import numpy as np
import pytest

from dpaudit.training.samplers import ModelBatchStream, SamplerSpec, epoch_batches


def _epoch(name, n=100, b=10, buffer=None, seed=0):
    spec = SamplerSpec(name, b, buffer)
    return epoch_batches(spec, np.arange(n), -(-n // b), np.random.default_rng(seed))


@pytest.mark.parametrize("name", ["shuffle", "partial_shuffle", "batch_then_shuffle", "no_shuffle"])
def test_every_item_exactly_once_per_epoch(name):
    batches = _epoch(name, n=103, buffer=25)
    assert len(batches) == 11
    assert sorted(np.concatenate(batches).tolist()) == list(range(103))
    assert {len(b) for b in batches} <= {9, 10}


def test_no_shuffle_keeps_dataset_order():
    assert np.array_equal(np.concatenate(_epoch("no_shuffle")), np.arange(100))


def test_partial_shuffle_keeps_items_in_their_buffer():
    """With buffer K the item at position i lands among positions of its own buffer only, so the
    first item (the target in Annamalai et al. Alg. 2) is in the first ceil(K/B) batches."""
    order = np.concatenate(_epoch("partial_shuffle", n=100, buffer=30))
    for i, item in enumerate(order):
        assert item // 30 == i // 30
    assert not np.array_equal(order, np.arange(100))
    first = [np.concatenate(_epoch("partial_shuffle", buffer=30, seed=s)[:3]) for s in range(50)]
    assert all(0 in f for f in first)


def test_batch_then_shuffle_keeps_batch_membership():
    batches = _epoch("batch_then_shuffle")
    assert sorted(tuple(b.tolist()) for b in batches) == [
        tuple(range(s, s + 10)) for s in range(0, 100, 10)
    ]
    assert [b[0] for b in batches] != list(range(0, 100, 10))


def test_full_shuffle_mixes_across_the_whole_dataset():
    """Under full shuffling item 0 lands in each of the T batches with probability 1/T."""
    pos = [next(i for i, b in enumerate(_epoch("shuffle", seed=s)) if 0 in b) for s in range(2000)]
    counts = np.bincount(pos, minlength=10)
    from scipy.stats import chisquare

    assert chisquare(counts).pvalue > 1e-3


def test_poisson_batches_have_binomial_sizes_and_depend_only_on_seed_and_step():
    s = ModelBatchStream(SamplerSpec("poisson", 10), np.arange(1000), 0.05, 1, seed=4)
    sizes = np.array([len(s.batch(t)) for t in range(400)])
    assert abs(sizes.mean() - 50) < 3 * np.sqrt(1000 * 0.05 * 0.95 / 400)
    assert abs(sizes.var() / (1000 * 0.05 * 0.95) - 1) < 0.3
    again = ModelBatchStream(SamplerSpec("poisson", 10), np.arange(1000), 0.05, 1, seed=4)
    assert np.array_equal(again.batch(123), s.batch(123))
    other = ModelBatchStream(SamplerSpec("poisson", 10), np.arange(1000), 0.05, 1, seed=5)
    assert not np.array_equal(other.batch(123), s.batch(123))


def test_shuffle_stream_resumes_mid_epoch():
    spec = SamplerSpec("shuffle", 10)
    a = ModelBatchStream(spec, np.arange(100), 0.1, 10, seed=1)
    full = [a.batch(t) for t in range(25)]
    b = ModelBatchStream(spec, np.arange(100), 0.1, 10, seed=1)
    assert all(np.array_equal(b.batch(t), full[t]) for t in range(17, 25))


def test_bad_sampler_specs():
    with pytest.raises(ValueError, match="unknown sampler 'poison'"):
        SamplerSpec("poison")
    with pytest.raises(ValueError, match="buffer_size"):
        SamplerSpec("partial_shuffle", 10)
    with pytest.raises(ValueError, match="batch_size"):
        SamplerSpec("shuffle", 0)
