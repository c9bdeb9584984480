"""Per-step cost of auditing one's own Opacus training with the conformance checks on (issue 37,
Done when 3: "the checks and canaries cost at most 5% of an Opacus step at m = 1000 on the MLP
and LeNet-5").

    OMP_NUM_THREADS=1 PYTHONPATH=. python benchmarks/bench_attach_checks.py [--quick]

Two trainings of each model, built alike (same initial weights, data, Poisson loader), take
turns one logical step at a time (AB, BA, AB, ...; the order flips every pair, so a change of
machine load or a cache effect falls on both): Opacus ``make_private`` with Poisson sampling,
**without** dpaudit and **with** ``dpaudit.attach.opacus(optimizer, data_loader=loader, m=1000,
seed=0)`` exactly as README "Audit your own training" shows, which turns on every per-step
part: the m Dirac canaries drawn and added before the noise, the observed noisy sums (scores,
non-finite count, noise check's running sums), the sampling record of the records the loader
delivers (its wrapped batch sampler), the step count, the sensitivity probes placed in Opacus'
per-example gradient rows and read before the noise, and the divisor ``scale_grad`` applies
(the normalisation check). A step runs from fetching the
batch (Poisson sampling, the record) to the end of ``optimizer.step()``, timed in CPU seconds of
this process (``time.process_time``, one torch thread: other processes on the machine do not
count). Models: the catalogue's digits MLP (64-256-10 on the bundled 8x8 digits, 1,438 records,
expected batch 360: ``config/cpu/own_training.yaml``) and LeNet-5 (``dpaudit.models``, 1x28x28
random images, 9,999 records, expected batch 100 as the shuffling paper's FashionMNIST Fig. 6
config). Printed: the median step of each, their ratio (overhead), a bootstrap 95% interval of
the ratio over the step pairs, and the auditor's own share (CPU time inside its own hooks, minus
the Opacus code they call, per step / the unaudited median step); then the one-off audit after
training (``auditor.audit`` with the conformance report, and ``str(result)``), not per step.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import dpaudit.attach
from dpaudit.data.bundled import load_digits
from dpaudit.models import build_for_data
from dpaudit.opacus_import import import_opacus

import_opacus()
from opacus import PrivacyEngine  # noqa: E402

SIGMA, CLIP, LR, DELTA, M = 1.0, 1.0, 0.1, 1e-5, 1000
#: model -> (expected batch, records); see the module docstring.
SETTINGS = {"mlp": (360, 1438), "lenet": (100, 9999)}


def _data(name: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The training records: the bundled digits (flattened, / 16) or random 1x28x28 images."""
    n = SETTINGS[name][1]
    if name == "mlp":
        d = load_digits()
        x = torch.as_tensor(d["x"], dtype=torch.float32).flatten(1)[:n] / 16
        return x, torch.as_tensor(d["y"])[:n]
    g = torch.Generator().manual_seed(0)
    return torch.randn(n, 1, 28, 28, generator=g), torch.randint(0, 10, (n,), generator=g)


def _model(name: str) -> nn.Module:
    if name == "mlp":  # the catalogue's (dpaudit.attach.catalogue.common.digits_mlp)
        return nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))
    return build_for_data({"name": "lenet"}, (1, 28, 28), 10)


class Training:
    """One Opacus training (model, DP optimizer, Poisson loader) and, maybe, its auditor."""

    def __init__(self, name: str, audited: bool, clock: Callable[[], float]) -> None:
        torch.manual_seed(0)  # same initial weights for both
        x, y = _data(name)
        model = _model(name)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.model, self.opt, self.loader = PrivacyEngine(accountant="prv").make_private(
                module=model,
                optimizer=torch.optim.SGD(model.parameters(), lr=LR),
                data_loader=DataLoader(TensorDataset(x, y), batch_size=SETTINGS[name][0]),
                noise_multiplier=SIGMA,
                max_grad_norm=CLIP,
                poisson_sampling=True,
            )
        # as README "Audit your own training" shows
        self.auditor = (
            dpaudit.attach.opacus(self.opt, data_loader=self.loader, m=M, seed=0)
            if audited
            else None
        )
        self.clock = clock
        self.own = 0.0  # CPU seconds inside the auditor's hooks, less the Opacus code they call
        self.times: list[float] = []
        self._batches = self._forever()
        self._loss = nn.CrossEntropyLoss()

    def _forever(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        while True:
            yield from self.loader

    def time_hooks(self) -> None:
        """Count the CPU time inside the auditor's hooks (the ``add_noise`` and ``scale_grad``
        wrappers, the probes' ``clip_and_accumulate`` wrapper, the sampling record's
        ``deliver``), less the Opacus methods the wrappers call."""
        aud = self.auditor
        assert aud is not None
        clock, inner = self.clock, [0.0]

        def timed_inner(fn: Callable[[], None]) -> Callable[[], None]:
            def call() -> None:
                t0 = clock()
                fn()
                inner[0] += clock() - t0

            return call

        def timed_outer(fn: Callable[..., None]) -> Callable[..., None]:
            def call(*args: Any) -> None:
                inner[0] = 0.0
                t0 = clock()
                fn(*args)
                self.own += clock() - t0 - inner[0]

            return call

        aud._original_add_noise = timed_inner(aud._original_add_noise)
        self.opt.add_noise = timed_outer(aud._add_noise)
        aud._original_scale_grad = timed_inner(aud._original_scale_grad)
        self.opt.scale_grad = timed_outer(aud._scale_grad)
        hook = aud._probe_hook
        if hook is not None:
            hook._original = timed_inner(hook._original)
            self.opt.clip_and_accumulate = timed_outer(hook._clip_and_accumulate)
        record = aud.sampling_record
        assert record is not None
        record.deliver = timed_outer(record.deliver)  # type: ignore[method-assign]

    def step(self) -> float:
        """One logical step; returns (and keeps) its CPU seconds."""
        t0 = self.clock()
        x, y = next(self._batches)
        self.opt.zero_grad(set_to_none=True)
        if len(y):
            self._loss(self.model(x), y).backward()
        self.opt.step()
        dt = self.clock() - t0
        self.times.append(dt)
        return dt


def _bootstrap(a: np.ndarray, b: np.ndarray, reps: int, seed: int = 0) -> tuple[float, float]:
    """95% percentile interval of median(b) / median(a) over resampled step pairs."""
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(a), size=(reps, len(a)))
    ratios = np.median(b[idx], axis=1) / np.median(a[idx], axis=1)
    lo, hi = np.percentile(ratios, [2.5, 97.5])
    return float(lo), float(hi)


