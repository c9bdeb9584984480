"""The vectorised DP-SGD engine against Opacus; its noise, seeds, resuming and white-box sums."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from opacus import GradSampleModule
from opacus.optimizers import DPOptimizer
from scipy import stats
from torch import nn

from dpaudit.models.cnn import SmallTanhCNN
from dpaudit.models.lenet import LeNet5
from dpaudit.models.linear import logistic_regression
from dpaudit.training.samplers import SamplerSpec
from dpaudit.training.vectorized import (
    DPSGDConfig,
    Recording,
    ShardData,
    TrainingDiverged,
    TrainingInterrupted,
    choose_engine,
    clip_factors,
    init_models,
    model_seeds,
    train_shard,
)


def _mlp():
    return nn.Sequential(nn.Flatten(), nn.Linear(20, 16), nn.ReLU(), nn.Linear(16, 3))


class _NotSequential(nn.Module):
    """A model the stacked engine cannot run (custom forward): exercises the torch.func path."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(20, 8)
        self.b = nn.Linear(20, 3)

    def forward(self, x):
        # a's branch moves each logit differently: a term added equally to every logit (as a
        # sum over a's outputs was) leaves the cross-entropy unchanged, so a's gradient was 0
        # and the test compared round-off (it failed on another CPU's summation order)
        x = x.flatten(1)
        return self.b(x) + torch.tanh(self.a(x))[:, :3]


def _pools():
    """Every layer kind and code path of the stacked engine: a strided 2-channel convolution
    (grouped backward-weight path), a 1-channel one (grouped forward path), tanh fused into the
    convolution, a tiling average pool with a remainder row/column, an overlapping (general)
    average pool, max pooling, ReLU and sigmoid."""
    return nn.Sequential(
        nn.Conv2d(2, 1, 3, stride=2, padding=1),  # (2, 13, 13) -> (1, 7, 7)
        nn.Tanh(),
        nn.AvgPool2d(2),  # tiling, 7 -> 3 (one row and column dropped)
        nn.Conv2d(1, 4, 2, padding=1),  # (1, 3, 3) -> (4, 4, 4)
        nn.Sigmoid(),
        nn.AvgPool2d(2, stride=1),  # overlapping: the general path, 4 -> 3
        nn.ReLU(),
        nn.MaxPool2d(2, stride=1),  # 3 -> 2
        nn.Flatten(),
        nn.Linear(16, 6),
        nn.Tanh(),
        nn.Linear(6, 3),
    )


CASES = {
    "logreg": (lambda: logistic_regression((20,), 3), (20,), 3, torch.float32),
    "mlp": (_mlp, (20,), 3, torch.float32),
    "custom": (_NotSequential, (20,), 3, torch.float32),
    "lenet": (lambda: LeNet5((1, 28, 28), 10), (1, 28, 28), 10, torch.float32),
    # the deep tanh CNN's gradient sums cancel a lot: compare in float64
    "cnn": (lambda: SmallTanhCNN((3, 16, 16), 2).double(), (3, 16, 16), 2, torch.float64),
    "pools": (lambda: _pools().double(), (2, 13, 13), 3, torch.float64),
}


def _opacus_clipped_sum(module: nn.Module, x, y, c: float) -> dict[str, torch.Tensor]:
    gsm = GradSampleModule(module, loss_reduction="sum")
    opt = DPOptimizer(
        torch.optim.SGD(gsm.parameters(), lr=0.1),
        noise_multiplier=0.0,
        max_grad_norm=c,
        expected_batch_size=len(x),
        loss_reduction="sum",
    )
    loss = nn.functional.cross_entropy(gsm(x), y, reduction="sum")
    loss.backward()
    opt.clip_and_accumulate()
    return {n: p.summed_grad.detach().clone() for n, p in module.named_parameters()}


