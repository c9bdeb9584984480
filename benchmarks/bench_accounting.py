"""Speed of the accountants, Algorithm 3, and the reduced-game sampler (one run, side by side).

    PYTHONPATH=. OMP_NUM_THREADS=1 python benchmarks/bench_accounting.py

Prints markdown tables: seconds per call (best of ``REPEATS``) and ratios to the fastest.
"""

from __future__ import annotations

import time
import warnings

import numpy as np

from dpaudit.accounting import dpsgd
from dpaudit.accounting import run_counts as runs
from dpaudit.accounting import selection as sel
from dpaudit.mechanisms import selection_game as game

REPEATS = 3


def best_time(fn) -> float:
    times = []
    for _ in range(REPEATS):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def accountants() -> None:
    settings = [(1.0, 0.01, 100), (1.0, 0.01, 10_000), (0.8, 0.004, 2500)]
    print("| setting (sigma, q, T) | " + " | ".join(dpsgd.EPSILON_ACCOUNTANTS) + " | rdp/pld |")
    print("|---|" + "---|" * (len(dpsgd.EPSILON_ACCOUNTANTS) + 1))
    for s, q, t in settings:
        secs = {
            a: best_time(lambda a=a, s=s, q=q, t=t: dpsgd.epsilon(a, s, q, t, 1e-5))
            for a in dpsgd.EPSILON_ACCOUNTANTS
        }
        cells = " | ".join(f"{secs[a] * 1e3:.1f} ms" for a in dpsgd.EPSILON_ACCOUNTANTS)
        print(f"| {s}, {q}, {t} | {cells} | {secs['rdp'] / secs['pld']:.2f} |")


def selection_bounds() -> None:
    xi = runs.TruncatedNegativeBinomial(0.0, 1e-2)
    mu = sel.gaussian_mu_rdp(1.0, 1e-5)
    fns = {
        "Papernot-Steinke": lambda: sel.papernot_steinke_epsilon(xi, mu, 1e-5),
        "Algorithm 3 (RDP)": lambda: sel.reduced_game_epsilon_rdp(xi, mu, 1e-5),
        "exact (hockey-stick)": lambda: sel.reduced_game_epsilon_exact(xi, mu, 1e-5),
    }
    secs = {k: best_time(f) for k, f in fns.items()}
    fastest = min(secs.values())
    print("\n| TNB(0, 1e-2), mu = 0.247 | seconds | ratio |")
    print("|---|---|---|")
    for k, v in secs.items():
        print(f"| {k} | {v:.3f} | {v / fastest:.1f} |")


def sampler() -> None:
    xi = runs.TruncatedNegativeBinomial(0.0, 1e-2)
    n = 20_000
    rng = np.random.default_rng(0)

    def exact():
        game.play(xi, 0.5, np.zeros(n, dtype=int), rng)

    def naive():  # draw all K normals and take the max
        k = xi.sample(n, rng)
        _ = np.array([rng.standard_normal(int(kk)).max() for kk in k])

    t_exact, t_naive = best_time(exact), best_time(naive)
    print(f"\n| sampler, {n} games, E[K] = 21.5 | seconds | ratio |")
    print("|---|---|---|")
    print(f"| O(1) max (Phi^-1(U^(1/K))) | {t_exact:.4f} | 1.0 |")
    print(f"| naive (K normals, max) | {t_naive:.4f} | {t_naive / t_exact:.1f} |")


if __name__ == "__main__":
    warnings.simplefilter("ignore")
    accountants()
    selection_bounds()
    sampler()
