"""Example chunking (``compute.max_physical_batch``): a logical batch processed in chunks of at
most that many examples, the chunks' clipped per-sample gradients summed and the noise added
once per step, trains the model the unchunked step trains (every engine)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from dpaudit.canaries.gradient_space import dirac_sparse
from dpaudit.config import ConfigError, load_schema, validate_config
from dpaudit.data.synthetic import make_synthetic
from dpaudit.training import vectorized
from dpaudit.training.job import train_job
from dpaudit.training.samplers import SamplerSpec
from dpaudit.training.vectorized import (
    DPSGDConfig,
    Recording,
    ShardData,
    model_seeds,
    train_shard,
)


def _mlp():
    return nn.Sequential(nn.Flatten(), nn.Linear(20, 16), nn.ReLU(), nn.Linear(16, 3))


N, K = 60, 6  # input examples, Dirac canaries
P = 20 * 16 + 16 + 16 * 3 + 3  # the MLP's parameters


def _dirac_shard(sampler: str, engine: str, max_physical_batch, spy=None):
    """Three models on 60 examples and 6 Dirac canaries (model j holds every (j+1)-th), noise,
    white-box input canaries and per-step dots recorded; batches of about 18 examples."""
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(N, 20, generator=g), torch.randint(0, 3, (N,), generator=g)
    items = [np.concatenate([np.arange(N), N + np.arange(0, K, j + 1)]) for j in range(3)]
    cfg = DPSGDConfig(
        5, 18, 0.28, 1.3, 1.0, 0.3, SamplerSpec(sampler), steps_per_epoch=3
    )  # q 0.28: about 18 of ~63 items per Poisson batch; B 18 for the shuffling sampler
    seeds = [model_seeds(5, "chunk", 0, j) for j in range(3)]
    data = ShardData(x, y, items, dirac_sparse(K, P, 1.0, seed=2))
    rec = Recording(white_box_inputs=np.array([0, 3, 7, 11, 19, 30, 42]), step_dots=True)
    return train_shard(
        _mlp, data, seeds, cfg, rec, engine=engine, max_physical_batch=max_physical_batch
    )


def _spy(monkeypatch, engine: str) -> list[tuple[str, int]]:
    """Record (method, examples per model) of every pass of the engine's class."""
    cls = vectorized.StackedEngine if engine == "stacked" else vectorized.FuncEngine
    passes: list[tuple[str, int]] = []
    for name in ("clipped_grad_sum", "clipped_dot"):
        real = getattr(cls, name)

        def wrapped(self, params, buffers, x, *a, _real=real, _name=name, **kw):
            passes.append((_name, int(x.shape[1])))
            return _real(self, params, buffers, x, *a, **kw)

        monkeypatch.setattr(cls, name, wrapped)
    return passes


@pytest.mark.parametrize("sampler", ["poisson", "shuffle"])
@pytest.mark.parametrize("engine", ["stacked", "func"])
def test_chunked_step_is_the_unchunked_step(monkeypatch, engine, sampler):
    """Same seeds, chunks of at most 4 examples vs the whole batch: the same parameters,
    white-box sums and per-step dots to 1e-6, for Poisson and fixed-size (shuffled) batches
    with Dirac canaries. Noise added per chunk, or a chunk dropped, would change every one."""
    whole = _dirac_shard(sampler, engine, None)
    passes = _spy(monkeypatch, engine)
    chunked = _dirac_shard(sampler, engine, 4)
    grad_passes = [b for name, b in passes if name == "clipped_grad_sum"]
    dot_passes = [b for name, b in passes if name == "clipped_dot"]
    # chunking happened: at most 4 examples per pass, several passes per step
    assert max(grad_passes) <= 4 and len(grad_passes) >= 3 * whole.steps
    assert max(dot_passes) <= 4 and len(dot_passes) == 2 * whole.steps  # 7 canaries: 4 + 3
    torch.testing.assert_close(chunked.flat("params"), whole.flat("params"), rtol=0, atol=1e-6)
    np.testing.assert_allclose(chunked.white_box, whole.white_box, rtol=0, atol=1e-6)
    np.testing.assert_allclose(chunked.step_dots, whole.step_dots, rtol=0, atol=1e-6)
    # the models trained (the comparison is not between two unchanged initialisations)
    assert (whole.flat("params") - whole.flat("params0")).abs().max() > 1e-2
    assert chunked.meta["max_physical_batch"] == 4