@pytest.mark.parametrize("engine", ["stacked", "func"])
@pytest.mark.parametrize("case", list(CASES))
def test_clipped_sums_match_opacus(case, engine):
    """Same clipped per-sample gradient sums as Opacus's DPOptimizer on the same batch."""
    fn, shape, k, dtype = CASES[case]
    if engine == "stacked" and case == "custom":
        with pytest.raises(ValueError, match="not a plain stack"):
            choose_engine(fn(), "stacked")
        return
    seeds = [model_seeds(1, "opacus", 0, m) for m in range(3)]
    template, params, buffers = init_models(fn, seeds)
    eng = choose_engine(template, engine)
    gen = torch.Generator().manual_seed(0)
    b = 12
    x = (3 * torch.randn(3, b, *shape, generator=gen)).to(dtype)
    y = torch.randint(0, k, (3, b), generator=gen)
    weight = torch.ones(3, b, dtype=dtype)
    weight[1, -4:] = 0  # padding slots of a smaller batch
    for c in (0.05, 1e6):  # every example clipped / none clipped
        mine = eng.clipped_grad_sum(params, buffers, x, y, weight, c)
        for m in range(3):
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(seeds[m].init)
                module = fn()
            n = int(weight[m].sum())
            ref = _opacus_clipped_sum(module, x[m, :n], y[m, :n], c)
            for name, r in ref.items():
                err = float((mine[name][m] - r).norm() / r.norm())
                assert err <= 1e-5, (case, engine, c, m, name, err)


def test_clip_factors_are_opacus_per_sample_factors():
    """min(1, C / (||g_i|| + 1e-6)) with the norm over every parameter of example i: shared by
    the func engine's clipped sums and clipped dot products (one helper, not two copies)."""
    gen = torch.Generator().manual_seed(3)
    grads = {"w": torch.randn(2, 5, 4, 3, generator=gen), "b": torch.randn(2, 5, 4, generator=gen)}
    norms = torch.sqrt(sum(t.flatten(2).pow(2).sum(-1) for t in grads.values()))
    for c in (0.1, 1e6):
        got = clip_factors(grads, c)
        assert got.shape == (2, 5)
        torch.testing.assert_close(got, torch.clamp(c / (norms + 1e-6), max=1.0))
    assert torch.all(clip_factors(grads, 1e6) == 1.0)
    seeds = [model_seeds(1, "cf", 0, m) for m in (0, 1)]
    template, params, buffers = init_models(_NotSequential, seeds)
    eng = choose_engine(template, "func")
    x = torch.randn(2, 6, 20, generator=gen)
    y = torch.randint(0, 3, (2, 6), generator=gen)
    direction = {k: torch.randn(v.shape, generator=gen) for k, v in params.items()}
    dots = eng.clipped_dot(params, buffers, x, y, 0.3, direction)
    summed = eng.clipped_grad_sum(params, buffers, x, y, torch.ones(2, 6), 0.3)
    # summing the per-example dot products gives the dot product of the clipped sum
    expect = sum((summed[k] * direction[k]).flatten(1).sum(1) for k in summed)
    torch.testing.assert_close(dots.sum(1), expect, rtol=1e-4, atol=1e-5)


def _data(n=60, shape=(20,), k=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, *shape, generator=g), torch.randint(0, k, (n,), generator=g)


def test_noise_has_the_right_scale():
    """With no data every update is pure noise: theta_T - theta_0 = -(lr/B) sum_t N(0, (sigma C)^2)
    per coordinate, independent across coordinates and models (4 x 2010 coordinates). KS test
    of the standardised
    coordinates against N(0, 1) and a chi-square test of their variance."""
    x, y = _data(shape=(200,), k=10)
    m, steps, lr, b, sigma, c = 4, 5, 0.3, 10, 1.7, 0.8
    cfg = DPSGDConfig(steps, b, 0.1, sigma, c, lr)
    data = ShardData(x, y, [np.array([], dtype=np.int64)] * m)
    seeds = [model_seeds(7, "noise", 0, j) for j in range(m)]
    res = train_shard(lambda: logistic_regression((200,), 10), data, seeds, cfg)
    diff = (res.flat("params") - res.flat("params0")).double().numpy()
    z = (diff / (lr / b * sigma * c * np.sqrt(steps))).ravel()
    assert stats.kstest(z, "norm").pvalue > 1e-3
    n = z.size
    chi2 = float((z**2).sum())
    assert stats.chi2.cdf(chi2, n) > 1e-4 and stats.chi2.sf(chi2, n) > 1e-4
    corr = np.corrcoef(diff)  # models draw independent noise
    assert np.abs(corr[np.triu_indices(m, 1)]).max() < 0.1
    # a wrong scale (10% off) is rejected: the test has power
    assert stats.kstest(z / 1.1, "norm").pvalue < 1e-3


