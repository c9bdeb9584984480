"""Audit your own Opacus training in one run: a plain Opacus script plus the lines marked
``# dpaudit`` (README, "Audit your own training"; docs/own_training.md).

Trains a 64-256-10 MLP with DP-SGD (Opacus, Poisson sampling) on scikit-learn's bundled 8x8
digits (offline), with m Dirac gradient canaries attached to the optimizer (white box) or, with
``--kind mislabeled``, m mislabeled canary records added to the training set (black box). Writes
the score file and the audit table and prints the verdict. Under a minute on one CPU core::

    python examples/audit_opacus.py                      # white box, m = 1000
    python examples/audit_opacus.py --kind mislabeled    # black box
    dpaudit audit results/own_training/scores.npz        # any estimator on the score file
"""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import dpaudit.attach  # dpaudit
from dpaudit import scores, tables  # dpaudit
from dpaudit.data.bundled import load_digits
from dpaudit.opacus_import import import_opacus

import_opacus()  # Opacus without the logging handler it installs (plain `import opacus` works)
from opacus import PrivacyEngine  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kind", default="gradient", choices=["gradient", "mislabeled"])
    p.add_argument("--m", type=int, default=1000, help="canaries")
    p.add_argument("--placement", default="low_gradient", choices=["low_gradient", "random"])
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=500, help="expected (Poisson) batch size")
    p.add_argument("--noise-multiplier", type=float, default=3.0)
    p.add_argument(
        "--claim-noise-multiplier",
        type=float,
        help="plant a bug: claim the epsilon of this noise multiplier (default: the one used)",
    )
    p.add_argument("--delta", type=float, default=1e-5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="results/own_training")
    args = p.parse_args(argv)
    warnings.filterwarnings("ignore", message=".*[Ss]ecure RNG.*")
    torch.manual_seed(args.seed)

    digits = load_digits()
    x = torch.tensor(digits["x"], dtype=torch.float32).reshape(-1, 64) / 16.0
    train_set = TensorDataset(x, torch.tensor(digits["y"]))
    if args.kind == "mislabeled":  # dpaudit (black box)
        train_set = dpaudit.attach.CanaryDataset(train_set, m=args.m, seed=args.seed)  # dpaudit
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=2.0)
    where = None  # white box: the coordinates the data's gradients move least (or random)
    if args.kind == "gradient" and args.placement == "low_gradient":
        batches = DataLoader(train_set, batch_size=256)  # dpaudit
        where = dpaudit.attach.low_gradient_coordinates(model, batches, args.m, 1.0)  # dpaudit
    engine = PrivacyEngine(accountant="prv")
    model, optimizer, train_loader = engine.make_private(
        module=model,
        optimizer=optimizer,
        data_loader=DataLoader(train_set, batch_size=args.batch_size, shuffle=True),
        noise_multiplier=args.noise_multiplier,
        max_grad_norm=1.0,
    )
    if args.kind == "gradient":  # dpaudit (white box)
        auditor = dpaudit.attach.opacus(  # dpaudit
            optimizer, data_loader=train_loader, m=args.m, seed=args.seed, coordinates=where
        )  # dpaudit

    for _ in range(args.epochs):
        for xb, yb in train_loader:
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(xb), yb).backward()
            optimizer.step()
    claimed = engine.get_epsilon(args.delta)
    if args.claim_noise_multiplier is not None:  # the planted bug: noise for another setting
        from dpaudit.accounting.dpsgd import epsilon

        steps = args.epochs * len(train_loader)
        q = 1 / len(train_loader)
        claimed = epsilon("prv", args.claim_noise_multiplier, q, steps, args.delta)

    if args.kind == "mislabeled":  # dpaudit (black box)
        train_set.score(model)  # dpaudit
        auditor = train_set  # dpaudit
    result = auditor.audit(claimed, delta=args.delta, accountant="prv")  # dpaudit
    out = Path(args.out)  # dpaudit
    scores.write(out / "scores.npz", result.score_file)  # dpaudit
    tables.write_audit_csv(out / "audit.csv", result.table)  # dpaudit
    print(result)  # dpaudit
    print(f"wrote {out / 'scores.npz'} and {out / 'audit.csv'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
