"""The shuffling paper's likelihood-ratio scores (Annamalai et al. 2024, §5.3 and §7) against
their definition: the ratio of two Gaussian mixtures over "which batch is special", computed
by brute force from the densities, and the trainer's adversaries that they score."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import stats

from dpaudit import likelihood_ratios as lr
from dpaudit.mechanisms import batched_gaussian as bgm
from dpaudit.models.linear import logistic_regression
from dpaudit.training.samplers import SamplerSpec
from dpaudit.training.vectorized import DPSGDConfig, Recording, ShardData, model_seeds, train_shard

#: (special batch on D, special batch on D', every other batch) per statistic; b = batch size
MEANS = {
    "natural": lambda b: (1.0, 0.0, 0.0),
    "partially_informed": lambda b: (1.0, 0.0, -1.0),
    "batch_worst_case": lambda b: (float(b), b - 1.0, -float(b)),
}


def _brute_force(x, sigma, statistic, t, b, prefix=None):
    """log prod_e [sum_t N(x_t; s1) prod_{t' != t} N(x_t'; o)] / [same with s0], from the pdfs."""
    s1, s0, other = MEANS[statistic](b)
    out = []
    for run in x:
        total = 0.0
        for ep in run.reshape(-1, t):
            ep = ep[:prefix] if prefix else ep
            num = den = 0.0
            for k in range(len(ep)):
                rest = np.prod(
                    [stats.norm.pdf(v, other, sigma) for j, v in enumerate(ep) if j != k]
                )
                num += stats.norm.pdf(ep[k], s1, sigma) * rest
                den += stats.norm.pdf(ep[k], s0, sigma) * rest
            total += np.log(num / den)
        out.append(total)
    return np.array(out)


@pytest.mark.parametrize(
    "statistic,b,prefix",
    [
        ("natural", 1, None),
        ("partially_informed", 1, None),
        ("batch_worst_case", 3, None),
        ("partially_informed", 1, 2),
        ("batch_worst_case", 2, 3),
    ],
)
def test_log_likelihood_ratio_is_the_mixture_ratio(statistic, b, prefix):
    rng = np.random.default_rng(0)
    t, epochs, sigma = 4, 2, 1.3
    x = rng.normal(0.0, 2.0, size=(6, t * epochs))
    got = lr.log_likelihood_ratio(x, sigma, statistic, t, b, prefix)
    np.testing.assert_allclose(
        got, _brute_force(x, sigma, statistic, t, b, prefix), rtol=1e-9, atol=1e-9
    )


def test_batch_worst_case_with_one_record_per_batch_is_partially_informed():
    x = np.random.default_rng(1).normal(size=(5, 20))
    np.testing.assert_allclose(
        lr.log_likelihood_ratio(x, 0.8, "batch_worst_case", 10, 1),
        lr.log_likelihood_ratio(x, 0.8, "partially_informed", 10, 1),
    )


@pytest.mark.parametrize("statistic", ["natural", "partially_informed"])
def test_same_scores_as_the_bgm_simulation(statistic):
    """The BGM's ratio (dpaudit.mechanisms.batched_gaussian) on the same outputs."""
    o = np.random.default_rng(2).normal(size=(7, 3, 5))
    np.testing.assert_allclose(
        lr.log_likelihood_ratio(o.reshape(7, 15), 1.1, statistic, 5),
        bgm.log_likelihood_ratio(o, 1.1, statistic),
        rtol=1e-12,
    )


def test_prefix_is_the_ratio_of_the_first_batches():
    x = np.random.default_rng(3).normal(size=(4, 12))
    np.testing.assert_allclose(
        lr.log_likelihood_ratio(x, 1.0, "partially_informed", 6, prefix=2),
        lr.log_likelihood_ratio(
            np.concatenate([x[:, :2], x[:, 6:8]], 1), 1.0, "partially_informed", 2
        ),
    )


def test_bad_input():
    x = np.zeros((2, 10))
    with pytest.raises(ValueError, match="whole epochs"):
        lr.log_likelihood_ratio(x, 1.0, "natural", 3)
    with pytest.raises(ValueError, match="prefix 6"):
        lr.log_likelihood_ratio(x, 1.0, "natural", 5, prefix=6)
    with pytest.raises(ValueError, match="noise multiplier"):
        lr.log_likelihood_ratio(x, 0.0, "natural", 5)
    with pytest.raises(ValueError, match="unknown statistic"):
        lr.log_likelihood_ratio(x, 1.0, "worst", 5)


@pytest.mark.parametrize("sampler,fixed", [("batch_then_shuffle", True), ("shuffle", False)])
def test_batch_worst_case_adversary_gives_the_papers_outputs(sampler, fixed):
    """Annamalai et al. §7 (modified Worst-Case): the first B records (target or zero-out record
    first) carry +v and the rest -v, so with batch-then-shuffle and no noise B <g~_t, v/|v|> / C
    is exactly B (target) or B - 1 (zero-out) in one batch and -B in every other; a full
    shuffle mixes the +v records into other batches."""
    n, b, c = 20, 5, 0.7
    x = torch.randn(n, 4)  # real inputs: their gradients must all be replaced
    y = torch.arange(n) % 3
    v = torch.zeros(2, 15)
    v[0, 2] = c  # the target; row 1: the zero-out record
    # the zero-out record makes n + 1 items: the last batch has one more
    cfg = DPSGDConfig(8, b, 0.2, 0.0, c, 0.1, SamplerSpec(sampler, b), steps_per_epoch=4)
    items = [np.array([n] + list(range(n - 1))), np.array([n + 1] + list(range(n - 1)))]
    seeds = [model_seeds(0, "wc", 0, j) for j in range(2)]
    res = train_shard(
        lambda: logistic_regression((4,), 3),
        ShardData(x, y, items, v, batch_worst_case=(n, n + 1)),
        seeds,
        cfg,
        Recording(step_dots=True),
    )
    o = res.step_dots[:, 0] * b / c**2
    for j, special in ((0, 5.0), (1, 4.0)):
        for epoch in range(2):
            vals = np.sort(o[j, 4 * epoch : 4 * epoch + 4])
            if fixed:
                np.testing.assert_allclose(
                    vals, np.sort([special, -5, -5, -5]), atol=1e-4
                )  # Opacus clip factor C / (|v| + 1e-6)
            else:  # the +v records are spread by the shuffle (seed-dependent), sums are kept
                assert not np.allclose(vals, np.sort([special, -5, -5, -5]), atol=1e-3)
                np.testing.assert_allclose(vals.sum(), special - 15, atol=1e-4)
    with pytest.raises(ValueError, match="pick one"):
        ShardData(x, y, items, v, partially_informed=(n, n + 1), batch_worst_case=(n, n + 1))
    with pytest.raises(ValueError, match="batch_worst_case needs"):
        ShardData(x, y, items, v, batch_worst_case=(0, n))
