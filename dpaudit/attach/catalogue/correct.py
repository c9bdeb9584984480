"""Correct DP-SGD scripts, attached as the docs show: the catalogue's references."""

from __future__ import annotations

from typing import Any

import numpy as np

from dpaudit.attach.catalogue.common import (
    claim_settings,
    clip_rows,
    digits_mlp,
    flat,
    load_params,
    opacus_training,
    params_of,
    per_example_gradients,
    sgd_step,
)


def opacus_poisson(data: dict[str, np.ndarray], audit: Any, seed: int, device: str) -> dict:
    """Opacus ``make_private`` with Poisson sampling, the epsilon its engine reports."""
    from torch.utils.data import DataLoader, TensorDataset

    run = digits_mlp(data, audit, seed, device)
    loader = DataLoader(TensorDataset(run.x, run.y), batch_size=run.batch)
    return opacus_training(run, audit, loader, run.sigma(), "none")


def opacus_batch_memory_manager(
    data: dict[str, np.ndarray], audit: Any, seed: int, device: str
) -> dict:
    """Opacus with ``BatchMemoryManager`` (physical batches of at most B / 3)."""
    from torch.utils.data import DataLoader, TensorDataset

    run = digits_mlp(data, audit, seed, device)
    loader = DataLoader(TensorDataset(run.x, run.y), batch_size=run.batch)
    physical = max(1, run.batch // 3)
    return opacus_training(run, audit, loader, run.sigma(), "none", physical_batch=physical)


def handwritten(data: dict[str, np.ndarray], audit: Any, seed: int, device: str) -> dict:
    """Plain PyTorch DP-SGD (examples/audit_handwritten.py): Poisson sampling, per-example
    clipping, noise sigma C on the sum, update divided by the batch size B the script chose: a
    public constant (a divisor computed from the dataset size, as q n, would reveal n)."""
    import torch

    run = digits_mlp(data, audit, seed, device)
    sigma, q, c = run.sigma(), run.q, run.clip
    params, grads = params_of(run.model), per_example_gradients(run.model)
    n_params = sum(v.numel() for v in params.values())
    canaries = audit.gradient_canaries(n_params, q, c, coordinates=run.coordinates(audit.m))
    gen = run.generator("steps")
    for _ in range(run.steps):
        batch = torch.rand(run.n, generator=gen, device=run.device) < q  # Poisson sampling
        b = int(batch.sum())
        g = canaries.probe_rows(flat(grads(params, run.x[batch], run.y[batch]), b))
        summed = clip_rows(g, c).sum(0)
        summed += torch.from_numpy(canaries.canary_gradient(canaries.draw_step())).to(summed)
        noisy = summed + sigma * c * torch.randn(n_params, generator=gen, device=run.device)
        canaries.observe(noisy.cpu().numpy())
        sgd_step(params, noisy / run.batch, run.lr)
    load_params(run.model, params)
    return claim_settings(sigma, q, run.steps, run, "none")
