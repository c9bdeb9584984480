"""Correct DP-SGD scripts, attached as the docs show: the catalogue's references."""

from __future__ import annotations

from typing import Any

import numpy as np

from dpaudit.attach.catalogue.common import (
    claim_settings,
    clip_rows,
    digits_mlp,
    loop,
    opacus_training,
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
    run = digits_mlp(data, audit, seed, device)
    sigma, q, c = run.sigma(), run.q, run.clip
    lp = loop(run, audit, q, c)
    for _ in range(run.steps):
        batch = lp.poisson_batch(run.n, q)  # Poisson sampling
        g = lp.canaries.probe_rows(lp.gradients(batch, int(batch.sum())))
        summed = lp.with_canaries(clip_rows(g, c).sum(0))
        lp.release(summed + sigma * c * lp.noise(), run.batch)
    lp.finish()
    return claim_settings(sigma, q, run.steps, run, "none")
