"""Benchmark of dpaudit's XBern intervals against the authors' ``xbern-confidence-intervals``.

Run from the repository root (the PyPI package is a benchmark-only dependency)::

    pip install xbern-confidence-intervals
    OMP_NUM_THREADS=1 python benchmarks/bench_xbern.py

Prints markdown tables: (1) the largest absolute difference of every bound over a set of
random inputs, where the methods coincide (Wilson, Algs. 5-7, as printed = the package;
Bernstein, Algs. 2-4, ``variant="released"`` = the package); (2) speed, side by side in one
run; (3) 4th-order Wilson on n = 65536 trials x K = 1024 canaries (target: <= 2 s).
"""

from __future__ import annotations

import contextlib
import io
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dpaudit.estimators.lidp import bound as lidp
from dpaudit.estimators.lidp import xbern

try:
    import xbern_confidence_intervals as ref
except ImportError:  # the comparison is the point of this script: fail loudly
    sys.exit("benchmarks/bench_xbern.py needs `pip install xbern-confidence-intervals`")

KEYS = {1: "1st", 2: "2nd", 4: "4th"}
#: max |eps_hat difference| over the threshold sweep, per order (filled by speed()).
SWEEP_DIFF: dict[int, float] = {}


def quiet(fn, *args, **kwargs):
    """The package prints a line whenever a Bernstein root does not exist; silence it."""
    with contextlib.redirect_stdout(io.StringIO()):
        return fn(*args, **kwargs)


def inputs(rng):
    """(n, K) 0/1 matrices: independent and beta-binomial-correlated, small to moderate."""
    out = []
    for n, K in [(20, 1), (100, 2), (256, 4), (300, 8), (1000, 16), (2000, 64), (4096, 128)]:
        for p in (0.02, 0.3, 0.9):
            out.append((rng.random((n, K)) < p).astype(np.int8))
            q = rng.beta(4 * p, 4 * (1 - p), size=(n, 1))
            out.append((rng.random((n, K)) < q).astype(np.int8))
    out.append(np.zeros((50, 8), np.int8))
    out.append(np.ones((50, 8), np.int8))
    return out


def agreement(rng) -> list[tuple[str, int, float]]:
    rows = []
    diffs = {
        (fam, o): 0.0
        for fam in ("Wilson", "Wilson (vectorised pkg)", "Bernstein")
        for o in (1, 2, 4)
    }
    counts = dict.fromkeys(diffs, 0)
    for x in inputs(rng):
        K = x.shape[1]
        wl, wr = ref.get_wilson_confidence_intervals(x, 0.05)
        vl, vr = ref.get_wilson_confidence_intervals_vectorized(x[None], 0.05)
        bl, br = quiet(ref.get_bernstein_confidence_intervals, x, 0.05)
        for o in (1, 2, 4):
            if K < o:
                continue
            key = f"{KEYS[o]}-Order"
            lo, hi = xbern.xbern_interval(x, 0.05, "wilson", o, "printed")
            d = max(abs(lo - wl[f"{key} Wilson"]), abs(hi - wr[f"{key} Wilson"]))
            diffs["Wilson", o] = max(diffs["Wilson", o], d)
            counts["Wilson", o] += 1
            d = max(abs(lo - vl.loc[f"{key} Wilson", 0]), abs(hi - vr.loc[f"{key} Wilson", 0]))
            diffs["Wilson (vectorised pkg)", o] = max(diffs["Wilson (vectorised pkg)", o], d)
            counts["Wilson (vectorised pkg)", o] += 1
            lo, hi = xbern.xbern_interval(x, 0.05, "bernstein", o, "released")
            d = max(abs(lo - bl[f"{key} Bernstein"]), abs(hi - br[f"{key} Bernstein"]))
            diffs["Bernstein", o] = max(diffs["Bernstein", o], d)
            counts["Bernstein", o] += 1
    for (fam, o), d in diffs.items():
        rows.append((fam, o, counts[fam, o], d))
    return rows


