"""Monte Carlo validity of the reconstruction game of the f-DP abstention audit (Mahloujifar,
Melis, Chaudhuri 2025, arXiv:2410.22235, Alg. 2 and Theorem 3.1 with k > 2 options per canary);
prints one row of docs/validity.md.

Mechanism: m canary sets of k orthogonal unit directions; one direction per set is drawn
uniformly and shifted by 1; every coordinate gets N(0, sigma^2) noise. Two choices of a set
differ by a vector of norm sqrt(2), so the mechanism is exactly (sqrt(2) / sigma)-GDP between
any two options. The auditor names the argmax of each set and keeps the r sets of largest
margin (largest minus second largest), abstaining on the rest (selection ``fixed``). *over*:
the fraction of repetitions whose bound (GDP family, 95%) exceeds the true epsilon; *null
zero*: the fraction whose bound is 0 when the drawn options are redrawn independently of the
observations.

    python benchmarks/reconstruction_validity.py --reps 1000
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from dpaudit.estimators.fdp_abstention import bound as F
from dpaudit.estimators.fdp_one_run.families import to_epsilon


def correct_count(rng: np.random.Generator, m: int, k: int, sigma: float, r: int, null: bool):
    chosen = rng.integers(0, k, size=m)
    obs = rng.normal(0.0, sigma, size=(m, k))
    obs[np.arange(m), chosen] += 1.0
    if null:  # the options the auditor is scored against, independent of what was released
        chosen = rng.integers(0, k, size=m)
    top2 = np.sort(obs, axis=1)[:, -2:]
    keep = np.argsort(top2[:, 1] - top2[:, 0], kind="stable")[-r:]
    return int((np.argmax(obs, axis=1)[keep] == chosen[keep]).sum())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=1000)
    ap.add_argument("--m", type=int, default=500)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--sigma", type=float, default=0.8)
    ap.add_argument("--r", type=int, default=100)
    ap.add_argument("--delta", type=float, default=1e-5)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    true = to_epsilon("gdp", math.sqrt(2) / a.sigma, a.delta)
    over = zero = 0
    total = 0.0
    t0 = time.time()
    for _ in range(a.reps):
        c = correct_count(rng, a.m, a.k, a.sigma, a.r, null=False)
        b = F.epsilon_lower_bound(a.m, a.r, a.r - c, "gdp", a.delta, 0.95, k=a.k)
        over += b.epsilon > true + 1e-9
        total += b.epsilon / a.reps
        c0 = correct_count(rng, a.m, a.k, a.sigma, a.r, null=True)
        zero += F.epsilon_lower_bound(a.m, a.r, a.r - c0, "gdp", a.delta, 0.95, k=a.k).epsilon == 0
    se = math.sqrt(0.05 * 0.95 / a.reps)
    ok = over / a.reps <= 0.05 + 3 * se and zero / a.reps >= 0.95 - 3 * se
    print(
        f"| fdp_abstention GDP, reconstruction k = {a.k} (fixed r = {a.r}) | fixed | "
        f"Gaussian reconstruction, sigma = {a.sigma:g} (mu = sqrt(2)/sigma), m = {a.m} | "
        f"{true:.3f} | {total:.3f} | {over / a.reps:.3f} | {zero / a.reps:.3f} | {a.reps} | "
        f"{'holds' if ok else 'FAILS'} |"
    )
    print(f"({time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main()
