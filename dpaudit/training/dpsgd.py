"""One model at a time: DP-SGD with Opacus (Poisson sampling, per-sample clipping, Gaussian noise).

This is the engine of the one-run design (Steinke et al. 2023, Algorithm 1): the training set is
the non-canary data plus the canaries whose coin came up IN; after training, each canary gets
the black-box score ``-loss(final model, canary)`` (higher means IN; Steinke et al. 2023, §4.2).
The claimed epsilon is the one Opacus's accountant reports for the noise it calibrated.
"""

from __future__ import annotations

import contextlib
import logging
import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from dpaudit.accounting.dpsgd import OPACUS_ACCOUNTANTS
from dpaudit.opacus_import import import_opacus
from dpaudit.training.device import resolve_device
from dpaudit.training.spec import RunSpec
from dpaudit.training.step import TRAINING_OPTIMIZERS

log = logging.getLogger(__name__)


def check_opacus_train(train: Mapping[str, Any], target_epsilon: float | None) -> None:
    """Raise ``ValueError`` naming the config key unless the run spec's ``train`` block and
    target epsilon suit the Opacus engine: an Opacus accountant and an optimizer it wraps,
    momentum for SGD only, a target epsilon above 0 (or None: no noise)."""
    if train["optimizer"] not in TRAINING_OPTIMIZERS:
        raise ValueError(f"optimizer {train['optimizer']!r}; allowed: {list(TRAINING_OPTIMIZERS)}")
    if train["optimizer"] == "adam" and train["momentum"]:
        raise ValueError(
            f"momentum {train['momentum']} applies to SGD; Adam has its own (train.adam_betas)"
        )
    if train["accountant"] not in OPACUS_ACCOUNTANTS:
        raise ValueError(f"accountant {train['accountant']!r}; allowed: {list(OPACUS_ACCOUNTANTS)}")
    if target_epsilon is not None and not target_epsilon > 0:
        raise ValueError(f"target_epsilon must be > 0 (or None), got {target_epsilon}")


@dataclass
class TrainResult:
    canary_scores: np.ndarray
    claimed_epsilon: float | None
    accountant: str
    noise_multiplier: float
    sample_rate: float
    steps: int
    test_accuracy: float


def _seed_everything(seed: int) -> None:
    torch.manual_seed(seed)