def best_of(fn, repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def speed(rng) -> list[tuple[str, float, float]]:
    rows = []
    x = (rng.random((4096, 64)) < rng.beta(2, 5, size=(4096, 1))).astype(np.int8)

    def ours_w():
        for o in (1, 2, 4):
            xbern.xbern_interval(x, 0.05, "wilson", o)

    def ours_b():
        for o in (1, 2, 4):
            xbern.xbern_interval(x, 0.05, "bernstein", o, "released")

    rows.append(
        (
            "Wilson orders 1+2+4, n=4096, K=64",
            best_of(lambda: ref.get_wilson_confidence_intervals(x, 0.05)),
            best_of(ours_w),
        )
    )
    rows.append(
        (
            "Bernstein orders 1+2+4, n=4096, K=64",
            best_of(lambda: quiet(ref.get_bernstein_confidence_intervals, x, 0.05)),
            best_of(ours_b),
        )
    )
    # threshold sweep: 500 thresholds of real-valued scores, as in the tuning of App. E.1
    n, K, G = 1024, 32, 500
    si = rng.normal(1.0, 1.0, (n, K)) + rng.normal(0, 0.3, (n, 1))
    so = rng.normal(0.0, 1.0, (n, K)) + rng.normal(0, 0.3, (n, 1))
    grid = lidp.threshold_grid(si, so, G)

    def pkg_sweep():
        lo, _ = ref.get_wilson_confidence_intervals_vectorized(
            si[None] >= grid[:, None, None], 0.025
        )
        _, hi = ref.get_wilson_confidence_intervals_vectorized(
            so[None] >= grid[:, None, None], 0.025
        )
        return np.log((lo.to_numpy() - 1e-5) / hi.to_numpy())

    def our_sweep():
        return [
            lidp.epsilon_curve(si, so, grid, lidp.BoundSpec(1e-5, 0.95, "wilson", o))[0]
            for o in (1, 2, 4)
        ]

    eps_pkg = pkg_sweep()
    eps_ours = our_sweep()
    for i, o in enumerate((1, 2, 4)):
        a, b = eps_pkg[i], eps_ours[i]
        ok = (a > 0) & np.isfinite(a)  # where the package's log is a positive bound
        SWEEP_DIFF[o] = float(np.max(np.abs(a[ok] - b[ok]))) if ok.any() else float("nan")
    rows.append(
        (
            f"eps_hat over {G} thresholds, Wilson 1+2+4, n={n}, K={K} (pkg vectorised)",
            best_of(pkg_sweep, 2),
            best_of(our_sweep, 2),
        )
    )
    return rows


def big_case(rng) -> list[tuple[str, float]]:
    n, K = 65536, 1024
    x8 = (rng.random((n, K), dtype=np.float32) < 0.3).view(np.int8)
    xb = x8.view(bool)
    rows = [
        ("int8 input", best_of(lambda: xbern.xbern_interval(x8, 0.05, "wilson", 4), 3)),
        ("bool input", best_of(lambda: xbern.xbern_interval(xb, 0.05, "wilson", 4), 3)),
        (
            "int8 input, Bernstein order 4",
            best_of(lambda: xbern.xbern_interval(x8, 0.05, "bernstein", 4), 3),
        ),
    ]
    return rows


def main() -> None:
    rng = np.random.default_rng(0)
    print("### Agreement with xbern-confidence-intervals (max |difference| of either bound)\n")
    print("| interval | order | inputs | max abs diff |")
    print("|---|---|---|---|")
    for fam, o, c, d in agreement(rng):
        print(f"| {fam} | {o} | {c} | {d:.2e} |")
    print("\n### Speed (best of repeats, seconds; same machine, same run)\n")
    print("| case | package | dpaudit | speed-up |")
    print("|---|---|---|---|")
    for name, t_ref, t_ours in speed(rng):
        print(f"| {name} | {t_ref:.4f} | {t_ours:.4f} | {t_ref / t_ours:.1f}x |")
    print(
        "\nmax |eps_hat(ours) - eps_hat(package, vectorised)| over the sweep: "
        + ", ".join(f"order {o}: {d:.2e}" for o, d in SWEEP_DIFF.items())
    )
    print("\n### 4th-order Wilson, n = 65536 trials x K = 1024 canaries (target <= 2 s)\n")
    print("| input | seconds |")
    print("|---|---|")
    for name, t in big_case(rng):
        print(f"| {name} | {t:.3f} |")


if __name__ == "__main__":
    main()