def test_gradient_canaries_and_no_noise_are_exact():
    """A single gradient canary (norm > C, so it is clipped to C) in every batch, no noise:
    theta_T = theta_0 - T lr/B * C v/|v|."""
    x, y = _data()
    v = torch.randn(1, 63)
    data = ShardData(x, y, [np.array([60])], grad_canaries=v * 5)
    cfg = DPSGDConfig(4, 10, 1.0, 0.0, 2.0, 0.5)
    res = train_shard(lambda: logistic_regression((20,), 3), data, [model_seeds(0, "g", 0, 0)], cfg)
    expected = res.flat("params0") - 4 * 0.5 / 10 * 2.0 * v / v.norm()
    torch.testing.assert_close(res.flat("params"), expected, rtol=0, atol=1e-6)


def _train(m=3, steps=6, sampler="poisson", **kw):
    x, y = _data()
    items = [np.arange(0, 50 + j) for j in range(m)]  # training sets of different sizes
    cfg = DPSGDConfig(
        steps, 10, 0.2, 1.1, 1.0, 0.2, SamplerSpec(sampler, 10, 16), steps_per_epoch=5
    )
    seeds = [model_seeds(3, "det", 2, j) for j in range(m)]
    return train_shard(_mlp, ShardData(x, y, items), seeds, cfg, **kw), (x, y, items, cfg, seeds)


@pytest.mark.parametrize("sampler", ["poisson", "shuffle", "partial_shuffle"])
def test_deterministic_and_each_model_recomputable_alone(sampler):
    a, (x, y, items, cfg, seeds) = _train(sampler=sampler)
    b, _ = _train(sampler=sampler)
    for k in a.params:
        assert torch.equal(a.params[k], b.params[k])
    for j in range(3):
        alone = train_shard(_mlp, ShardData(x, y, [items[j]]), [seeds[j]], cfg)
        for k in a.params:
            torch.testing.assert_close(alone.params[k][0], a.params[k][j], rtol=1e-5, atol=1e-6)
    # models of a shard differ (independent batches, noise and initialisation)
    assert not torch.allclose(a.params["1.weight"][0], a.params["1.weight"][1])


def test_chunking_does_not_change_results():
    a, _ = _train(m=4)
    b, _ = _train(m=4, model_chunk=3)
    for k in a.params:
        torch.testing.assert_close(a.params[k], b.params[k], rtol=1e-5, atol=1e-6)


def test_killed_shard_resumes_to_identical_results(tmp_path):
    ckpt = tmp_path / "shard.ckpt"
    full, _ = _train(steps=8, record=Recording(white_box_inputs=np.array([0, 5])))

    def kill_at_5(step):
        if step == 5:
            raise TrainingInterrupted("killed")

    with pytest.raises(TrainingInterrupted):
        _train(
            steps=8,
            record=Recording(white_box_inputs=np.array([0, 5])),
            checkpoint=ckpt,
            checkpoint_every_s=0.0,
            step_hook=kill_at_5,
        )
    assert ckpt.exists()
    assert torch.load(ckpt, weights_only=True)["step"] == 4  # saved after step 4, killed in 5
    seen = []
    resumed, _ = _train(
        steps=8,
        record=Recording(white_box_inputs=np.array([0, 5])),
        checkpoint=ckpt,
        step_hook=seen.append,
    )
    assert seen == [5, 6, 7, 8]  # only the missing steps ran
    for k in full.params:
        assert torch.equal(full.params[k], resumed.params[k])
    np.testing.assert_array_equal(full.white_box, resumed.white_box)


def _killed_checkpoint(path, **kw):
    """Train until step 5 is interrupted, leaving the checkpoint of step 4 at ``path``."""

    def kill_at_5(step):
        if step == 5:
            raise TrainingInterrupted("killed")

    with pytest.raises(TrainingInterrupted):
        _train(steps=8, checkpoint=path, checkpoint_every_s=0.0, step_hook=kill_at_5, **kw)
    assert torch.load(path, weights_only=True)["step"] == 4


