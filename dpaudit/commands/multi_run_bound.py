"""Clopper-Pearson upper bounds on the FPR and FNR of one fixed threshold (each at 1 - (1 -
confidence)/2, so both hold jointly at CONFIDENCE), plugged into Eq. 1 of Annamalai et al. The
threshold must not have been chosen on these runs.
"""

from __future__ import annotations

import argparse

from dpaudit.commands import add_claim_arguments
from dpaudit.estimators.multi_run.definition import epsilon_from_counts

HELP = "multi-run epsilon lower bound from false-positive/negative counts (Eq. 1)"


def arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--false-pos", type=int, required=True, help="non-member runs called IN")
    p.add_argument("--nonmembers", type=int, required=True, help="runs without the target")
    p.add_argument("--false-neg", type=int, required=True, help="member runs called OUT")
    p.add_argument("--members", type=int, required=True, help="runs with the target")
    add_claim_arguments(p, "multi_run_cp", joint=True)


def run(args: argparse.Namespace) -> int:
    from dpaudit.commands import emit

    eps, a, b = epsilon_from_counts(
        args.false_pos,
        args.nonmembers,
        args.false_neg,
        args.members,
        args.delta,
        args.confidence,
    )
    result = {
        "epsilon": eps,
        "fpr_upper": a,
        "fnr_upper": b,
        "false_pos": args.false_pos,
        "nonmembers": args.nonmembers,
        "false_neg": args.false_neg,
        "members": args.members,
        "delta": args.delta,
        "confidence": args.confidence,
    }
    emit(
        result,
        args.json,
        f"epsilon >= {eps:.6f} at {args.confidence:.0%} confidence "
        f"(FPR <= {a:.3g}, FNR <= {b:.3g})",
    )
    return 0
