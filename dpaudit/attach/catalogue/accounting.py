"""Catalogue scripts whose one bug is in the accounting: the claim is computed for another
mechanism than the one that ran. Their true epsilons:
:mod:`dpaudit.attach.catalogue.true_epsilon`."""

from __future__ import annotations

from typing import Any

import numpy as np

from dpaudit.attach.catalogue.common import (
    clip_rows,
    digits_mlp,
    loop,
    opacus_engine,
    opacus_training,
    train_opacus,
)
from dpaudit.keys import CLAIMED_EPSILON

#: Physical batches accumulated into one noisy step (jax_privacy #234, #288, PR #267).
ACCUMULATION = 2


def fewer_steps_claimed(data: dict[str, np.ndarray], audit: Any, seed: int, device: str) -> dict:
    """``make_private_with_epsilon`` told 1 epoch, ``train.epochs`` trained, the target
    reported as the claim (a claim computed for fewer steps than were used)."""
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    run = digits_mlp(data, audit, seed, device)
    where = run.coordinates(audit.m)  # the documented placement, before make_private
    engine = opacus_engine(run.accountant)
    model, optimizer, loader = engine.make_private_with_epsilon(
        module=run.model,
        optimizer=torch.optim.SGD(run.model.parameters(), lr=run.lr),
        data_loader=DataLoader(TensorDataset(run.x, run.y), batch_size=run.batch),
        target_epsilon=run.target,
        target_delta=run.delta,
        epochs=1,  # BUG: the loop below runs run.epochs
        max_grad_norm=run.clip,
    )
    audit.opacus(optimizer, data_loader=loader, coordinates=where)
    train_opacus(model, optimizer, loader, run.epochs)
    return {
        CLAIMED_EPSILON: run.target,
        "accountant": run.accountant,
        "test_accuracy": run.accuracy(),
        "meta": {"bug": "fewer_steps_claimed"},
    }


def full_dataset_size(data: dict[str, np.ndarray]) -> int:
    """The dataset size the buggy claim uses: training and test records together."""
    return len(data["y_train"]) + len(data["y_test"])


def larger_dataset_claimed(
    data: dict[str, np.ndarray], audit: Any, seed: int, device: str
) -> dict:
    """The noise calibrated for sample rate B / N with N the whole dataset (training and test
    records) while the training set is smaller; the target reported as the claim."""
    from torch.utils.data import DataLoader, TensorDataset

    run = digits_mlp(data, audit, seed, device)
    sigma = run.sigma(run.batch / full_dataset_size(data))  # BUG: not the training set's size
    loader = DataLoader(TensorDataset(run.x, run.y), batch_size=run.batch)
    result = opacus_training(run, audit, loader, sigma, "larger_dataset_claimed")
    return result | {CLAIMED_EPSILON: run.target}


def accumulation_counted_twice(
    data: dict[str, np.ndarray], audit: Any, seed: int, device: str
) -> dict:
    """Gradient accumulation: each noisy step sums two physical batches (a Poisson batch at
    rate q, split in two); the accounting counts physical batches, rate q / 2 and twice the
    steps (train steps counted two ways, jax_privacy #234, #288, PR #267). Plain PyTorch,
    audited with the core placed as examples/audit_handwritten.py places it."""
    import torch

    from dpaudit.accounting.dpsgd import poisson_epsilon

    run = digits_mlp(data, audit, seed, device)
    q, c = run.q, run.clip
    physical_q, physical_steps = q / ACCUMULATION, run.steps * ACCUMULATION  # the user's view
    sigma = run.sigma(physical_q, physical_steps)
    lp = loop(run, audit, physical_q, c)
    for _ in range(run.steps):
        rows = lp.poisson_batch(run.n, q).nonzero()[:, 0]
        summed = torch.zeros(lp.n_params, device=run.device)
        for part in rows.tensor_split(ACCUMULATION):  # accumulate physical batches
            summed += clip_rows(lp.gradients(part, len(part)), c).sum(0)
        lp.release(lp.with_canaries(summed) + sigma * c * lp.noise(), run.batch)
    lp.finish()
    # the claim counts physical batches: rate q / 2 over twice the steps
    eps = poisson_epsilon(sigma, physical_q, physical_steps, run.delta, run.accountant)
    return {
        CLAIMED_EPSILON: eps,
        "accountant": run.accountant,
        "test_accuracy": run.accuracy(),
        "meta": {"bug": "accumulation_counted_twice"},
    }
