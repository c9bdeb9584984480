"""Where to put Dirac gradient canaries: the coordinates the data's gradients move least.

A white-box adversary chooses its canary gradients (Steinke, Nasr, Jagielski 2023,
arXiv:2305.08846, Sec. 4.1). On a coordinate that the other records' clipped gradients do not
move, the canary's score holds only the canary and the noise, so the audit separates IN from OUT
far better than on a random coordinate (docs/real_data/one_run.md measures it). The choice uses
the training data and the initial model, never the canaries' membership, so every bound stays
valid.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import torch

from dpaudit.canaries.gradient_space import clip_factor, gradient_mass, lowest_mass_coordinates
from dpaudit.seeding import derive_seed


def _clipped_gradients(
    model: torch.nn.Module,
    batches: Iterable[tuple[torch.Tensor, torch.Tensor]],
    clip_norm: float,
    loss_fn: Any = None,
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Per batch of ``batches``, the per-example gradients (1, B, P) of ``model`` (its trainable
    parameters in ``model.parameters()`` order, flat, float64) and their clip factors (1, B),
    clipped as Opacus clips: the chunks of :func:`dpaudit.canaries.gradient_space.gradient_mass`.
    ``loss_fn(logits, labels)`` defaults to the cross-entropy. Give the plain model, before
    Opacus' ``make_private`` wraps it (its hooks do not run under ``torch.func``)."""
    from torch.func import functional_call, grad, vmap

    if hasattr(model, "_module") and hasattr(model, "disable_hooks"):
        raise ValueError(
            "give the plain model, before PrivacyEngine.make_private wraps it (the "
            "GradSampleModule's hooks do not run under torch.func); the coordinates are the same"
        )
    loss_fn = loss_fn or torch.nn.functional.cross_entropy
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    params = {n: p.detach() for n, p in model.named_parameters() if p.requires_grad}
    buffers = {n: b.detach() for n, b in model.named_buffers()}

    def loss(ps: dict[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        out = functional_call(model, (ps, buffers), (x[None],))
        return loss_fn(out, y[None])

    per_example = vmap(grad(loss), in_dims=(None, 0, 0))
    for xb, yb in batches:
        if len(yb) == 0:
            continue
        g = per_example(params, xb, yb)
        flat = torch.cat([g[n].reshape(len(yb), -1) for n in names], dim=1).double()
        yield flat[None], clip_factor(flat.norm(dim=1), clip_norm)[None]


def low_gradient_coordinates(
    model: torch.nn.Module,
    batches: Iterable[tuple[torch.Tensor, torch.Tensor]],
    m: int,
    clip_norm: float,
    seed: int = 0,
    loss_fn: Any = None,
) -> np.ndarray:
    """The ``m`` coordinates of ``model`` (flat, ``model.parameters()`` order) with the least
    data gradient (:func:`dpaudit.canaries.gradient_space.gradient_mass` at the initial model,
    clipped as Opacus clips; ties broken at random from
    ``seed``): pass them as ``coordinates=`` to :func:`dpaudit.attach.opacus` or
    :class:`dpaudit.attach.GradientCanaries`. Call it before training."""
    mass = gradient_mass(_clipped_gradients(model, batches, clip_norm, loss_fn))
    if mass is None:
        raise ValueError("no records in the batches: give the training data")
    return lowest_mass_coordinates(mass, m, derive_seed(seed, "attach", "placement") % 2**32)
