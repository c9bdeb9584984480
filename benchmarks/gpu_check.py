"""Validate the GPU path in minutes: train the same tiny shards with the same seeds on
``--device`` and on ``--reference-device`` with every training engine, and compare.

    python benchmarks/gpu_check.py [--device cuda] [--reference-device cpu] [--quick]

Run it first on a new GPU machine, before the paper-scale configs (docs/training.md,
"Validating a GPU"). With ``--device cpu --reference-device cpu`` it runs anywhere (that is how
tests/training/test_gpu_check.py exercises it); both sides then agree bit for bit.

Cases (a setting each; ``--quick``: the MLP ones only). The vectorised engine
(:func:`dpaudit.training.shard.run_shard`, design ``one_run``, 3 models, 4 DP-SGD steps, noise
multiplier 0.8) with both per-sample-gradient back ends (``stacked``: the ghost-norm engine;
``func``: ``torch.func``), on an MLP, LeNet-5 and a tiny Wide ResNet (WRN-10-1, ``func`` only:
it is not a plain sequential stack), with input canaries (``random_input``; black-box loss or
white-box dot scores) and Dirac gradient canaries (white-box dot or per-step dot scores), with
Poisson and shuffled batches, unchunked and with ``max_physical_batch`` 8. The Opacus engine
(:func:`dpaudit.training.dpsgd.train_with_canaries`, one model, Poisson batches, random-input
canaries, black-box loss), unchunked and with ``max_physical_batch`` 8. Data: scikit-learn's
bundled 8x8 digits (real images; flattened for the MLP, 3x nearest-neighbour upsampled to
24x24 for LeNet-5), the first 100 as training set, the next 50 as test set.

What is compared, and the tolerance (``|a - b| <= atol + rtol |b|``, ``b`` the reference):

* final parameters, float32: rtol 1e-4, atol 1e-5. The vectorised engine draws its noise on
  the CPU (one torch CPU generator per model) and copies it to the device, and the batches
  are drawn with numpy, so both devices run the same DP-SGD steps; what differs is the order
  of floating-point sums inside the device's kernels (about 1e-7 relative per operation in
  float32), amplified a little over 4 steps. 1e-4 relative leaves room for that and is far
  below what a wrong step (a dropped chunk, noise added twice, a wrong clip factor) changes.
* per-canary scores and the recorded statistics (white-box sums, per-step dots): rtol 1e-4,
  atol 1e-5 times the largest reference score (so the tolerance scales with the score), and
  the same order: every pair of scores whose reference values differ by more than the sum of
  their tolerances must be ordered the same way on both devices, so an audit's IN/OUT
  guesses at any threshold agree wherever the margin allows.
* initial parameters: exactly (both are drawn on the CPU and copied).
* Opacus draws its noise with the generator of the parameters' device (CUDA's Philox on a
  GPU, not the CPU's Mersenne twister), so a noisy Opacus run cannot agree value by value
  across devices; its cases run without noise (``target_epsilon`` None), which still checks
  its Poisson batches (drawn on the CPU), per-sample clipping, the ``BatchMemoryManager``
  chunks, the optimizer and the scores.
* TF32 is switched off on CUDA for the comparison (cuDNN enables it for convolutions by
  default; it rounds inputs to 10 mantissa bits, about 1e-3 relative, which the tolerance
  above is not meant to absorb). ``--allow-tf32`` keeps PyTorch's defaults to see how far
  TF32 moves the results (convolutional cases may then exceed the tolerance).

Two more checks: every reference model must have moved from its initialisation (a comparison
of two untrained models would pass trivially), and each side trains every case ``--repeats``
times (default 2): its runs must agree with each other within the parameter tolerance (GPU
kernels with atomics are not bit-reproducible), and the last run is the one compared and timed
(the first pays the warm-up: CUDA context, kernel selection, first-call overheads).

It prints one row per case: the largest parameter and score differences, the models per second
on each device (of tiny settings: the rates show that the device runs, not paper-scale
throughput) and the peak GPU memory (``torch.cuda.max_memory_allocated``) when a side is CUDA.
Exit status 1 if any case mismatches, with a line naming the engine, the setting and the largest
difference; 2 if a device is not available.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from dataclasses import dataclass, field

import numpy as np
import torch

from dpaudit.canaries.inclusion import fair_coins
from dpaudit.data.bundled import load_digits
from dpaudit.models import build_for_data
from dpaudit.seeding import derive_seed
from dpaudit.training.dpsgd import train_with_canaries
from dpaudit.training.job import JobId
from dpaudit.training.opacus_engine import make_canaries
from dpaudit.training.shard import run_shard

PARAM_RTOL, PARAM_ATOL = 1e-4, 1e-5
SCORE_RTOL, SCORE_ATOL = 1e-4, 1e-5  # SCORE_ATOL is relative to the largest reference score
N_TRAIN, N_TEST = 100, 50
MODEL_SPECS = {
    "mlp": {"name": "mlp", "hidden": [32]},
    "lenet": {"name": "lenet"},
    "wrn": {"name": "wrn", "depth": 10, "width": 1, "groups": 4},
}


@dataclass(frozen=True)
class Case:
    """One setting trained on both devices."""

    engine: str  # stacked | func (the vectorised engine's back ends) | opacus
    model: str  # a key of MODEL_SPECS
    canary: str  # random_input | dirac
    threat_model: str
    sampler: str
    max_physical_batch: int | None

    @property
    def name(self) -> str:
        mpb = "whole" if self.max_physical_batch is None else f"mpb{self.max_physical_batch}"
        return f"{self.model}/{self.canary}/{self.threat_model}/{self.sampler}/{mpb}"


def cases(quick: bool) -> list[Case]:
    """The settings checked (see the module docstring); ``quick``: the MLP only."""
    out = []
    for model in ("mlp",) if quick else ("mlp", "lenet", "wrn"):
        engines = ("func",) if model == "wrn" else ("stacked", "func")
        for i, engine in enumerate(engines):
            out.append(
                Case(engine, model, "random_input",
                     ("white_box_dot", "black_box_loss")[i], ("poisson", "shuffle")[i],
                     (None, 8)[i])
            )  # fmt: skip
            out.append(
                Case(engine, model, "dirac",
                     ("per_step_dot", "white_box_dot")[i], ("shuffle", "poisson")[i],
                     (8, None)[i])
            )  # fmt: skip
    for model in ("mlp",) if quick else ("mlp", "lenet"):
        for mpb in (8,) if quick else (None, 8):
            out.append(Case("opacus", model, "random_input", "black_box_loss", "poisson", mpb))
    return out


def digits_data(model: str) -> dict[str, np.ndarray]:
    """The first ``N_TRAIN + N_TEST`` bundled digits in [0, 1], shaped for ``model``."""
    d = load_digits()
    x = d["x"][: N_TRAIN + N_TEST].astype(np.float32) / 16.0
    y = d["y"][: N_TRAIN + N_TEST]
    if model == "mlp":
        x = x.reshape(len(x), -1)
    elif model == "lenet":  # LeNet-5 needs at least 16x16: nearest-neighbour upsampling
        x = np.ascontiguousarray(x.repeat(3, axis=2).repeat(3, axis=3))
    return {
        "x_train": x[:N_TRAIN],
        "y_train": y[:N_TRAIN],
        "x_test": x[N_TRAIN:],
        "y_test": y[N_TRAIN:],
    }


@dataclass
class Run:
    """What one side of a case produced."""

    params0: torch.Tensor
    params: torch.Tensor
    scores: np.ndarray
    stats: dict[str, np.ndarray]
    models: int
    seconds: float
    peak_bytes: int | None


def _vectorised(case: Case, data, device: str, seed: int) -> Run:
    spec = {
        "design": "one_run",
        "threat_model": case.threat_model,
        "model": MODEL_SPECS[case.model],
        "canaries": {"type": case.canary, "m": 6, "seed": 3},
        "train": {
            "engine": case.engine,
            "models_per_shard": 3,
            "steps": 4,
            "batch_size": 25,
            "lr": 0.5,
            "max_grad_norm": 1.0,
            "noise_multiplier": 0.8,
            "sampler": case.sampler,
            "eval_examples": N_TEST,
        },
        "target_epsilon": None,
    }
    job = JobId("gpu_check", case.name, seed)
    out = run_shard(data, job, spec, device=device, max_physical_batch=case.max_physical_batch)
    res = out.result
    stats = {"white_box": res.white_box, "step_dots": res.step_dots}
    return Run(
        res.flat("params0"),
        res.flat("params"),
        out.score_file.score,
        {k: v for k, v in stats.items() if v is not None},
        len(out.score_file.score),
        0.0,
        None,
    )


def _opacus(case: Case, data, device: str, seed: int) -> Run:
    canaries = {"type": "random_input", "m": 6, "seed": 3, "scale": 6.0}
    cx, cy = make_canaries(data, canaries)
    membership = fair_coins(len(cy), derive_seed(seed, "coins"))
    torch.manual_seed(derive_seed(seed, "init"))
    net = build_for_data(MODEL_SPECS[case.model], data["x_train"].shape[1:], 10)
    params0 = torch.cat([p.detach().reshape(-1).clone() for p in net.parameters()])
    # noise-free: Opacus draws noise with the device's generator (see the module docstring)
    hp = {"train": {"epochs": 1, "batch_size": 25, "lr": 0.5, "max_grad_norm": 1.0},
          "target_epsilon": None}  # fmt: skip
    res = train_with_canaries(
        net,
        data,
        cx,
        cy,
        membership,
        hp,
        derive_seed(seed, "train"),
        device,
        max_physical_batch=case.max_physical_batch,
    )
    params = torch.cat([p.detach().reshape(-1).cpu() for p in net.parameters()])
    return Run(params0, params, res.canary_scores[None, :], {}, 1, 0.0, None)


def train_once(case: Case, data, device: str, seed: int) -> Run:
    """Train ``case`` on ``device`` with run seed ``seed``; timed, with the peak CUDA memory."""
    cuda = torch.device(device).type == "cuda"
    if cuda:
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
    t0 = time.perf_counter()
    run = (_opacus if case.engine == "opacus" else _vectorised)(case, data, device, seed)
    if cuda:
        torch.cuda.synchronize(device)
        run.peak_bytes = int(torch.cuda.max_memory_allocated(device))
    run.seconds = time.perf_counter() - t0
    return run


def _excess(a: np.ndarray, b: np.ndarray, rtol: float, atol: float) -> tuple[float, float]:
    """(largest |a - b|, largest |a - b| / (atol + rtol |b|)): over tolerance when > 1."""
    if a.shape != b.shape:
        return float("inf"), float("inf")
    a, b = a.astype(np.float64), b.astype(np.float64)
    if not a.size:
        return 0.0, 0.0
    d = np.abs(a - b)
    if not np.isfinite(d).all():  # a NaN or an infinity on either side
        return float("inf"), float("inf")
    return float(d.max()), float((d / (atol + rtol * np.abs(b))).max())


def order_flips(dev: np.ndarray, ref: np.ndarray, tol: np.ndarray) -> int:
    """Pairs of scores ordered differently on the two sides although their reference values
    differ by more than the sum of their tolerances ``tol`` (so a threshold between them
    would guess IN/OUT differently on the two devices)."""
    a, r, t = dev.ravel(), ref.ravel(), tol.ravel()
    gap = r[:, None] - r[None, :]
    clear = np.abs(gap) > t[:, None] + t[None, :]
    return int((clear & (np.sign(a[:, None] - a[None, :]) != np.sign(gap))).sum() // 2)


@dataclass
class Outcome:
    case: Case
    param_diff: float
    score_diff: float
    flips: int
    problems: list[str] = field(default_factory=list)
    rates: tuple[float, float] = (0.0, 0.0)
    peaks: tuple[int | None, int | None] = (None, None)

    @property
    def ok(self) -> bool:
        return not self.problems


def compare(case: Case, dev: Run, ref: Run) -> Outcome:
    """The differences between the two sides of ``case`` and what is over tolerance."""
    problems = []
    p_diff, p_ratio = _excess(dev.params.numpy(), ref.params.numpy(), PARAM_RTOL, PARAM_ATOL)
    if p_ratio > 1:
        problems.append(f"final parameters differ by up to {p_diff:.3g}")
    if not torch.equal(dev.params0, ref.params0):
        d0 = float((dev.params0 - ref.params0).abs().max())
        problems.append(f"initial parameters differ by up to {d0:.3g} (must be equal)")
    moved = float((ref.params - ref.params0).abs().max())
    if not moved > 0:
        problems.append("the reference models did not move from their initialisation")
    scale = max(float(np.abs(ref.scores).max(initial=0.0)), 1e-12)
    s_diff, s_ratio = _excess(dev.scores, ref.scores, SCORE_RTOL, SCORE_ATOL * scale)
    if s_ratio > 1:
        problems.append(f"canary scores differ by up to {s_diff:.3g}")
    flips = 0
    if dev.scores.shape == ref.scores.shape:
        tol = SCORE_ATOL * scale + SCORE_RTOL * np.abs(ref.scores)
        flips = order_flips(dev.scores, ref.scores, tol)
        if flips:
            problems.append(f"{flips} pair(s) of canary scores ordered differently")
    for key in sorted(set(dev.stats) | set(ref.stats)):
        if key not in dev.stats or key not in ref.stats:
            problems.append(f"{key} recorded on one side only")
            continue
        sc = max(float(np.abs(ref.stats[key]).max(initial=0.0)), 1e-12)
        d, r = _excess(dev.stats[key], ref.stats[key], SCORE_RTOL, SCORE_ATOL * sc)
        if r > 1:
            problems.append(f"{key} differ by up to {d:.3g}")
    return Outcome(
        case,
        p_diff,
        s_diff,
        flips,
        problems,
        (dev.models / dev.seconds, ref.models / ref.seconds),
        (dev.peak_bytes, ref.peak_bytes),
    )


def run_check(
    device: str,
    reference_device: str,
    quick: bool = False,
    seed: int = 0,
    device_seed: int | None = None,
    selected: list[Case] | None = None,
    repeats: int = 2,
) -> list[Outcome]:
    """Every case of :func:`cases` (or ``selected``) trained on both devices and compared.
    Each side trains ``repeats`` times: the last run is compared and timed (the first pays the
    warm-up: CUDA context, kernel selection, first-call overheads), and the runs of one device
    must agree with each other within the parameter tolerance. TF32 is left as the caller set
    it (:func:`main` switches it off unless ``--allow-tf32``).
    ``device_seed`` (default ``seed``): the run seed of the ``device`` side; another value
    makes every case a mismatch (how the test shows the check can fail)."""
    device_seed = seed if device_seed is None else device_seed
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    data = {}
    outcomes = []
    for case in selected if selected is not None else cases(quick):
        if case.model not in data:
            data[case.model] = digits_data(case.model)
        runs = {}
        for side, d, s in (("device", device, device_seed), ("reference", reference_device, seed)):
            runs[side] = [train_once(case, data[case.model], d, s) for _ in range(repeats)]
        outcome = compare(case, runs["device"][-1], runs["reference"][-1])
        for side, d in (("device", device), ("reference", reference_device)):
            first = runs[side][0].params.numpy()
            for again in runs[side][1:]:
                diff, ratio = _excess(again.params.numpy(), first, PARAM_RTOL, PARAM_ATOL)
                if ratio > 1:
                    outcome.problems.append(
                        f"two runs on {d} differ by up to {diff:.3g} (not reproducible)"
                    )
        outcomes.append(outcome)
    return outcomes


def _mib(b: int | None) -> str:
    return "-" if b is None else f"{b / 2**20:.1f}"


def report(outcomes: list[Outcome], device: str, reference_device: str) -> str:
    """A markdown table of the outcomes and one line per mismatch."""
    lines = [
        f"| engine | setting | max param diff | max score diff | order flips | models/s "
        f"{device} | models/s {reference_device} | peak MiB {device} | peak MiB "
        f"{reference_device} | result |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for o in outcomes:
        lines.append(
            f"| {o.case.engine} | {o.case.name} | {o.param_diff:.2e} | {o.score_diff:.2e} | "
            f"{o.flips} | {o.rates[0]:.2f} | {o.rates[1]:.2f} | {_mib(o.peaks[0])} | "
            f"{_mib(o.peaks[1])} | {'ok' if o.ok else 'MISMATCH'} |"
        )
    for o in outcomes:
        if not o.ok:
            lines.append(
                f"MISMATCH: engine {o.case.engine}, setting {o.case.name}: "
                f"{'; '.join(o.problems)} ({device} vs {reference_device}; tolerance: "
                f"parameters rtol {PARAM_RTOL:g} atol {PARAM_ATOL:g}, scores rtol "
                f"{SCORE_RTOL:g} atol {SCORE_ATOL:g} x the largest score)"
            )
    bad = sum(not o.ok for o in outcomes)
    lines.append(
        f"{len(outcomes) - bad} of {len(outcomes)} cases agree ({device} vs {reference_device})"
    )
    return "\n".join(lines)


def _available(device: str) -> str | None:
    """Why ``device`` cannot be used (None if it can)."""
    try:
        dev = torch.device(device)
    except RuntimeError as exc:
        return f"{device!r} is not a device: {exc}"
    if dev.type == "cuda" and not torch.cuda.is_available():
        return "CUDA is not available (torch.cuda.is_available() is False)"
    if dev.type == "cuda" and (dev.index or 0) >= torch.cuda.device_count():
        return f"{device!r}: only {torch.cuda.device_count()} CUDA device(s) visible"
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda", help="the device checked (default cuda)")
    ap.add_argument("--reference-device", default="cpu", help="compared with (default cpu)")
    ap.add_argument("--quick", action="store_true", help="the MLP cases only")
    ap.add_argument("--seed", type=int, default=0, help="the run seed of both sides")
    ap.add_argument(
        "--repeats", type=int, default=2, help="runs per device and case; the last is timed"
    )
    ap.add_argument(
        "--allow-tf32", action="store_true", help="keep PyTorch's TF32 defaults on CUDA"
    )
    args = ap.parse_args(argv)
    for d in (args.device, args.reference_device):
        why = _available(d)
        if why is not None:
            print(f"gpu_check: --device/--reference-device {d}: {why}", file=sys.stderr)
            return 2
    if not args.allow_tf32:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    for d in (args.device, args.reference_device):
        if torch.device(d).type == "cuda":
            print(f"{d}: {torch.cuda.get_device_name(torch.device(d))}, torch {torch.__version__}")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Secure RNG turned off")  # seeds are explicit
        warnings.filterwarnings("ignore", message="Full backward hook is firing")
        outcomes = run_check(
            args.device, args.reference_device, args.quick, args.seed, repeats=args.repeats
        )
    print(report(outcomes, args.device, args.reference_device))
    return 0 if all(o.ok for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
