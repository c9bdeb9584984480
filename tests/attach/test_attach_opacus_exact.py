"""The Opacus adapter's fast path gives exactly the scores of the canaries' definition.

The reference attaches the framework-neutral core (:class:`dpaudit.attach.GradientCanaries`,
same seed: same coins, coordinates and draws) to a twin of the training by the plainest means:
the whole flat canary gradient :meth:`~GradientCanaries.canary_gradient` added to the summed
clipped gradients, and the whole flat noisy sum handed to :meth:`~GradientCanaries.observe`.
The twin sees the same batches and the same noise (the same torch seed; the canaries draw from
NumPy only), so the scores must agree bit for bit (C = 0.5, a power of two: the adapter's
sum divided by C equals the core's sum of values divided by C exactly), and so must the trained
parameters: a canary put on another coordinate, or its value read from another one, fails.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from dpaudit.attach import GradientCanaries, opacus
from dpaudit.opacus_import import import_opacus

import_opacus()
from opacus import PrivacyEngine  # noqa: E402
from opacus.utils.batch_memory_manager import BatchMemoryManager  # noqa: E402

pytestmark = [
    pytest.mark.filterwarnings("ignore:.*[Ss]ecure RNG"),
    pytest.mark.filterwarnings("ignore:.*backward hook"),
]


def _net() -> nn.Module:
    """Six parameter tensors (155 coordinates) of unequal sizes."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 3))


def _reference(opt, m: int, q: float, sampling: str, coordinates) -> GradientCanaries:
    """The core's canaries attached to ``opt`` through flat vectors (the definition)."""
    params = [p for p in opt.params if p.requires_grad]
    ref = GradientCanaries(m, 155, q, 0.5, 3, coordinates, sampling)
    original = opt.add_noise

    def add_noise() -> None:
        vec = ref.canary_gradient(ref.draw_step())
        start = 0
        for p in params:
            n = p.numel()
            part = torch.from_numpy(vec[start : start + n]).to(p.summed_grad.dtype)
            p.summed_grad.view(-1).add_(part)
            start += n
        original()
        ref.observe(torch.cat([p.grad.reshape(-1) for p in params]).double().numpy())

    opt.add_noise = add_noise
    return ref


def _train(m: int, poisson: bool, memory_manager: bool, reference: bool, coordinates=None):
    g = torch.Generator().manual_seed(1)
    data = TensorDataset(torch.randn(96, 6, generator=g), torch.randint(0, 3, (96,), generator=g))
    model = copy.deepcopy(_net())
    torch.manual_seed(2)
    model, opt, loader = PrivacyEngine(accountant="rdp").make_private(
        module=model,
        optimizer=torch.optim.SGD(model.parameters(), lr=0.3),
        data_loader=DataLoader(data, batch_size=24),
        noise_multiplier=0.7,
        max_grad_norm=0.5,
        poisson_sampling=poisson,
    )
    if reference:
        q = float(loader.sample_rate) if poisson else 0.25  # 4 batches of 24 per epoch
        sampling = "poisson" if poisson else "shuffle"
        canaries = _reference(opt, m, q, sampling, coordinates)
    else:
        canaries = opacus(
            opt, m=m, seed=3, data_loader=loader, coordinates=coordinates, probes=False
        )  # the sensitivity probes change the training: the twin has none
    for _ in range(3):
        if memory_manager:
            with BatchMemoryManager(
                data_loader=loader, max_physical_batch_size=7, optimizer=opt
            ) as mem:
                for xb, yb in mem:
                    _step(model, opt, xb, yb)
        else:
            for xb, yb in loader:
                _step(model, opt, xb, yb)
    return canaries, [p.detach().clone() for p in model.parameters()]


def _step(model, opt, xb, yb) -> None:
    opt.zero_grad()
    nn.functional.cross_entropy(model(xb), yb).backward()
    opt.step()


@pytest.mark.parametrize(
    ("m", "poisson", "memory_manager"),
    [(3, True, False), (60, True, True), (155, False, False), (40, False, True)],
)
def test_scores_equal_the_definition_bit_for_bit(m, poisson, memory_manager) -> None:
    """m = 3: most tensors hold no canary; m = 155: every coordinate is a canary."""
    aud, params = _train(m, poisson, memory_manager, reference=False)
    ref, ref_params = _train(m, poisson, memory_manager, reference=True)
    np.testing.assert_array_equal(aud.coordinates, ref.coordinates)
    np.testing.assert_array_equal(aud.membership, ref.membership)
    assert aud.steps == ref.steps > 0
    assert aud.sampled_counts.sum() > 0
    np.testing.assert_array_equal(aud.sampled_counts, ref.sampled_counts)
    np.testing.assert_array_equal(aud.scores, ref.scores)
    for a, b in zip(params, ref_params, strict=True):
        assert torch.equal(a, b)


def test_a_canary_read_off_another_coordinate_fails() -> None:
    """The comparison can fail: the same canaries, but the reference reads and writes them
    one coordinate further on."""
    coords = np.arange(0, 150, 5)
    aud, _ = _train(30, True, False, reference=False, coordinates=coords)
    ref, _ = _train(30, True, False, reference=True, coordinates=coords + 1)
    assert not np.array_equal(aud.scores, ref.scores)


def test_divergence_is_dated_to_its_first_step() -> None:
    """Finite batches for two steps, then NaN inputs: the running sums on the device date the
    divergence to step 3 of 4 (a non-finite sum stays non-finite)."""
    x = torch.randn(32, 6)
    x[16:] = float("nan")
    net = _net()
    model, opt, loader = PrivacyEngine(accountant="rdp").make_private(
        module=net,
        optimizer=torch.optim.SGD(net.parameters(), lr=0.1),
        data_loader=DataLoader(TensorDataset(x, torch.zeros(32).long()), batch_size=8),
        noise_multiplier=1.0,
        max_grad_norm=1.0,
        poisson_sampling=False,
    )
    aud = opacus(opt, m=20, seed=0, data_loader=loader)
    for i, (xb, yb) in enumerate(loader):
        _step(model, opt, xb, yb)
        assert aud.first_nonfinite_step == (None if i < 2 else 3)
    assert aud.steps == 4
    with pytest.raises(ValueError, match="not finite at step 3 of 4"):
        aud.audit(1.0, delta=1e-5)
