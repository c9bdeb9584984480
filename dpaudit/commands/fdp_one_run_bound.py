"""Lower bound on epsilon from n randomized bits of which the r most confident guesses were
released and WRONG of them were wrong, under a one-parameter f-DP null family, reported as
(epsilon, delta) by Algorithm 2. Caution: for --family approx-dp with delta > 0 the paper's
Theorem 1 is not sound for every (epsilon, delta)-DP mechanism (docs/estimators/fdp_one_run.md).
"""

from __future__ import annotations

import argparse

from dpaudit.commands import add_json_argument, claim_delta
from dpaudit.defaults import estimator_defaults
from dpaudit.estimators.fdp_one_run.bound import epsilon_lower_bound
from dpaudit.estimators.fdp_one_run.tails import TAILS

HELP = "tight one-run f-DP lower bound (Xiang et al. 2025, Theorem 3 + Proposition 1)"


def arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--n", type=int, required=True, help="number of randomized bits (canaries)")
    p.add_argument("--r", type=int, required=True, help="number of released guesses")
    p.add_argument("--wrong", type=int, required=True, help="wrong guesses among the r")
    p.add_argument(
        "--family",
        required=True,
        choices=["gdp", "laplace", "approx-dp", "subsampled-gaussian"],
        help="null family: mu-GDP, Laplace mu, f_{eps,delta} at --delta, subsampled "
        "Gaussian (mu, --q)",
    )
    p.add_argument(
        "--delta",
        type=claim_delta,
        default=1e-5,
        help="delta of the approx-dp null and of the (epsilon, delta) report (default 1e-5)",
    )
    p.add_argument("--q", type=float, default=None, help="sampling rate (subsampled-gaussian)")
    p.add_argument(
        "--confidence",
        type=float,
        default=estimator_defaults("fdp_one_run")["confidence"],
        help="default: %(default)s (the config schema's)",
    )
    p.add_argument(
        "--tail",
        choices=list(TAILS),
        default=estimator_defaults("fdp_one_run")["tail"],
        help="chernoff (the paper's Prop. 1, never below the exact tail) or exact "
        "(the exact law of the wrong count under Theorem 1's independent channels, "
        "conditioned on the selection threshold; an extension); default: %(default)s",
    )
    add_json_argument(p)


def run(args: argparse.Namespace) -> int:
    from dpaudit.commands import emit

    if args.q is not None and args.family != "subsampled-gaussian":
        raise ValueError(
            f"--q applies to --family subsampled-gaussian only, not to --family {args.family}"
        )
    b = epsilon_lower_bound(
        args.n, args.r, args.wrong, args.family, args.delta, args.confidence, args.q, args.tail
    )
    result = {
        "epsilon": b.epsilon,
        "family": b.family,
        b.param_name: b.param,
        "p_value": b.p_value,
        "n": b.n,
        "r": b.r,
        "wrong": b.wrong,
        "delta": b.delta,
        "confidence": b.confidence,
        "tail": b.tail,
    }
    text = (
        f"epsilon >= {b.epsilon:.6f} (delta={b.delta:g}; {b.param_name} >= {b.param:.6f} "
        f"under {b.family}) at {b.confidence:.0%} confidence"
    )
    emit(result, args.json, text)
    return 0
