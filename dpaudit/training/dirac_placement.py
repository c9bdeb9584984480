"""Dirac canaries placed where the data's gradients move least (``canaries.dirac_placement:
low_gradient``): the white-box adversary of Steinke, Nasr, Jagielski (2023, arXiv:2305.08846,
Section 4.1) picks its canaries' coordinates, and the ones the real records' clipped gradients
move least leave the canaries' summed score to the canary and the noise. The mass is
:func:`dpaudit.canaries.gradient_space.gradient_mass` of the shard's models before training,
clipped as the trainer clips.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from dpaudit.canaries import gradient_space
from dpaudit.training.seeds import ModelSeeds


def dirac_coordinates(
    c: dict[str, Any],
    template_model: Callable[[], torch.nn.Module],
    x_train: np.ndarray,
    y_train: np.ndarray,
    t: dict[str, Any],
    seeds: list[ModelSeeds],
    pool_size: int,
) -> np.ndarray | None:
    """The coordinates of Dirac canaries placed where the data's gradients move least
    (``canaries.dirac_placement: low_gradient``), else None (random coordinates)."""
    if not (c["type"] == "dirac" and c["dirac_placement"] == "low_gradient"):
        return None
    mass = data_gradient_mass(template_model, x_train, y_train, float(t["max_grad_norm"]), seeds)
    return gradient_space.lowest_mass_coordinates(mass, pool_size, c["seed"])


def data_gradient_mass(
    model_fn: Callable[[], torch.nn.Module],
    x: np.ndarray,
    y: np.ndarray,
    max_grad_norm: float,
    seeds: list[ModelSeeds],
    budget: int = 2**25,
) -> np.ndarray:
    """The mean over the records ``(x, y)`` and over the models initialised from ``seeds`` (the
    shard's models, before training) of the absolute clipped per-example gradient, one value
    per parameter (flat, ``named_parameters`` order).

    What ``canaries.dirac_placement: low_gradient`` ranks coordinates by
    (:func:`dpaudit.canaries.gradient_space.lowest_mass_coordinates`): the white-box adversary of
    Steinke, Nasr, Jagielski (2023, arXiv:2305.08846, Section 4.1) picks its Dirac canaries'
    coordinates, and the ones the real records' gradients move least leave the canaries' summed
    score to the canary and the noise. Weights on input features that are constant zero in the
    data get exactly 0. Clipped as the trainer clips (Opacus's factor); records in chunks of
    at most ``budget`` gradient entries (models x records x parameters)."""
    from dpaudit.training.engines import FuncEngine, init_models

    template, params, buffers = init_models(model_fn, seeds)
    engine = FuncEngine(template)
    n_models = len(seeds)
    n_params = sum(v[0].numel() for v in params.values())
    xt, yt = torch.from_numpy(np.ascontiguousarray(x)), torch.from_numpy(np.ascontiguousarray(y))
    chunk = max(1, budget // (n_models * n_params))

    def chunks():  # (M, B, P) clipped as the trainer clips, in its float32
        for i in range(0, len(yt), chunk):
            xb = xt[i : i + chunk].unsqueeze(0).expand(n_models, *xt[i : i + chunk].shape)
            yb = yt[i : i + chunk].long().unsqueeze(0).expand(n_models, -1)
            g, factor = engine.grads_and_factors(params, buffers, xb, yb, max_grad_norm)
            yield torch.cat([v.reshape(*v.shape[:2], -1) for v in g.values()], dim=2), factor

    with torch.no_grad():
        mass = gradient_space.gradient_mass(chunks())
    return np.zeros(n_params) if mass is None else mass
