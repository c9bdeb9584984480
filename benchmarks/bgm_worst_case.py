"""Acceptance check: auditing the Batched Gaussian Mechanism (Annamalai et al., Fig. 7 and Fig. 3).

Fig. 7 (Worst-Case bars): T = 100 batches (batch size 100 of 10,000 records), one epoch, sigma
calibrated so that the Poisson PLD epsilon is 1 / 2 / 4 at delta = 1e-5, 10^6 runs per
hypothesis; the paper reports eps_emp = 4.06 / 5.18 / 6.43.

Fig. 3: T = 100, one epoch, sigma = 0.5 / 1.0 / 1.5, eps_emp as the number of runs grows; the
paper reports 8.96 / 4.01 / 1.44 at 10^9 observations. Smaller run counts are prefixes of the
largest simulation (the simulator's seeding guarantees it).

Columns: ``same@0.90`` is Algorithm 5 (threshold on the same runs, uncorrected) with one-sided
95% Clopper-Pearson per rate (the paper's likely reading); ``same@0.95`` the same with 97.5% per
rate (joint 95%); ``heldout@0.95`` the valid bound (threshold chosen on half the runs, bound on
the other half). Usage::

    OMP_NUM_THREADS=1 python benchmarks/bgm_worst_case.py --part fig7 --runs 1000000
    OMP_NUM_THREADS=1 python benchmarks/bgm_worst_case.py --part fig3 --runs 1000000
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from dpaudit.accounting.shuffling import poisson_reference_epsilon, poisson_reference_sigma
from dpaudit.estimators.multi_run import bound as mr
from dpaudit.mechanisms import batched_gaussian as bg
from dpaudit.mechanisms import shuffle_reference as ref

DELTA = 1e-5
T = 100
FIG7_PAPER = {1.0: 4.06, 2.0: 5.18, 4.0: 6.43}
FIG3_PAPER = {0.5: 8.96, 1.0: 4.01, 1.5: 1.44}


def _audits(s1: np.ndarray, s0: np.ndarray, seed: int) -> dict[str, float]:
    s = np.concatenate([s1, s0])
    m = np.concatenate([np.ones(s1.size, np.int8), np.zeros(s0.size, np.int8)])
    return {
        "same@0.90": mr.threshold_audit(s, m, DELTA, 0.90, "same_data").epsilon,
        "same@0.95": mr.threshold_audit(s, m, DELTA, 0.95, "same_data").epsilon,
        "heldout@0.95": mr.threshold_audit(s, m, DELTA, 0.95, "heldout", split_seed=seed).epsilon,
    }


def _scores(runs: int, sigma: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    return bg.simulate_both(runs, bg.BGM(T, 1, sigma, "worst_case", 100), seed)


def fig7(runs: int, seeds: list[int]) -> None:
    print(f"\n### Fig. 7 Worst-Case: T={T}, B=100, E=1, {runs:,} runs per hypothesis\n")
    print("| claimed eps | sigma | seed | same@0.90 | same@0.95 | heldout@0.95 | paper | "
          "Chua LB | seconds |")
    print("|---|---|---|---|---|---|---|---|---|")
    for eps in FIG7_PAPER:
        sigma = poisson_reference_sigma(eps, T, 1, DELTA)
        lb = ref.shuffle_lower_bound(sigma, T, DELTA)
        vals = []
        for seed in seeds:
            t0 = time.time()
            res = _audits(*_scores(runs, sigma, seed), seed)
            vals.append(res)
            print(f"| {eps:g} | {sigma:.4f} | {seed} | {res['same@0.90']:.2f} | "
                  f"{res['same@0.95']:.2f} | {res['heldout@0.95']:.2f} | {FIG7_PAPER[eps]} | "
                  f"{lb:.2f} | {time.time() - t0:.0f} |", flush=True)
        if len(seeds) > 1:
            m = {k: np.mean([v[k] for v in vals]) for k in vals[0]}
            sd = {k: np.std([v[k] for v in vals], ddof=1) for k in vals[0]}
            print(f"| {eps:g} | {sigma:.4f} | mean±sd | {m['same@0.90']:.2f}±{sd['same@0.90']:.2f}"
                  f" | {m['same@0.95']:.2f}±{sd['same@0.95']:.2f} | "
                  f"{m['heldout@0.95']:.2f}±{sd['heldout@0.95']:.2f} | {FIG7_PAPER[eps]} | "
                  f"{lb:.2f} | |", flush=True)


def fig3(max_runs: int, seed: int, sigmas: list[float]) -> None:
    print(f"\n### Fig. 3: T={T}, E=1, runs per hypothesis up to {max_runs:,} (seed {seed})\n")
    print("| sigma | runs/hyp | same@0.90 | same@0.95 | heldout@0.95 | paper (10^9 obs) | "
          "Poisson eps | Chua LB |")
    print("|---|---|---|---|---|---|---|---|")
    for sigma in sigmas:
        pois = poisson_reference_epsilon(sigma, T, 1, DELTA)
        lb = ref.shuffle_lower_bound(sigma, T, DELTA)
        s1, s0 = _scores(max_runs, sigma, seed)
        n = 1000
        while n <= max_runs:
            res = _audits(s1[:n], s0[:n], seed)
            print(f"| {sigma} | {n:,} | {res['same@0.90']:.2f} | {res['same@0.95']:.2f} | "
                  f"{res['heldout@0.95']:.2f} | {FIG3_PAPER.get(sigma, '')} | {pois:.2f} | "
                  f"{lb:.2f} |", flush=True)
            n *= 10


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--part", choices=["fig7", "fig3", "all"], default="all")
    p.add_argument("--runs", type=int, default=10**6, help="runs per hypothesis (default 1e6)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--sigmas", type=float, nargs="+", default=[0.5, 1.0, 1.5])
    args = p.parse_args()
    t0 = time.time()
    if args.part in ("fig7", "all"):
        fig7(args.runs, args.seeds)
    if args.part in ("fig3", "all"):
        fig3(args.runs, args.seeds[0], args.sigmas)
    print(f"\ntotal {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