def _assert_fresh(path, caplog, why, **kw):
    """A run with checkpoint ``path`` trains all its steps from 0, equals a run without
    checkpoint, and logged a warning naming the file and ``why``."""
    seen = []
    with caplog.at_level("INFO", logger="dpaudit.training.checkpoint"):
        got, _ = _train(checkpoint=path, step_hook=seen.append, **kw)
    want, _ = _train(**kw)
    assert seen == list(range(1, len(seen) + 1)) and seen[-1] == kw.get("steps", 6)
    for k in want.params:
        assert torch.equal(want.params[k], got.params[k])
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any(str(path) in m and why in m and "step 0" in m for m in warned), warned
    assert not any("resumed" in r.getMessage() for r in caplog.records)


def test_resume_is_logged(tmp_path, caplog):
    ckpt = tmp_path / "shard.ckpt"
    _killed_checkpoint(ckpt)
    with caplog.at_level("INFO", logger="dpaudit.training.checkpoint"):
        _train(steps=8, checkpoint=ckpt)
    assert f"resumed from {ckpt} at step 4 of 8" in caplog.messages


def test_checkpoint_of_a_changed_config_is_discarded(tmp_path, caplog):
    """After a config change (here 9 steps instead of 8, or another learning rate) the old
    checkpoint is stale: discarded with a warning, never resumed, never an error."""
    ckpt = tmp_path / "shard.ckpt"
    _killed_checkpoint(ckpt)
    _assert_fresh(ckpt, caplog, "different run", steps=9)
    _killed_checkpoint(ckpt)
    x, y = _data()
    items = [np.arange(0, 50 + j) for j in range(3)]
    cfg = DPSGDConfig(8, 10, 0.2, 1.1, 1.0, 0.3, SamplerSpec("poisson", 10, 16), 5)
    seeds = [model_seeds(3, "det", 2, j) for j in range(3)]
    seen = []
    with caplog.at_level("INFO", logger="dpaudit.training.checkpoint"):
        train_shard(
            _mlp, ShardData(x, y, items), seeds, cfg, checkpoint=ckpt, step_hook=seen.append
        )
    assert seen == list(range(1, 9))


def test_checkpoint_of_another_architecture_with_equal_shapes_is_not_resumed(tmp_path, caplog):
    """Tanh instead of ReLU: every parameter shape is the same, the run is not."""
    ckpt = tmp_path / "shard.ckpt"
    _killed_checkpoint(ckpt)
    tanh = lambda: nn.Sequential(nn.Flatten(), nn.Linear(20, 16), nn.Tanh(), nn.Linear(16, 3))  # noqa: E731
    x, y = _data()
    items = [np.arange(0, 50 + j) for j in range(3)]
    cfg = DPSGDConfig(8, 10, 0.2, 1.1, 1.0, 0.2, SamplerSpec("poisson", 10, 16), 5)
    seeds = [model_seeds(3, "det", 2, j) for j in range(3)]
    seen = []
    with caplog.at_level("INFO", logger="dpaudit.training.checkpoint"):
        got = train_shard(
            tanh, ShardData(x, y, items), seeds, cfg, checkpoint=ckpt, step_hook=seen.append
        )
    assert seen == list(range(1, 9))
    want = train_shard(tanh, ShardData(x, y, items), seeds, cfg)
    for k in want.params:
        assert torch.equal(want.params[k], got.params[k])
    assert any("different run" in m and str(ckpt) in m for m in caplog.messages)


