"""Catalogue scripts whose one bug is in how batches are drawn or sized.

Each is an Opacus user's script on the digits MLP, attached as README "Audit your own
training" shows (``data_loader=`` the loader ``make_private`` returned); the auditor is told
nothing about the bug. Their true epsilons: :mod:`dpaudit.attach.catalogue.true_epsilon`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dpaudit.attach.catalogue.common import digits_mlp, opacus_training

#: The class a user's ``WeightedRandomSampler`` draws more often, and how much more.
UPWEIGHTED_CLASS = 0
UPWEIGHT = 10.0
#: Records kept by the script of Opacus #819 (the rest held out): 4 batches of exactly 350.
FLOORED_N, FLOORED_BATCH = 1400, 350
#: The tiny dataset of Opacus #571: 40 records in batches of 10.
TINY_N, TINY_BATCH = 40, 10


def shuffled_batches(data: dict[str, np.ndarray], audit: Any, seed: int, device: str) -> dict:
    """Shuffled fixed-size batches (``poisson_sampling=False``), accounted by Opacus as
    Poisson sampling at 1 / len(loader) (Opacus #80, PR #128; Chua et al. 2024,
    arXiv:2403.17673; Annamalai et al. 2024, arXiv:2411.10614)."""
    from torch.utils.data import DataLoader, TensorDataset

    run = digits_mlp(data, audit, seed, device)
    loader = DataLoader(
        TensorDataset(run.x, run.y),
        batch_size=run.batch,
        shuffle=True,
        generator=run.generator("loader", "cpu"),
    )
    sigma = run.sigma()
    return opacus_training(run, audit, loader, sigma, "shuffled_batches", poisson_sampling=False)


def _weighted_loader(run: Any) -> Any:
    import torch
    from torch.utils.data import DataLoader, TensorDataset, WeightedRandomSampler

    weights = torch.where(run.y.cpu() == UPWEIGHTED_CLASS, UPWEIGHT, 1.0).double()
    sampler = WeightedRandomSampler(weights, run.n, generator=run.generator("loader", "cpu"))
    return DataLoader(TensorDataset(run.x, run.y), batch_size=run.batch, sampler=sampler)


def weighted_sampler_kept(
    data: dict[str, np.ndarray], audit: Any, seed: int, device: str
) -> dict:
    """A ``WeightedRandomSampler`` (class 0 drawn ten times as often, with replacement) kept
    by ``poisson_sampling=False`` and accounted at Opacus' uniform 1 / len(loader) (Opacus
    #600, #813)."""
    run = digits_mlp(data, audit, seed, device)
    loader, sigma, bug = _weighted_loader(run), run.sigma(), "weighted_sampler_kept"
    return opacus_training(run, audit, loader, sigma, bug, poisson_sampling=False)


def weighted_sampler_replaced(
    data: dict[str, np.ndarray], audit: Any, seed: int, device: str
) -> dict:
    """The same ``WeightedRandomSampler`` given to ``make_private`` with Poisson sampling on:
    Opacus silently replaces it by its uniform Poisson sampler (Opacus #813; PRs #814,
    #815). Private as claimed; the training the user asked for is not the one that ran."""
    run = digits_mlp(data, audit, seed, device)
    loader, sigma = _weighted_loader(run), run.sigma()
    return opacus_training(run, audit, loader, sigma, "weighted_sampler_replaced")


def floored_expected_batch(
    data: dict[str, np.ndarray], audit: Any, seed: int, device: str
) -> dict:
    """Opacus on 1,400 records in batches of 350: the update is divided by the floored
    expected batch size int(n q), 350 here and 349 without any one record, a scale the
    accounting does not model (Opacus #819)."""
    from torch.utils.data import DataLoader, TensorDataset

    run = digits_mlp(data, audit, seed, device, n=FLOORED_N)
    run.batch = FLOORED_BATCH
    loader = DataLoader(TensorDataset(run.x, run.y), batch_size=run.batch)
    return opacus_training(run, audit, loader, run.sigma(), "floored_expected_batch")


def tiny_dataset(data: dict[str, np.ndarray], audit: Any, seed: int, device: str) -> dict:
    """Opacus on a tiny dataset (40 records, batches of 10): the expected batch size
    int(n q) that normalises the update is 10, and 9 without any one record (Opacus
    #571)."""
    from torch.utils.data import DataLoader, TensorDataset

    run = digits_mlp(data, audit, seed, device, n=TINY_N)
    run.batch = TINY_BATCH
    loader = DataLoader(TensorDataset(run.x, run.y), batch_size=run.batch)
    return opacus_training(run, audit, loader, run.sigma(), "tiny_dataset")
