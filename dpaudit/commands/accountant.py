"""Epsilon of T steps of the Poisson-subsampled Gaussian mechanism (noise multiplier S, sample rate
Q) at delta D, from dp_accounting's PLD and Opacus' PRV, RDP and GDP accountants. With --json,
'epsilon' is the PLD value.
"""

from __future__ import annotations

import argparse
import math

from dpaudit.accounting.dpsgd import (
    EPSILON_ACCOUNTANTS,
    MAX_GRID_ENV,
    MAX_GRID_POINTS,
    accountant_table,
)
from dpaudit.commands import add_json_argument

HELP = "claimed epsilon of Poisson-subsampled DP-SGD under PLD, PRV, RDP and GDP"


def arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--noise-multiplier", type=float, required=True, help="sigma (noise / clip)")
    p.add_argument("--sample-rate", type=float, required=True, help="Poisson sample rate q")
    p.add_argument("--steps", type=int, required=True, help="number of DP-SGD steps T")
    p.add_argument("--delta", type=float, required=True, help="target delta")
    p.add_argument(
        "--max-grid-points",
        type=int,
        default=None,
        help="largest grid PRV and PLD may discretise on (default: the environment variable "
        f"{MAX_GRID_ENV}, else {MAX_GRID_POINTS:,}); a larger one is reported as that "
        "accountant's error, before it is allocated, and the other accountants still answer",
    )
    add_json_argument(p)


def run(args: argparse.Namespace) -> int:
    from dpaudit.commands import emit

    df = accountant_table(
        args.noise_multiplier,
        args.sample_rate,
        args.steps,
        args.delta,
        max_grid_points=args.max_grid_points,
    )
    eps = {
        row.accountant: float(row.epsilon) if math.isfinite(row.epsilon) else None
        for row in df.itertuples()
    }
    result = {
        "epsilon": eps["pld"],
        **{f"epsilon_{name}": eps[name] for name in EPSILON_ACCOUNTANTS},
        "noise_multiplier": args.noise_multiplier,
        "sample_rate": args.sample_rate,
        "steps": args.steps,
        "delta": args.delta,
        "gdp_is_approximation": True,
        "errors": {
            row.accountant: row.error or f"epsilon is {row.epsilon}"
            for row in df.itertuples()
            if row.error or not math.isfinite(row.epsilon)
        },
    }
    cols = ["accountant", "epsilon", "is_upper_bound", "ratio_to_pld"]
    text = (
        f"DP-SGD: sigma={args.noise_multiplier}, q={args.sample_rate}, T={args.steps}, "
        f"delta={args.delta}\n" + df[cols].to_string(index=False, float_format="%.4f")
    )
    text += "".join(f"\n{name}: {why}" for name, why in result["errors"].items())
    emit(result, args.json, text)
    return 0