def run(name: str, pairs: int, warmup: int, clock: Callable[[], float]) -> dict[str, Any]:
    """Interleaved steps of the two trainings of ``name``; the row of the table."""
    plain, audited = Training(name, False, clock), Training(name, True, clock)
    for _ in range(warmup):  # untimed: allocations, caches
        plain.step()
        audited.step()
    plain.times, audited.times = [], []
    audited.time_hooks()
    own_steps = audited.auditor.steps  # type: ignore[union-attr]
    for i in range(pairs):
        for t in (plain, audited) if i % 2 == 0 else (audited, plain):
            t.step()
    a, b = np.array(plain.times), np.array(audited.times)
    aud = audited.auditor
    assert aud is not None
    own = audited.own / (aud.steps - own_steps)
    t0 = clock()
    result = aud.audit(delta=DELTA, accountant="prv")
    text = str(result)
    audit_s = clock() - t0
    lo, hi = _bootstrap(a, b, 2000)
    n_params = sum(p.numel() for p in plain.model.parameters())
    row = {
        "model": name,
        "params": n_params,
        "batch": SETTINGS[name][0],
        "records": SETTINGS[name][1],
        "pairs": pairs,
        "without_ms": 1e3 * float(np.median(a)),
        "with_ms": 1e3 * float(np.median(b)),
        "overhead": float(np.median(b) / np.median(a) - 1),
        "overhead_lo": lo - 1,
        "overhead_hi": hi - 1,
        "own_ms": 1e3 * own,
        "own_share": own / float(np.median(a)),
        "audit_s": audit_s,
        "audited_steps": aud.steps,
        "report_checks": text.count("\n"),
    }
    print(json.dumps(row), flush=True)
    return row


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            cwd=Path(__file__).resolve().parent,
        )
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _markdown(rows: list[dict[str, Any]]) -> str:
    lines = [
        f"commit {_commit()}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"{torch.get_num_threads()} torch thread(s), m = {M}, sigma {SIGMA}, C {CLIP}",
        "",
        "| model (params) | batch (records) | step without, ms | step with, ms | overhead "
        "(95% bootstrap) | auditor's own ms/step (share) | audit after training, s |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['model']} ({r['params']:,}) | {r['batch']} ({r['records']:,}) | "
            f"{r['without_ms']:.2f} | {r['with_ms']:.2f} | **{100 * r['overhead']:+.1f}%** "
            f"({100 * r['overhead_lo']:+.1f}% to {100 * r['overhead_hi']:+.1f}%) | "
            f"{r['own_ms']:.3f} ({100 * r['own_share']:.2f}%) | {r['audit_s']:.2f} |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", choices=sorted(SETTINGS), default=["mlp", "lenet"])
    ap.add_argument("--pairs", type=int, default=0, help="step pairs (0: mlp 1000, lenet 300)")
    ap.add_argument("--warmup", type=int, default=10, help="untimed steps of each first")
    ap.add_argument("--quick", action="store_true", help="40 pairs each (a smoke run)")
    ap.add_argument("--json", help="also write the rows to this JSON file")
    args = ap.parse_args()
    warnings.filterwarnings("ignore", message=".*backward hook.*")
    torch.set_num_threads(1)
    default_pairs = {"mlp": 1000, "lenet": 300}
    rows = []
    for name in args.models:
        pairs = 40 if args.quick else args.pairs or default_pairs[name]
        rows.append(run(name, pairs, args.warmup, time.process_time))
    print()
    print(_markdown(rows))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