@pytest.mark.parametrize("engine", ["stacked", "func"])
def test_a_limit_the_batches_never_reach_is_the_unchunked_run_bit_for_bit(engine):
    """No pass is split when the limit is at least every batch: the computation is the
    unchunked one, bit for bit (so is None, the default: train_shard's own path)."""
    whole = _dirac_shard("poisson", engine, None)
    big = _dirac_shard("poisson", engine, 10**6)
    assert torch.equal(big.flat("params"), whole.flat("params"))
    assert np.array_equal(big.white_box, whole.white_box)
    assert np.array_equal(big.step_dots, whole.step_dots)


def test_default_model_chunk_counts_the_examples_of_one_pass():
    """torch.func's default models per chunk is a memory budget over the examples of a pass:
    chunks of 4 examples fit more models per pass than whole batches of 18."""
    whole = _dirac_shard("poisson", "func", None)
    chunked = _dirac_shard("poisson", "func", 4)
    assert chunked.meta["model_chunk"] > whole.meta["model_chunk"]
    assert vectorized.default_model_chunk(P, 4) == chunked.meta["model_chunk"]


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "64"])
def test_a_bad_limit_names_the_key(bad, tmp_path):
    with pytest.raises(ValueError, match=r"compute\.max_physical_batch .*integer >= 1"):
        _dirac_shard("poisson", "stacked", bad)
    with pytest.raises(ValueError, match=r"compute\.max_physical_batch"):
        train_job(
            make_synthetic(n_train=20, n_test=10, n_features=4, n_classes=2, seed=0),
            experiment="e",
            setting="s",
            seed=0,
            shard=0,
            run_spec={"model": {"name": "logreg"}, "canaries": {"type": "random_input", "m": 4}},
            out=tmp_path / "x.npz",
            max_physical_batch=bad,
        )
    assert not (tmp_path / "x.npz").exists()


def test_schema_takes_a_positive_integer_or_null():
    schema = load_schema()
    for ok in (None, 1, 512):
        cfg = {"compute": {"max_physical_batch": ok}}
        validate_config(cfg, schema, require_experiments=False)
        assert cfg["compute"]["max_physical_batch"] == ok
    cfg = {"compute": {}}
    validate_config(cfg, schema, require_experiments=False)
    assert cfg["compute"]["max_physical_batch"] is None  # the default: no chunking
    for bad in (0, 2.5, "64"):
        with pytest.raises(ConfigError, match="max_physical_batch"):
            cfg = {"compute": {"max_physical_batch": bad}}
            validate_config(cfg, schema, require_experiments=False)


def _opacus_run(max_physical_batch, sizes: list[int] | None = None):
    """One Opacus DP-SGD run (Poisson batches of ~60 of 123 examples, 3 epochs, noise) on a
    small MLP; its final parameters and canary scores. ``sizes`` collects the batch size of
    every forward pass."""
    from dpaudit.training.dpsgd import train_with_canaries

    data = make_synthetic(n_train=120, n_test=30, n_features=10, n_classes=3, seed=1)
    torch.manual_seed(4)
    net = nn.Sequential(nn.Linear(10, 8), nn.Tanh(), nn.Linear(8, 3))
    if sizes is not None:
        net.register_forward_pre_hook(lambda mod, inp: sizes.append(int(inp[0].shape[0])))
    g = np.random.default_rng(0)
    cx = g.normal(size=(6, 10)).astype(np.float32) * 3
    cy = g.integers(0, 3, 6)
    spec = {
        "train": {"epochs": 3, "batch_size": 60, "lr": 0.5, "max_grad_norm": 1.0, "delta": 1e-5},
        "target_epsilon": 4.0,
    }
    res = train_with_canaries(
        net,
        data,
        cx,
        cy,
        np.array([1, 0, 1, 1, 0, 0]),
        spec,
        seed=9,
        device="cpu",
        max_physical_batch=max_physical_batch,
    )
    return torch.cat([p.detach().reshape(-1) for p in net.parameters()]), res


