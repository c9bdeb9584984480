"""False-rejection rate of the tight one-run audit (Xiang et al. 2025) on an (eps, delta)-DP
mechanism: the counterexample to their Theorem 1 for f_{eps,delta}, delta > 0 (our finding).

The mechanism is Steinke et al.'s pathological algorithm with its constant corrected
(:class:`dpaudit.mechanisms.fdp_pathological.Pathological`): it is exactly (eps, delta)-DP per bit
(hockey-stick divergence = delta, printed below), yet the paper's test, run with the TRUE null
f_{eps,delta}, rejects it more often than its level 1 - confidence = 0.05.

Columns: the exact rejection probability (mixture over X of binomial error counts) with the
paper's Chernoff p-value and with the exact Poisson-binomial tail; a Monte Carlo estimate from
simulated error counts; an end-to-end Monte Carlo through the registered estimator on
simulated score vectors (``fdp_one_run.audit.audit_scores``, selection ``fixed``, rule
``centered``) counting eps_l > eps (only for r < n/2 and n <= 1e4, to keep the run short);
the one-run test of Steinke et al. on the same mechanism; and the exact rejection rate of the
f-DP test with abstention of Mahloujifar, Melis, Chaudhuri 2025 (``fdp_abstention``, the same
true null f_{eps,delta}), which stays at or below 0.05.

    OMP_NUM_THREADS=1 python benchmarks/fdp_theorem1_counterexample.py [--trials 4000]
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from dpaudit.estimators.fdp_abstention import bound as MMC
from dpaudit.estimators.fdp_one_run import bound as fdp_bound
from dpaudit.estimators.fdp_one_run import guesses as F
from dpaudit.estimators.fdp_one_run.audit import audit_scores
from dpaudit.estimators.one_run import bound as one_run
from dpaudit.mechanisms.fdp_pathological import Pathological

SETTINGS = [
    # (n, r, eps, delta, beta)
    (100, 100, 1.0, 0.1, 0.1),  # Fig. 10b setting
    (100, 100, 1.0, 0.1, 0.2),
    (10_000, 2000, 3.2, 0.01, 0.1),  # Fig. 7 setting
    (10_000, 2000, 3.2, 0.01, 0.05),
    (1000, 200, 3.2, 0.01, 0.1),
    (100_000, 20_000, 2.0, 1e-5, 0.1),  # small delta
]


def scores_of(mech: Pathological, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """One run of the pathological mechanism as a score vector: +-1 on U (the guess), 0
    elsewhere; the confidence |score - median| releases exactly U when r < n/2."""
    n, r = mech.n, mech.r
    b = (rng.random(n) < 0.5).astype(np.int8)
    a0, a1 = mech.accuracy
    acc = a1 if rng.random() < mech.beta else a0
    u_set = rng.choice(n, r, replace=False)
    right = rng.random(r) < acc
    guess = np.where(right, b[u_set], 1 - b[u_set])
    score = np.zeros(n)
    score[u_set] = np.where(guess == 1, 1.0, -1.0)
    return score, b


def steinke_rate(mech: Pathological, confidence: float = 0.95) -> float:
    pmf = mech.wrong_pmf()
    rate = 0.0
    for u in range(mech.r + 1):
        if one_run.p_value(mech.n, mech.r, mech.r - u, mech.epsilon, mech.delta) <= 1 - confidence:
            rate += pmf[u]
        else:
            break
    return rate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=4000, help="count-level Monte Carlo trials")
    ap.add_argument("--e2e-trials", type=int, default=400, help="end-to-end trials")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    print(
        "| n | r | eps | delta | beta | hockey-stick | exact (Chernoff) | exact (PoiBin) "
        f"| MC ({args.trials}) | end-to-end MC ({args.e2e_trials}) | Steinke | eps_l if X=1 "
        "| Mahloujifar et al. |"
    )
    print("|" + "---|" * 13)
    for n, r, eps, delta, beta in SETTINGS:
        mech = Pathological(n, r, eps, delta, beta)
        rej = F.rejection_table(n, r, eps, delta)
        exact_c = F.pathological_rejection_rate(mech)
        exact_p = F.pathological_rejection_rate(mech, tail="exact")
        u = mech.sample_wrong(rng, args.trials)
        mc = float(np.mean(rej[u]))
        if 2 * r < n and n <= 10_000 and args.e2e_trials > 0:
            hits = 0
            for _ in range(args.e2e_trials):
                score, b = scores_of(mech, rng)
                row = audit_scores(score, b, "approx_dp", delta, 0.95, selections=("fixed",),
                                   r_fixed=r, guess="centered")[0]
                hits += row["epsilon"] > eps + 1e-9
            e2e = f"{hits / args.e2e_trials:.3f}"
        else:
            e2e = "n/a (r >= n/2)" if 2 * r >= n else "skipped (n > 1e4)"
        typical = round(r * (1 - mech.accuracy[1]))
        eps_x1 = fdp_bound.epsilon_lower_bound(n, r, typical, "approx_dp", delta).epsilon
        sd = math.sqrt(mc * (1 - mc) / args.trials)
        print(
            f"| {n} | {r} | {eps} | {delta:g} | {beta} | {mech.hockey_stick():.3g} "
            f"| {exact_c:.4f} | {exact_p:.4f} | {mc:.4f} +- {sd:.4f} | {e2e} "
            f"| {steinke_rate(mech):.4f} | {eps_x1:.2f} "
            f"| {MMC.rejection_rate(n, r, mech.wrong_pmf(), 'approx_dp', eps, delta):.4f} |"
        )


if __name__ == "__main__":
    main()
