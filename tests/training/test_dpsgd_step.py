"""The vectorised DP-SGD step against its one-model definition (Abadi et al. 2016, Alg. 1)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from dpaudit.training.samplers import ModelBatchStream, SamplerSpec
from dpaudit.training.seeds import model_seeds
from dpaudit.training.step import DPSGDConfig, ShardData, reference_step
from dpaudit.training.vectorized import train_shard


def _mlp():
    return nn.Sequential(nn.Flatten(), nn.Linear(6, 5), nn.Tanh(), nn.Linear(5, 3))


class _Branchy(nn.Module):
    """Not a plain sequential stack: the torch.func engine trains it."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(6, 4)
        self.b = nn.Linear(6, 3)

    def forward(self, x):
        return self.b(x) + torch.tanh(self.a(x)).sum(1, keepdim=True)


@pytest.mark.parametrize(("model_fn", "engine"), [(_mlp, "stacked"), (_Branchy, "func")])
def test_shard_step_is_the_reference_step(model_fn, engine):
    """Every model of a shard, step after step, is what the readable per-example loop gives
    with the same batches and the same noise draws (up to float32 round-off)."""
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(40, 6, generator=g), torch.randint(0, 3, (40,), generator=g)
    items = [np.arange(0, 30 + 3 * j) for j in range(3)]
    steps, b = 4, 8
    cfg = DPSGDConfig(steps, b, 0.25, 0.7, 0.5, 0.3, SamplerSpec("poisson", b))
    seeds = [model_seeds(11, "ref", 0, j) for j in range(3)]
    res = train_shard(model_fn, ShardData(x, y, items), seeds, cfg, engine=engine)
    assert res.meta["engine"] == engine
    t_epoch = res.meta["steps_per_epoch"]
    for j, s in enumerate(seeds):
        torch.manual_seed(s.init)
        model = model_fn()
        stream = ModelBatchStream(cfg.sampler, items[j], cfg.sample_rate, t_epoch, s.sampling)
        noise_gen = torch.Generator().manual_seed(s.noise)
        n_params = sum(p.numel() for p in model.parameters())
        for t in range(steps):
            batch = torch.from_numpy(stream.batch(t))
            noise = torch.empty(n_params).normal_(
                0.0, cfg.noise_multiplier * cfg.max_grad_norm, generator=noise_gen
            )
            reference_step(model, x[batch], y[batch], noise, cfg)
        for name, p in model.named_parameters():
            assert torch.allclose(res.params[name][j], p.detach(), rtol=1e-5, atol=1e-6), name
        moved = sum((res.params[k][j] - res.params0[k][j]).abs().sum() for k in res.params)
        assert moved > 1e-3  # the steps did something


def test_reference_step_is_plain_sgd():
    cfg = DPSGDConfig(1, 4, 0.5, 1.0, 1.0, 0.1, optimizer="adam")
    with pytest.raises(ValueError, match="plain SGD"):
        reference_step(_mlp(), torch.zeros(2, 6), torch.zeros(2, dtype=torch.long), None, cfg)


def test_one_clipped_example_without_noise_moves_by_lr_c_over_b():
    """A single example whose gradient is far above C moves the parameters by exactly
    lr * C / B in norm (clip, no noise)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 3))
    with torch.no_grad():
        model[0].weight.mul_(100.0)
    x, y = torch.full((1, 6), 50.0), torch.tensor([0])
    before = torch.cat([p.detach().flatten().clone() for p in model.parameters()])
    cfg = DPSGDConfig(1, 4, 0.5, 0.0, 0.5, 0.2)
    reference_step(model, x, y, torch.zeros(before.numel()), cfg)
    after = torch.cat([p.detach().flatten() for p in model.parameters()])
    assert float((before - after).norm()) == pytest.approx(0.2 * 0.5 / 4, rel=1e-4)
