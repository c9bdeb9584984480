"""Speed of the one-run bound (Steinke et al. 2023, Theorem 3.1) at m = 1e5, r = 1e4.

Side by side in one run: dpaudit's vectorised p-value (alpha from one cumulative sum of binomial
pmf values) against the reference loop of the full version's Appendix D (one scipy call per i),
on the same inputs, each the best of several repeats. Target: at most 50 ms for dpaudit.

    python benchmarks/bench_one_run.py
"""

from __future__ import annotations

import time

from scipy import special, stats

from dpaudit.estimators.one_run.bound import BISECTION_STEPS, epsilon_lower_bound


def reference_p_value(m: int, r: int, v: int, eps: float, delta: float) -> float:
    """Appendix D of arXiv:2305.08846 as printed: a Python loop over i = 1..v."""
    q = special.expit(eps)
    beta = stats.binom.sf(v - 1, r, q)
    alpha, s = 0.0, 0.0
    for i in range(1, v + 1):
        s += stats.binom.pmf(v - i, r, q)
        alpha = max(alpha, s / i)
    return min(1.0, beta + alpha * delta * 2 * m)


def reference_bound(m: int, r: int, v: int, delta: float, p: float = 0.05) -> float:
    lo, hi = 0.0, 1.0
    while reference_p_value(m, r, v, hi, delta) < p:
        lo, hi = hi, hi + 1
    for _ in range(BISECTION_STEPS):
        mid = (lo + hi) / 2
        if reference_p_value(m, r, v, mid, delta) < p:
            lo = mid
        else:
            hi = mid
    return lo


def best_of(func, repeats: int) -> tuple[float, float]:
    times, value = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        value = func()
        times.append(time.perf_counter() - t0)
    return min(times), value


def main() -> None:
    m, r, v, delta = 100_000, 10_000, 9_033, 1e-5  # Fig. 10's Gaussian accuracy at r = 1e4
    t_fast, e_fast = best_of(lambda: epsilon_lower_bound(m, r, v, delta), 7)
    t_ref, e_ref = best_of(lambda: reference_bound(m, r, v, delta), 1)
    print("| implementation | m | r | correct | epsilon | time (ms) | ratio |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    print(
        f"| reference loop (Appendix D) | {m} | {r} | {v} | {e_ref:.6f} | {1e3 * t_ref:.1f} | 1.0 |"
    )
    print(
        f"| dpaudit vectorised | {m} | {r} | {v} | {e_fast:.6f} | {1e3 * t_fast:.1f} | "
        f"{t_ref / t_fast:.0f}x faster |"
    )
    assert abs(e_fast - e_ref) < 1e-9, (e_fast, e_ref)


if __name__ == "__main__":
    main()
