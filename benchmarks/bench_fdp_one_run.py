"""Speed of the tight one-run lower bound (Xiang et al. 2025, GDP null) against the one-run
bound of Steinke et al. (:func:`dpaudit.estimators.one_run.bound.epsilon_lower_bound`), side by side
in one run.

Target: GDP family at n = 1e5, r = 2e4 in at most 1 s (cold: including the Beta quantiles of
the order statistics, which are cached per (n, r); warm: a second audit at the same n, r).
The error counts are the expected ones for a mu = 1 Gaussian mechanism (top-r by |L|), and for
the one-run bound (m = 1e5, r = 1e4) Steinke et al.'s idealised accuracy.

    OMP_NUM_THREADS=1 python benchmarks/bench_fdp_one_run.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

from dpaudit.estimators.fdp_one_run import bound as fdp_bound
from dpaudit.estimators.fdp_one_run import tails
from dpaudit.estimators.one_run import bound as one_run


def _time(fn, repeats: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    n, r = 100_000, 20_000
    wrong = round(tails.v_vector("gdp", 1.0, n, r).sum())
    tails.clear_caches()

    def cold():
        tails.clear_caches()
        return fdp_bound.epsilon_lower_bound(n, r, wrong, "gdp", 1e-5)

    t_cold, b = _time(cold, args.repeats)
    t_warm, _ = _time(
        lambda: fdp_bound.epsilon_lower_bound(n, r, wrong + 1, "gdp", 1e-5), args.repeats
    )
    m, r1 = 100_000, 10_000
    correct = round(0.9 * r1)
    t_one, e1 = _time(lambda: one_run.epsilon_lower_bound(m, r1, correct, 1e-5), args.repeats)
    t_exact, bx = _time(
        lambda: fdp_bound.epsilon_lower_bound(n, r, wrong, "gdp", 1e-5, tail="exact"), 1
    )
    print(f"median of {args.repeats} runs, one CPU thread\n")
    print("| bound | setting | result | time (s) | ratio to one-run |")
    print("|---|---|---|---|---|")
    print(f"| one-run (Steinke et al.) | m=1e5, r=1e4, {correct} correct | eps={e1:.3f} "
          f"| {t_one:.3f} | 1.00 |")
    print(f"| fdp_one_run GDP, cold | n=1e5, r=2e4, {wrong} wrong | eps={b.epsilon:.3f} "
          f"(mu={b.param:.4f}) | {t_cold:.3f} | {t_cold / t_one:.2f} |")
    print(f"| fdp_one_run GDP, warm | n=1e5, r=2e4, {wrong + 1} wrong | | {t_warm:.3f} "
          f"| {t_warm / t_one:.2f} |")
    print(f"| fdp_one_run GDP, exact tail (1 run) | n=1e5, r=2e4, {wrong} wrong "
          f"| eps={bx.epsilon:.3f} | {t_exact:.3f} | {t_exact / t_one:.2f} |")
    print(f"\ntarget <= 1 s (cold): {'PASS' if t_cold <= 1.0 else 'FAIL'}")


if __name__ == "__main__":
    main()
