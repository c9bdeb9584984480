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
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from dpaudit.opacus_import import import_opacus
from dpaudit.training.device import resolve_device

log = logging.getLogger(__name__)

#: ``train.accountant`` and ``train.optimizer`` values the Opacus engine takes.
TRAINING_ACCOUNTANTS = ("rdp", "prv", "gdp")
TRAINING_OPTIMIZERS = ("sgd", "adam")


@dataclass
class DPSGDParams:
    """Hyper-parameters of one DP-SGD run.

    ``target_epsilon=None`` trains without noise (clipping and Poisson sampling stay), the
    "non-private" control whose claimed epsilon is infinite.
    """

    epochs: int
    batch_size: int
    lr: float
    max_grad_norm: float
    delta: float
    target_epsilon: float | None
    momentum: float = 0.0
    accountant: str = "rdp"
    optimizer: str = "sgd"
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8

    def __post_init__(self) -> None:
        if self.optimizer not in TRAINING_OPTIMIZERS:
            raise ValueError(f"optimizer {self.optimizer!r}; allowed: {list(TRAINING_OPTIMIZERS)}")
        if self.optimizer == "adam" and self.momentum:
            raise ValueError(
                f"momentum {self.momentum} applies to SGD; Adam has its own (train.adam_betas)"
            )
        if self.accountant not in TRAINING_ACCOUNTANTS:
            raise ValueError(
                f"accountant {self.accountant!r}; allowed: {list(TRAINING_ACCOUNTANTS)}"
            )
        if self.target_epsilon is not None and not self.target_epsilon > 0:
            raise ValueError(f"target_epsilon must be > 0 (or None), got {self.target_epsilon}")


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


def make_optimizer(model: nn.Module, params: DPSGDParams) -> torch.optim.Optimizer:
    """The optimizer Opacus's ``DPOptimizer`` wraps: SGD (with ``momentum``) or Adam (Kingma &
    Ba 2015, ``betas``, ``eps``) stepping on the privatised gradient."""
    if params.optimizer == "adam":
        return torch.optim.Adam(
            model.parameters(), lr=params.lr, betas=params.betas, eps=params.eps
        )
    return torch.optim.SGD(model.parameters(), lr=params.lr, momentum=params.momentum)


def train_with_canaries(
    model: nn.Module,
    data: dict[str, np.ndarray],
    canary_x: np.ndarray,
    canary_y: np.ndarray,
    membership: np.ndarray,
    params: DPSGDParams,
    seed: int,
    device: str = "auto",
    max_physical_batch: int | None = None,
) -> TrainResult:
    """Train ``model`` with DP-SGD on ``data['x_train']`` plus the IN canaries; score all canaries.

    Deterministic on the CPU for a given ``seed`` (parameter init is the caller's, under the
    same seed; Poisson masks and noise draw from the seeded global torch generator).
    ``max_physical_batch`` (config key ``compute.max_physical_batch``): each Poisson batch goes
    through the model in chunks of at most this many examples, with Opacus's
    ``BatchMemoryManager``: the ``DPOptimizer`` sums the chunks' clipped per-sample gradients and
    adds the noise and steps once per logical batch. The random draws come in the same order
    (a batch's mask, then its noise), so the run is the unchunked one up to floating-point
    round-off; None processes each batch at once.
    """
    import_opacus()
    from opacus import PrivacyEngine

    dev = resolve_device(device)
    _seed_everything(seed)
    inside = membership.astype(bool)
    x = np.concatenate([data["x_train"], canary_x[inside]])
    y = np.concatenate([data["y_train"], canary_y[inside]])
    loader = DataLoader(
        TensorDataset(torch.from_numpy(x), torch.from_numpy(y)),
        batch_size=params.batch_size,
        shuffle=False,
    )
    model = model.to(dev)
    optimizer = make_optimizer(model, params)
    engine = PrivacyEngine(accountant=params.accountant)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Opacus warns about secure RNG; seeds are explicit here
        if params.target_epsilon is None:
            model, optimizer, loader = engine.make_private(
                module=model,
                optimizer=optimizer,
                data_loader=loader,
                noise_multiplier=0.0,
                max_grad_norm=params.max_grad_norm,
                poisson_sampling=True,
            )
        else:
            model, optimizer, loader = engine.make_private_with_epsilon(
                module=model,
                optimizer=optimizer,
                data_loader=loader,
                target_epsilon=params.target_epsilon,
                target_delta=params.delta,
                epochs=params.epochs,
                max_grad_norm=params.max_grad_norm,
                poisson_sampling=True,
            )
    sample_rate = 1.0 / len(loader)
    steps = 0
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(params.epochs):
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
        log.info("epoch %d/%d done (%d steps)", epoch + 1, params.epochs, steps)
    claimed = None
    if params.target_epsilon is not None:
        claimed = float(engine.accountant.get_epsilon(delta=params.delta))
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
        accountant=f"opacus_{params.accountant}" if claimed is not None else "none",
        noise_multiplier=float(optimizer.noise_multiplier),
        sample_rate=sample_rate,
        steps=steps,
        test_accuracy=acc,
    )


def summary(result: TrainResult) -> dict[str, Any]:
    """The scalar facts of a run, for the score file's metadata."""
    return {
        "noise_multiplier": result.noise_multiplier,
        "sample_rate": result.sample_rate,
        "steps": result.steps,
        "test_accuracy": result.test_accuracy,
    }
