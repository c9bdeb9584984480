"""Lower bound on epsilon from score files of design 'lidp' (K inserted and m null canaries per
trial), with XBern confidence intervals (Algs. 2-7). Several files are stacked as more trials of
one setting.
"""

from __future__ import annotations

import argparse

from dpaudit.commands import add_json_argument
from dpaudit.defaults import estimator_defaults
from dpaudit.estimators.lidp import xbern

HELP = "LiDP epsilon lower bound from lidp score files (Pillutla et al. 2023, Alg. 1)"


def arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("scores", nargs="+", help="score file(s) (.npz) of one setting")
    d = estimator_defaults("lidp")  # the config schema's defaults, as in the pipeline
    p.add_argument("--interval", choices=xbern.INTERVALS, help=f"default: {d['interval']}")
    p.add_argument(
        "--order",
        type=int,
        choices=xbern.ORDERS,
        help=f"1, 2 or 4 (default: {d['order']}; 1 for clopper_pearson)",
    )
    p.add_argument("--confidence", type=float, help=f"default: {d['confidence']}")
    p.add_argument(
        "--threshold",
        help=f"'heldout', 'in_sample' (not valid) or a number (default: {d['threshold']})",
    )
    p.add_argument("--heldout-fraction", type=float, help=f"default: {d['heldout_fraction']}")
    p.add_argument("--split-seed", type=int, help=f"default: {d['split_seed']}")
    p.add_argument("--variant", choices=xbern.VARIANTS, help=f"default: {d['variant']}")
    add_json_argument(p)


def run(args: argparse.Namespace) -> int:
    from dpaudit import scores
    from dpaudit.commands import emit
    from dpaudit.estimators.lidp.audit import run_lidp

    files = [scores.read(path) for path in args.scores]
    if len(files) > 1 and any(f.meta.get("heldout_trials") for f in files):
        raise ValueError(
            "files with declared held-out tuning rows (meta 'heldout_trials') "
            "cannot be stacked; give one such file at a time"
        )
    sf = scores.concat(files)
    threshold = args.threshold
    if threshold is not None and threshold not in ("heldout", "in_sample"):
        try:
            threshold = float(threshold)
        except ValueError:
            raise ValueError(
                f"--threshold must be 'heldout', 'in_sample' or a number, got {threshold!r}"
            ) from None
    given = {
        "interval": args.interval,
        "order": args.order,
        "confidence": args.confidence,
        "threshold": threshold,
        "heldout_fraction": args.heldout_fraction,
        "split_seed": args.split_seed,
        "variant": args.variant,
    }
    params = {k: v for k, v in given.items() if v is not None}  # the rest: the schema's
    row = run_lidp(sf, params)[0]
    row = {k: (None if isinstance(v, float) and v != v else v) for k, v in row.items()}  # NaN
    label = "" if row["valid"] else " (NOT a valid bound: threshold tuned on the same trials)"
    text = (
        f"epsilon >= {row['epsilon']:.6f} at {row['confidence']:.0%} confidence{label}\n"
        f"  {row['interval']} order {row['order']}, threshold {row['threshold']:.6g} "
        f"({row['threshold_mode']}), {row['n_trials']} trials, K={row['K']}, m={row['m']}, "
        f"p1_lower={row['p1_lower']:.6g}, p0_upper={row['p0_upper']:.6g}"
    )
    emit(row, args.json, text)
    return 0
