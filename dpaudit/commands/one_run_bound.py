"""Lower bound on epsilon from r guesses of which CORRECT were right, with M canaries randomized by
fair coins (the delta term scales with M).
"""

from __future__ import annotations

import argparse

from dpaudit.commands import add_claim_arguments
from dpaudit.estimators.one_run.bound import epsilon_lower_bound

HELP = "one-run epsilon lower bound (Steinke, Nasr, Jagielski 2023, Theorem 3.1)"


def arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--m", type=int, required=True, help="number of randomized canaries")
    p.add_argument("--r", type=int, required=True, help="number of guesses (k+ + k-)")
    p.add_argument("--correct", type=int, required=True, help="number of correct guesses")
    add_claim_arguments(p, "one_run")


def run(args: argparse.Namespace) -> int:
    from dpaudit.commands import emit

    eps = epsilon_lower_bound(args.m, args.r, args.correct, args.delta, args.confidence)
    result = {
        "epsilon": eps,
        "m": args.m,
        "r": args.r,
        "correct": args.correct,
        "delta": args.delta,
        "confidence": args.confidence,
    }
    emit(result, args.json, f"epsilon >= {eps:.6f} at {args.confidence:.0%} confidence")
    return 0