@pytest.mark.slow
def test_opacus_engine_chunks_with_its_batch_memory_manager():
    """train.engine opacus: Opacus's BatchMemoryManager splits each Poisson batch into
    physical batches of at most 16; the clipped gradients are accumulated and the noise added
    once per logical step, so parameters and scores equal the unchunked run's to 1e-6, with
    the same number of (logical) steps."""
    p_whole, whole = _opacus_run(None)
    sizes: list[int] = []
    p_chunk, chunked = _opacus_run(16, sizes)
    train_sizes = sizes[: len(sizes) - 2]  # the last two passes score canaries and test set
    assert max(train_sizes) <= 16 and len(train_sizes) >= 3 * whole.steps
    assert chunked.steps == whole.steps == 9  # 3 epochs of 3 Poisson batches
    torch.testing.assert_close(p_chunk, p_whole, rtol=0, atol=1e-6)
    np.testing.assert_allclose(chunked.canary_scores, whole.canary_scores, rtol=0, atol=1e-6)
    assert chunked.test_accuracy == whole.test_accuracy
    assert chunked.noise_multiplier == whole.noise_multiplier > 0


def test_train_job_and_the_cli_pass_the_limit_to_the_engine(monkeypatch, tmp_path):
    """The key reaches the vectorised engine from train_job and from ``dpaudit train
    --max-physical-batch``."""
    from dpaudit.cli import main

    seen = []
    real = vectorized.train_shard

    def spy(*a, **kw):
        seen.append(kw["max_physical_batch"])
        return real(*a, **kw)

    monkeypatch.setattr("dpaudit.training.shard.train_shard", spy)
    run = tmp_path / "run.yaml"
    run.write_text(
        "model: {name: logreg}\ncanaries: {type: random_input, m: 4}\n"
        "train: {epochs: 1, batch_size: 50, models_per_shard: 2}\ntarget_epsilon: 8\n"
    )
    argv = ["train", "--run", str(run), "--data", "synthetic", "--out", str(tmp_path / "s.npz")]
    assert main([*argv, "--max-physical-batch", "7", "--no-progress"]) == 0
    assert main([*argv, "--no-progress"]) == 0
    assert seen == [7, None]


def test_an_experiments_own_limit_overrides_compute_and_stays_out_of_the_run_spec():
    """``train.max_physical_batch`` of one experiment wins over ``compute.max_physical_batch``;
    it is a memory setting, so it is not in the run spec (no rerun of settings it does not
    touch), and experiments without it keep the compute value."""
    from dpaudit.pipeline import params as pipeline_params

    cfg = {
        "compute": {"max_physical_batch": 64},
        "experiments": {
            "own": {"train": {"max_physical_batch": 8}},
            "other": {"train": {}},
        },
    }
    assert pipeline_params.max_physical_batch(cfg, "own") == 8
    assert pipeline_params.max_physical_batch(cfg, "other") == 64
    cfg["compute"]["max_physical_batch"] = None
    assert pipeline_params.max_physical_batch(cfg, "other") is None


def test_paper_one_run_config_chunks_its_own_experiments_only():
    """The paper one-run config sets 1024 examples per pass on its WRN-16-4 experiments through
    ``train.max_physical_batch`` (the shared ``compute`` block stays the default's), and the
    run spec that decides Snakemake's reruns does not carry it."""
    from pathlib import Path

    import yaml

    from dpaudit.pipeline import params as pipeline_params

    repo = Path(__file__).resolve().parents[2]
    cfg = yaml.safe_load((repo / "config" / "paper" / "one_run_training.yaml").read_text())
    cfg = validate_config(cfg, load_schema())
    assert cfg["compute"]["max_physical_batch"] is None
    train = [n for n, e in cfg["experiments"].items() if e["kind"] == "train"]
    assert train
    for name in train:
        assert pipeline_params.max_physical_batch(cfg, name) == 1024, name
    name = train[0]
    setting = next(iter(pipeline_params.train_settings(cfg["experiments"][name])))
    spec = pipeline_params.train_params(cfg, name, setting)
    assert "max_physical_batch" not in spec["train"]