def canary_losses(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> np.ndarray:
    """Per-example cross-entropy of ``model`` on ``(x, y)``."""
    model.eval()
    with torch.no_grad():
        loss = nn.functional.cross_entropy(model(x), y, reduction="none")
    return loss.cpu().numpy().astype(np.float64)


def accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    model.eval()
    with torch.no_grad():
        return float((model(x).argmax(dim=1) == y).float().mean())


def make_optimizer(model: nn.Module, train: Mapping[str, Any]) -> torch.optim.Optimizer:
    """The optimizer Opacus's ``DPOptimizer`` wraps (the run spec's ``train`` block): SGD
    (with ``momentum``) or Adam (Kingma & Ba 2015, ``adam_betas``, ``adam_eps``) stepping on
    the privatised gradient."""
    if train["optimizer"] == "adam":
        betas = (float(train["adam_betas"][0]), float(train["adam_betas"][1]))
        return torch.optim.Adam(
            model.parameters(), lr=train["lr"], betas=betas, eps=float(train["adam_eps"])
        )
    return torch.optim.SGD(model.parameters(), lr=train["lr"], momentum=train["momentum"])


def train_with_canaries(
    model: nn.Module,
    data: dict[str, np.ndarray],
    canary_x: np.ndarray,
    canary_y: np.ndarray,
    membership: np.ndarray,
    spec: RunSpec | Mapping[str, Any],
    seed: int,
    device: str = "auto",
    max_physical_batch: int | None = None,
) -> TrainResult:
    """Train ``model`` with DP-SGD on ``data['x_train']`` plus the IN canaries; score all canaries.

    The hyper-parameters are the run spec's (:class:`~dpaudit.training.spec.RunSpec`, or a
    mapping with some of its keys, the rest at the schema's defaults): ``train.epochs``,
    ``batch_size``, ``lr``, ``momentum``, ``max_grad_norm``, ``delta``, ``accountant``,
    ``optimizer``, ``adam_betas``, ``adam_eps``, and ``target_epsilon`` (None trains without
    noise: clipping and Poisson sampling stay, the "non-private" control whose claimed epsilon
    is infinite). Deterministic on the CPU for a given ``seed`` (parameter init is the
    caller's, under the same seed; Poisson masks and noise draw from the seeded global torch
    generator). ``max_physical_batch`` (config key ``compute.max_physical_batch``): each
    Poisson batch goes through the model in chunks of at most this many examples, with
    Opacus's ``BatchMemoryManager``: the ``DPOptimizer`` sums the chunks' clipped per-sample
    gradients and adds the noise and steps once per logical batch. The random draws come in
    the same order (a batch's mask, then its noise), so the run is the unchunked one up to
    floating-point round-off; None processes each batch at once.
    """
    import_opacus()
    from opacus import PrivacyEngine

    spec = RunSpec.from_run_spec(spec, drop_settings=True)
    train, target_epsilon = spec.train, spec.target_epsilon
    check_opacus_train(train, target_epsilon)
    dev = resolve_device(device)
    _seed_everything(seed)
    inside = membership.astype(bool)
    x = np.concatenate([data["x_train"], canary_x[inside]])
    y = np.concatenate([data["y_train"], canary_y[inside]])
    loader = DataLoader(
        TensorDataset(torch.from_numpy(x), torch.from_numpy(y)),
        batch_size=train["batch_size"],
        shuffle=False,
    )
    model = model.to(dev)
    optimizer = make_optimizer(model, train)
    engine = PrivacyEngine(accountant=train["accountant"])
    model, optimizer, loader = _make_private(
        engine, model, optimizer, loader, train, target_epsilon
    )
    sample_rate = 1.0 / len(loader)
    steps = _train_epochs(model, optimizer, loader, int(train["epochs"]), dev, max_physical_batch)
    claimed = None
    if target_epsilon is not None:
        claimed = float(engine.accountant.get_epsilon(delta=train["delta"]))
        if not math.isfinite(claimed):
            raise RuntimeError(f"accountant returned a non-finite epsilon ({claimed})")
    cx = torch.from_numpy(canary_x).to(dev)
    cy = torch.from_numpy(canary_y).to(dev)
    scores = -canary_losses(model, cx, cy)
    acc = accuracy(
        model, torch.from_numpy(data["x_test"]).to(dev), torch.from_numpy(data["y_test"]).to(dev)
    )
    return TrainResult(
        canary_scores=scores,
        claimed_epsilon=claimed,
        accountant=f"opacus_{train['accountant']}" if claimed is not None else "none",
        noise_multiplier=float(optimizer.noise_multiplier),
        sample_rate=sample_rate,
        steps=steps,
        test_accuracy=acc,
    )


def _make_private(engine, model, optimizer, loader, train, target_epsilon):
    """Opacus's ``make_private`` (no noise) or ``make_private_with_epsilon`` (noise calibrated
    by Opacus to ``target_epsilon`` over ``train.epochs``), with Poisson sampling."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Opacus warns about secure RNG; seeds are explicit here
        if target_epsilon is None:
            return engine.make_private(
                module=model,
                optimizer=optimizer,
                data_loader=loader,
                noise_multiplier=0.0,
                max_grad_norm=train["max_grad_norm"],
                poisson_sampling=True,
            )
        return engine.make_private_with_epsilon(
            module=model,
            optimizer=optimizer,
            data_loader=loader,
            target_epsilon=target_epsilon,
            target_delta=train["delta"],
            epochs=train["epochs"],
            max_grad_norm=train["max_grad_norm"],
            poisson_sampling=True,
        )


def _train_epochs(model, optimizer, loader, epochs: int, dev, max_physical_batch) -> int:
    """``epochs`` passes over the Poisson ``loader`` (through Opacus's
    ``BatchMemoryManager`` when ``max_physical_batch`` is set); the logical steps taken."""
    steps = 0
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(epochs):
        model.train()
        with contextlib.ExitStack() as stack:
            physical = loader
            if max_physical_batch is not None:
                from opacus.utils.batch_memory_manager import BatchMemoryManager

                physical = stack.enter_context(
                    BatchMemoryManager(
                        data_loader=loader,
                        max_physical_batch_size=max_physical_batch,
                        optimizer=optimizer,
                    )
                )
            for xb, yb in physical:
                if len(xb):  # Poisson sampling can draw an empty batch; it still is a step
                    xb, yb = xb.to(dev), yb.to(dev)
                    loss_fn(model(xb), yb).backward()
                optimizer.step()  # a chunk that does not end its batch only accumulates
                optimizer.zero_grad()
                # (Opacus's flag: whether the step above ended a logical batch)
                steps += not getattr(optimizer, "_is_last_step_skipped", False)
        log.info("epoch %d/%d done (%d steps)", epoch + 1, epochs, steps)
    return steps


def summary(result: TrainResult) -> dict[str, Any]:
    """The scalar facts of a run, for the score file's metadata."""
    return {
        "noise_multiplier": result.noise_multiplier,
        "sample_rate": result.sample_rate,
        "steps": result.steps,
        "test_accuracy": result.test_accuracy,
    }