@pytest.mark.parametrize("damage", ["truncated", "empty", "garbage", "other_object"])
def test_unreadable_checkpoint_is_discarded_naming_the_file(tmp_path, caplog, damage):
    ckpt = tmp_path / "shard.ckpt"
    _killed_checkpoint(ckpt)
    raw = ckpt.read_bytes()
    if damage == "truncated":
        ckpt.write_bytes(raw[: len(raw) // 2])
    elif damage == "empty":
        ckpt.write_bytes(b"")
    elif damage == "garbage":
        ckpt.write_bytes(b"not a checkpoint\n" * 10)
    else:  # a readable file holding something else
        torch.save({"step": torch.zeros(3)}, ckpt)
    why = "not a checkpoint of this run" if damage == "other_object" else "cannot be read"
    _assert_fresh(ckpt, caplog, why, steps=8)


def test_checkpoint_is_written_atomically(tmp_path, monkeypatch):
    """A job killed while saving leaves the previous checkpoint intact and no partial file."""
    ckpt = tmp_path / "shard.ckpt"
    _killed_checkpoint(ckpt)
    before = ckpt.read_bytes()

    def dying_save(obj, f, *a, **k):
        Path(f).write_bytes(b"half a checkpoint")
        raise KeyboardInterrupt

    monkeypatch.setattr(torch, "save", dying_save)
    with pytest.raises(KeyboardInterrupt):
        _train(steps=8, checkpoint=ckpt, checkpoint_every_s=0.0)
    assert ckpt.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shard.ckpt"]


def test_divergence_names_the_model_and_step():
    with pytest.raises(TrainingDiverged, match=r"model 0 .* step 2 of 6 .*learning rate") as err:
        train_shard(
            _mlp,
            ShardData(*_data(), [np.arange(50)] * 2),
            [model_seeds(3, "det", 2, j) for j in range(2)],
            DPSGDConfig(6, 10, 0.2, 1.1, 1.0, 1e30),
        )
    assert (err.value.model, err.value.step) == (0, 2)


@pytest.mark.parametrize("engine", ["stacked", "func"])
def test_white_box_sum_matches_step_by_step_recomputation(engine):
    """sum_t <theta_{t-1} - theta_t, clip(grad loss(theta_{t-1}; c))>, with theta_t recomputed
    by training t steps (randomness depends only on (seed, step), so prefixes agree) and the
    clipped canary gradient from Opacus."""
    steps, c = 4, 0.5
    x, y = _data()
    items = [np.arange(10, 60)]
    cfg = DPSGDConfig(steps, 10, 0.3, 0.8, c, 0.4)
    seeds = [model_seeds(5, "wb", 0, 0)]
    canaries = np.array([0, 1, 2])
    res = train_shard(_mlp, ShardData(x, y, items), seeds, cfg, Recording(canaries), engine=engine)
    thetas = [res.params0] + [
        train_shard(
            _mlp, ShardData(x, y, items), seeds, DPSGDConfig(t, 10, 0.3, 0.8, c, 0.4)
        ).params
        for t in range(1, steps + 1)
    ]
    expected = np.zeros(len(canaries))
    for t in range(1, steps + 1):
        for i, ci in enumerate(canaries):
            module = _mlp()
            with torch.no_grad():
                for n, p in module.named_parameters():
                    p.copy_(thetas[t - 1][n][0])
            g = _opacus_clipped_sum(module, x[ci : ci + 1], y[ci : ci + 1], c)
            expected[i] += sum(
                float(((thetas[t - 1][n][0] - thetas[t][n][0]) * g[n]).sum()) for n in g
            )
    np.testing.assert_allclose(res.white_box[0], expected, rtol=1e-4, atol=1e-7)


def test_step_dots_are_noisy_gradient_dot_canary():
    x, y = _data()
    v = torch.randn(2, 63)
    v = v / v.norm(dim=1, keepdim=True)
    cfg = DPSGDConfig(3, 10, 0.3, 1.0, 1.0, 0.2)
    data = ShardData(x, y, [np.array([60, 61] + list(range(40)))], grad_canaries=v)
    res = train_shard(
        lambda: logistic_regression((20,), 3),
        data,
        [model_seeds(0, "d", 0, 0)],
        cfg,
        Recording(step_dots=True),
    )
    assert res.step_dots.shape == (1, 2, 3)
    # sum_t <g~_t, v> * lr = <theta_0 - theta_T, v>  (plain SGD telescopes)
    tele = ((res.flat("params0") - res.flat("params")) @ v.T).double().numpy()
    np.testing.assert_allclose(res.step_dots.sum(-1) * 0.2, tele, rtol=1e-4, atol=1e-6)


def test_bad_inputs():
    x, y = _data()
    cfg = DPSGDConfig(2, 10, 0.2, 1.0, 1.0, 0.1)
    seeds = [model_seeds(0, "bad", 0, 0)]
    with pytest.raises(ValueError, match="BatchNorm"):
        train_shard(
            lambda: nn.Sequential(nn.Linear(20, 4), nn.BatchNorm1d(4), nn.Linear(4, 3)),
            ShardData(x, y, [np.arange(10)]),
            seeds,
            cfg,
        )
    with pytest.raises(ValueError, match="1 seeds but 2 training sets"):
        train_shard(_mlp, ShardData(x, y, [np.arange(3), np.arange(3)]), seeds, cfg)
    with pytest.raises(ValueError, match="outside"):
        ShardData(x, y, [np.array([0, 60])])
    with pytest.raises(ValueError, match="repeats"):
        ShardData(x, y, [np.array([1, 1])])
    with pytest.raises(ValueError, match="sample_rate"):
        DPSGDConfig(2, 10, 1.5, 1.0, 1.0, 0.1)
    with pytest.raises(ValueError, match="coordinates"):
        train_shard(_mlp, ShardData(x, y, [np.arange(3)], torch.zeros(1, 5)), seeds, cfg)
    with pytest.raises(ValueError, match="unknown engine"):
        choose_engine(_mlp(), "gpu")


def test_partially_informed_adversary_gives_the_papers_means():
    """Annamalai et al. Alg. 1 (PI): with zero inputs the natural gradients have no weight
    component, so for a Dirac canary on a weight coordinate B <g~_t, v/|v|> / C is exactly +1
    in the target's batch, 0 in the zero-out record's batch and -1 in every other batch."""
    n, b, c = 20, 5, 0.7
    x = torch.zeros(n, 4)
    y = torch.arange(n) % 3
    v = torch.zeros(2, 15)
    v[0, 2] = c  # a weight coordinate of the 4 -> 3 linear layer; row 1: the zero-out record
    cfg = DPSGDConfig(8, b, 0.2, 0.0, c, 0.1, SamplerSpec("shuffle", b), steps_per_epoch=4)
    items = [np.array([n] + list(range(n))), np.array([n + 1] + list(range(n)))]  # IN, OUT
    seeds = [model_seeds(0, "pi", 0, j) for j in range(2)]
    res = train_shard(
        lambda: logistic_regression((4,), 3),
        ShardData(x, y, items, v, partially_informed=(n, n + 1)),
        seeds,
        cfg,
        Recording(step_dots=True),
    )
    o = res.step_dots[:, 0] * b / c**2  # <g~, v> with |v| = C: (models, steps)
    for j, special in ((0, 1.0), (1, 0.0)):
        for epoch in range(2):
            vals = np.sort(o[j, 4 * epoch : 4 * epoch + 4])
            np.testing.assert_allclose(vals, np.sort([special, -1, -1, -1]), atol=1e-5)
    with pytest.raises(ValueError, match="partially_informed needs"):
        ShardData(x, y, items, v, partially_informed=(0, n))


def _adam_run(monkeypatch, steps=5, m=2, **kw):
    """An Adam shard on real gradients (an MLP on data) whose noisy gradients ``g~_t`` (what
    the update rule receives, per model and step) are recorded by a spy."""
    from dpaudit.training import step

    seen: list[tuple[int, int, torch.Tensor]] = []
    real = step.adam_update

    def spy(m_c, v_c, g, lr, betas, eps, t):
        a = m_c.storage_offset() // m_c[0].numel()  # the chunk's first model: a row of adam_m
        seen.append((a, t, g.clone()))
        return real(m_c, v_c, g, lr, betas, eps, t)

    monkeypatch.setattr(step, "adam_update", spy)
    x, y = _data()
    items = [np.arange(0, 50 + j) for j in range(m)]
    cfg = DPSGDConfig(steps, 10, 0.2, 1.1, 1.0, 0.05, optimizer="adam", betas=(0.8, 0.99), eps=1e-3)
    seeds = [model_seeds(3, "adam", 0, j) for j in range(m)]
    res = train_shard(_mlp, ShardData(x, y, items), seeds, cfg, **kw)
    return res, seen, (x, y, items, cfg, seeds)


def test_adam_is_torch_adam_on_the_noisy_gradient(monkeypatch):
    """Each model's Adam iterates are torch.optim.Adam's (same lr, betas, eps) stepped on that
    model's noisy gradients; the first noisy gradient is the SGD engine's (same batch, same
    noise), so Adam receives the privatised gradient and nothing else."""
    steps, m = 5, 3
    res, seen, (x, y, items, cfg, seeds) = _adam_run(monkeypatch, steps, m, model_chunk=2)
    grads = {(a + i, t): g[i] for a, t, g in seen for i in range(g.shape[0])}
    assert sorted(grads) == [(j, t) for j in range(m) for t in range(1, steps + 1)]
    for j in range(m):
        theta = res.flat("params0")[j].clone().requires_grad_(True)
        opt = torch.optim.Adam([theta], lr=cfg.lr, betas=cfg.betas, eps=cfg.eps)
        for t in range(1, steps + 1):
            theta.grad = grads[(j, t)].clone()
            opt.step()
        torch.testing.assert_close(res.flat("params")[j], theta.detach(), rtol=1e-5, atol=1e-6)
    # step 1: the gradient Adam got is the noisy gradient plain SGD steps on
    sgd = DPSGDConfig(1, 10, 0.2, 1.1, 1.0, 1.0)
    one = train_shard(_mlp, ShardData(x, y, items), seeds, sgd)
    torch.testing.assert_close(
        one.flat("params0") - one.flat("params"),
        torch.stack([grads[(j, 1)] for j in range(m)]),
        rtol=1e-5,
        atol=1e-6,
    )
    # and Adam is not SGD: the same run with SGD at the same lr ends elsewhere
    sgd5 = train_shard(_mlp, ShardData(x, y, items), seeds, DPSGDConfig(5, 10, 0.2, 1.1, 1.0, 0.05))
    assert not torch.allclose(sgd5.flat("params"), res.flat("params"), atol=1e-3)


def test_adam_moments_are_checkpointed(monkeypatch, tmp_path):
    """A killed Adam shard resumes to the uninterrupted result (the moments are in the
    checkpoint: resuming with fresh moments would change the iterates)."""
    full, _, _ = _adam_run(monkeypatch, steps=6)

    def kill_at_4(step):
        if step == 4:
            raise TrainingInterrupted("killed")

    ckpt = tmp_path / "adam.ckpt"
    with pytest.raises(TrainingInterrupted):
        _adam_run(monkeypatch, 6, checkpoint=ckpt, checkpoint_every_s=0.0, step_hook=kill_at_4)
    assert {"adam_m", "adam_v"} <= set(torch.load(ckpt, weights_only=True))
    resumed, _, _ = _adam_run(monkeypatch, 6, checkpoint=ckpt)
    assert torch.equal(full.flat("params"), resumed.flat("params"))


def test_adam_config_is_checked():
    with pytest.raises(ValueError, match="optimizer 'rmsprop'"):
        DPSGDConfig(1, 10, 0.1, 1.0, 1.0, 0.1, optimizer="rmsprop")
    with pytest.raises(ValueError, match="betas"):
        DPSGDConfig(1, 10, 0.1, 1.0, 1.0, 0.1, optimizer="adam", betas=(0.9, 1.0))


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_sparse_dirac_canaries_train_exactly_as_dense_ones(optimizer):
    """Dirac canaries stored sparse (coordinate, value) give the same models, white-box sums of
    the per-step dots and partially-informed updates as the dense (K, P) matrix."""
    from dpaudit.canaries.gradient_space import dirac, dirac_sparse

    x, y = _data()
    n, p = x.shape[0], 16 * 20 + 16 + 3 * 16 + 3
    sparse = dirac_sparse(6, p, 1.0, seed=1, zeros=1)
    dense = torch.from_numpy(np.concatenate([dirac(6, p, 1.0, seed=1)[0], np.zeros((1, p))]))
    cfg = DPSGDConfig(5, 10, 0.3, 1.0, 1.0, 0.2, optimizer=optimizer)
    items = [np.concatenate([n + np.arange(0, 6, j + 1), np.arange(n)]) for j in range(3)]
    seeds = [model_seeds(2, "sparse", 0, j) for j in range(3)]
    runs = [
        train_shard(_mlp, ShardData(x, y, items, v), seeds, cfg, Recording(step_dots=True))
        for v in (sparse, dense.float())
    ]
    torch.testing.assert_close(runs[0].flat("params"), runs[1].flat("params"), rtol=0, atol=1e-6)
    np.testing.assert_allclose(runs[0].step_dots, runs[1].step_dots, rtol=0, atol=1e-6)
    assert not torch.equal(runs[0].flat("params"), runs[0].flat("params0"))
    pi = [np.array([n] + list(range(n))), np.array([n + 6] + list(range(n)))]
    pi_runs = [
        train_shard(_mlp, ShardData(x, y, pi, v, partially_informed=(n, n + 6)), seeds[:2], cfg)
        for v in (sparse, dense.float())
    ]
    torch.testing.assert_close(
        pi_runs[0].flat("params"), pi_runs[1].flat("params"), rtol=0, atol=1e-6
    )
