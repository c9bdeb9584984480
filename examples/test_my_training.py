"""The conformance checks as a test of your own training, in your own CI (docs/own_training.md,
"In the user's CI"): a few steps of the training, audited, fail the build when the sampling,
the steps, the noise or the accounting departs from the privacy claim. Seconds on one CPU::

    pytest examples/test_my_training.py

Here the training is a small Opacus DP-SGD run on scikit-learn's bundled 8x8 digits (offline);
in your project, build your own model, optimizer and loader in ``make_training``.
"""

from __future__ import annotations

import warnings

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from dpaudit.data.bundled import load_digits
from dpaudit.opacus_import import import_opacus

import_opacus()  # Opacus without the logging handler it installs (plain `import opacus` works)
from opacus import PrivacyEngine  # noqa: E402

pytest_plugins = ["dpaudit.attach.testing"]  # the dpaudit_conformance fixture

DELTA = 1e-5


def make_training(poisson_sampling: bool = True, seed: int = 0):
    """The training under test: (model, optimizer, loader, privacy engine), as the project
    builds it (here: an MLP on the digits, expected batch 450, i.e. q = 1/4)."""
    warnings.filterwarnings("ignore", message=".*(Secure RNG|Full backward hook).*")
    torch.manual_seed(seed)
    digits = load_digits()
    x = torch.tensor(digits["x"], dtype=torch.float32).reshape(-1, 64) / 16.0
    data = TensorDataset(x, torch.tensor(digits["y"]))
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    engine = PrivacyEngine(accountant="rdp")
    model, optimizer, loader = engine.make_private(
        module=model,
        optimizer=torch.optim.SGD(model.parameters(), lr=0.5),
        data_loader=DataLoader(data, batch_size=450, shuffle=True),
        noise_multiplier=1.0,
        max_grad_norm=1.0,
        poisson_sampling=poisson_sampling,
    )
    return model, optimizer, loader, engine


def train(model, optimizer, loader, epochs: int) -> None:
    """The project's training loop (unchanged by the audit)."""
    for _ in range(epochs):
        for xb, yb in loader:
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(xb), yb).backward()
            optimizer.step()


def test_my_training_meets_its_privacy_claim(dpaudit_conformance) -> None:
    model, optimizer, loader, engine = make_training()
    auditor = dpaudit_conformance.opacus(optimizer, data_loader=loader)
    train(model, optimizer, loader, epochs=2)  # 8 noisy steps are enough to catch a departure
    dpaudit_conformance.check(auditor, engine.get_epsilon(DELTA), delta=DELTA, accountant="rdp")
