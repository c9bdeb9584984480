"""Overhead of auditing one's own Opacus training (``dpaudit.attach``, issue 25): the time of an
Opacus DP-SGD step with and without the white-box gradient canaries attached
(:func:`dpaudit.attach.opacus`, m = 100, 1000, 10,000) and with the black-box
:class:`~dpaudit.attach.CanaryDataset` (m = 1000) in place of the training set, for a few models,
without and with ``BatchMemoryManager``; then the one-off cost of scoring and auditing.

    OMP_NUM_THREADS=1 python benchmarks/bench_attach.py [--quick] [--json out.json]

Every variant is its own model, optimizer and loader, built once; the variants take turns in
blocks of ``--steps`` logical steps (the order reversed every repetition, so that machine load
hits them alike), and every block of every variant starts from the same torch seed (same
Poisson batches where the datasets match, same noise). A step's time runs from the end of the
previous logical step to the end of this one: fetching the batch (Poisson sampling, collation),
forward, backward, per-example clipping, noise and the update; with ``BatchMemoryManager`` all
physical passes of the logical step. Clock: CPU seconds of this process on the CPU, wall seconds
after ``torch.cuda.synchronize`` on a GPU. Prints markdown tables: the median step time of each
variant and its ratio to the unaudited training (ratio of medians; the range is over the blocks'
paired ratios).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import warnings
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from dpaudit.attach import CanaryDataset, opacus
from dpaudit.models import build_for_data
from dpaudit.opacus_import import import_opacus

import_opacus()
from opacus import PrivacyEngine  # noqa: E402
from opacus.utils.batch_memory_manager import BatchMemoryManager  # noqa: E402

#: name -> (model block, input shape); digits-sized (28x28) and CIFAR-sized (3x32x32) inputs.
MODELS: dict[str, tuple[dict[str, Any], tuple[int, ...]]] = {
    "logreg": ({"name": "logreg"}, (784,)),
    "mlp": ({"name": "mlp", "hidden": [256, 256]}, (784,)),
    "lenet": ({"name": "lenet"}, (1, 28, 28)),
    "cnn": ({"name": "cnn"}, (3, 32, 32)),
}
SIGMA, CLIP, LR, DELTA = 1.0, 1.0, 0.1, 1e-5


class Variant:
    """One training (model, DP optimizer, loader) and, maybe, its auditor or canary dataset."""

    def __init__(self, label: str, model: nn.Module, opt: Any, loader: Any, audit: Any) -> None:
        self.label, self.model, self.opt, self.loader, self.audit = label, model, opt, loader, audit
        self.times: list[float] = []  # seconds per logical step, over all blocks
        self.blocks: list[float] = []  # median seconds per logical step, per block
        self.steps = 0
        self.hook_s = 0.0  # white box: CPU seconds in the auditor's own code (not Opacus')
        self.hook_calls = 0


def _time_hook(v: Variant, clock: Callable) -> None:
    """Count the time the attached auditor spends in its own code: its ``add_noise`` wrapper
    minus the Opacus ``add_noise`` that the wrapper calls."""
    aud, original = v.audit, v.audit._original_add_noise
    inner = [0.0]

    def timed_original() -> None:
        t0 = clock()
        original()
        inner[0] += clock() - t0

    def timed_wrapper() -> None:
        inner[0] = 0.0
        t0 = clock()
        aud._add_noise()
        v.hook_s += clock() - t0 - inner[0]
        v.hook_calls += 1

    aud._original_add_noise = timed_original
    v.opt.add_noise = timed_wrapper


def _dataset(shape: tuple[int, ...], n: int) -> TensorDataset:
    g = torch.Generator().manual_seed(0)
    return TensorDataset(
        torch.randn(n, *shape, generator=g), torch.randint(0, 10, (n,), generator=g)
    )


def _variant(label, spec, shape, data, batch, device, white_m=None, black_m=None) -> Variant:
    torch.manual_seed(0)  # every variant starts from the same weights
    model = build_for_data(spec, shape, 10).to(device)
    train_set = data if black_m is None else CanaryDataset(data, m=black_m, seed=0)
    loader = DataLoader(train_set, batch_size=batch)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model, opt, loader = PrivacyEngine(accountant="prv").make_private(
            module=model,
            optimizer=torch.optim.SGD(model.parameters(), lr=LR),
            data_loader=loader,
            noise_multiplier=SIGMA,
            max_grad_norm=CLIP,
            poisson_sampling=True,
        )
    audit = None
    if white_m is not None:
        audit = opacus(opt, m=white_m, seed=0, data_loader=loader)
    elif black_m is not None:
        audit = train_set
    return Variant(label, model, opt, loader, audit)


def _block(v: Variant, steps: int, physical: int | None, device: str, clock: Callable) -> None:
    """``steps`` logical steps of ``v``; appends the time of each to ``v.times``."""
    loss_fn = nn.CrossEntropyLoss()
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    if physical is None:
        batches, manager = iter(v.loader), None
    else:
        manager = BatchMemoryManager(
            data_loader=v.loader, max_physical_batch_size=physical, optimizer=v.opt
        )
        batches = iter(manager.__enter__())
    times = []
    sync()
    t0 = clock()
    for x, y in batches:
        x, y = x.to(device), y.to(device)
        v.opt.zero_grad(set_to_none=True)
        if len(y):
            loss_fn(v.model(x), y).backward()
        v.opt.step()
        if v.opt._is_last_step_skipped:  # a virtual step of BatchMemoryManager
            continue
        sync()
        t1 = clock()
        times.append(t1 - t0)
        t0 = t1
        if len(times) == steps:
            break
    if manager is not None:
        manager.__exit__(None, None, None)
    v.opt.zero_grad(set_to_none=True)  # free the per-example gradients between blocks
    if len(times) < steps:
        raise RuntimeError(f"{v.label}: the loader ran out after {len(times)} steps; raise --n")
    v.times += times
    v.blocks.append(statistics.median(times))
    v.steps += steps


def _one_off(v: Variant, clock: Callable) -> dict[str, float]:
    """Seconds to score (black box: the final model on the m canaries) and to audit (score
    file, claim by the PRV accountant, the verdict estimators) once after training."""
    out = {}
    if isinstance(v.audit, CanaryDataset):
        t0 = clock()
        v.audit.score(v.model)
        out["score_s"] = clock() - t0
        q = float(v.loader.sample_rate)
        settings = {"noise_multiplier": SIGMA, "sample_rate": q, "steps": v.steps}
    else:
        out["score_s"] = 0.0  # the white-box scores accumulate during training
        settings = {}
    t0 = clock()
    res = v.audit.audit(delta=DELTA, accountant="prv", **settings)
    out["audit_s"] = clock() - t0
    out["claimed_epsilon"] = float(res.verdict["claimed_epsilon"].iloc[0])
    out["lower_bound"] = res.lower_bound
    return out


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    device = args.device
    clock = time.perf_counter if device.startswith("cuda") else time.process_time
    rows = []
    for name in args.models:
        spec, shape = MODELS[name]
        data = _dataset(shape, args.n)
        probe = build_for_data(spec, shape, 10)
        n_params = sum(p.numel() for p in probe.parameters())
        n_tensors = len(list(probe.parameters()))
        for physical in [None] if args.no_bmm else [None, args.physical]:
            variants = [_variant("none", spec, shape, data, args.batch, device)]
            for m in args.ms:
                if m <= n_params:
                    variants.append(
                        _variant(f"white m={m}", spec, shape, data, args.batch, device, white_m=m)
                    )
            if args.black_m:
                variants.append(
                    _variant(
                        f"black m={args.black_m}",
                        spec,
                        shape,
                        data,
                        args.batch,
                        device,
                        black_m=args.black_m,
                    )
                )
            for v in variants:  # warm-up (allocations, caches), untimed
                _block(v, 2, physical, device, clock)
                v.times, v.blocks = [], []
                if v.label.startswith("white"):
                    _time_hook(v, clock)
            for rep in range(args.reps):
                for v in variants if rep % 2 == 0 else variants[::-1]:
                    torch.manual_seed(1000 + rep)
                    _block(v, args.steps, physical, device, clock)
            base = variants[0]
            for v in variants:
                paired = [a / b for a, b in zip(v.blocks, base.blocks, strict=True)]
                row = {
                    "model": name,
                    "params": n_params,
                    "tensors": n_tensors,
                    "batch": args.batch,
                    "physical": physical or args.batch,
                    "variant": v.label,
                    "steps": len(v.times),
                    "median_ms": 1e3 * statistics.median(v.times),
                    "ratio": statistics.median(v.times) / statistics.median(base.times),
                    "paired_min": min(paired),
                    "paired_max": max(paired),
                }
                if v.hook_calls:
                    hook = v.hook_s / v.hook_calls
                    row["hook_ms"] = 1e3 * hook
                    row["hook_share"] = hook / statistics.median(base.times)
                if v.audit is not None:
                    row.update(_one_off(v, clock))
                rows.append(row)
                print(json.dumps(row), flush=True)
    return rows


def _markdown(rows: list[dict[str, Any]], args: argparse.Namespace) -> str:
    lines = [
        f"Opacus DP-SGD step, Poisson batch {args.batch}, sigma {SIGMA}, C {CLIP}, device "
        f"{args.device}, {args.reps} x {args.steps} steps per variant ({torch.get_num_threads()} "
        "thread(s)); ratio = median step time / median of the unaudited training",
        "",
        "| model (params, tensors) | physical batch | variant | median ms/step | ratio | "
        "paired range | auditor's own ms/step (share) | score s | audit s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        bmm = "none" if r["physical"] == r["batch"] else f"BMM {r['physical']}"
        one_off = f"{r['score_s']:.3f} | {r['audit_s']:.3f}" if "audit_s" in r else "- | -"
        hook = f"{r['hook_ms']:.3f} ({100 * r['hook_share']:.2f}%)" if "hook_ms" in r else "-"
        lines.append(
            f"| {r['model']} ({r['params']:,}, {r['tensors']}) | {bmm} | {r['variant']} | "
            f"{r['median_ms']:.2f} | **{r['ratio']:.3f}** | "
            f"{r['paired_min']:.3f}-{r['paired_max']:.3f} | {hook} | {one_off} |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--models", nargs="+", choices=sorted(MODELS), default=["logreg", "mlp", "lenet"]
    )
    ap.add_argument("--ms", type=int, nargs="+", default=[100, 1000, 10000])
    ap.add_argument("--black-m", type=int, default=1000, help="0: no black-box variant")
    ap.add_argument("--batch", type=int, default=256, help="expected (logical) batch size")
    ap.add_argument("--physical", type=int, default=64, help="BatchMemoryManager's batch")
    ap.add_argument("--no-bmm", action="store_true", help="only without BatchMemoryManager")
    ap.add_argument("--steps", type=int, default=8, help="logical steps per block")
    ap.add_argument("--reps", type=int, default=4, help="blocks per variant")
    ap.add_argument("--n", type=int, default=10000, help="training records")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--quick", action="store_true", help="mlp only, 2 x 3 steps (a smoke run)")
    ap.add_argument("--json", help="also write the rows to this JSON file")
    args = ap.parse_args()
    warnings.filterwarnings("ignore", message=".*backward hook.*")
    if args.quick:
        args.models, args.steps, args.reps, args.n = ["mlp"], 3, 2, 2000
    if args.device == "cpu":
        torch.set_num_threads(1)
    rows = run(args)
    print()
    print(_markdown(rows, args))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
