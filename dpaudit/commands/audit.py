"""``dpaudit audit``: run estimators on score files and print the tidy table."""

from __future__ import annotations

import argparse
import json
import math


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "audit",
        help="run estimators on score files and print the audit table",
        description="Every chosen estimator on every score file it applies to. Without "
        "--config, each --estimator names a method run with its default parameters; with "
        "--config, names refer to the config's estimator blocks (default: all of them).",
    )
    p.add_argument("scorefiles", nargs="+", metavar="SCOREFILE", help="score files (.npz)")
    p.add_argument(
        "--estimator",
        action="append",
        default=[],
        metavar="NAME",
        help="estimator to run (repeatable); default: all",
    )
    p.add_argument("--config", help="a dpaudit config file whose 'estimators' blocks to use")
    p.add_argument("--csv", action="store_true", help="print CSV instead of a text table")
    p.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object: epsilon (the largest valid bound) and the rows",
    )
    p.set_defaults(func=run)


def estimator_specs(names: list[str], config_path: str | None) -> dict[str, dict]:
    """Estimator blocks by name, as the pipeline's audit jobs get them
    (:func:`dpaudit.config.estimator_block` of the validated config): from a config file, or
    each named method (default all) at the schema's defaults."""
    from dpaudit import estimators
    from dpaudit.config import (
        ConfigError,
        default_estimator_config,
        estimator_block,
        load_config_file,
        validate_config,
    )

    if config_path:
        config = load_config_file(config_path)
        try:
            validate_config(config, require_experiments=False)
        except ConfigError as err:
            raise ConfigError(f"config file {config_path}: {err}") from None
        specs = config.get("estimators") or {}
        for name in names:
            if name not in specs:
                raise ValueError(
                    f"{config_path}: unknown estimator {name!r}; allowed: {sorted(specs)}"
                )
        if not specs:
            raise ValueError(f"{config_path}: the config has no 'estimators' block")
        names = names or sorted(specs)
    else:
        for name in names:
            if name not in estimators.METHODS:
                raise ValueError(
                    f"unknown estimator method {name!r}; allowed: {sorted(estimators.METHODS)}"
                )
        names = names or sorted(estimators.METHODS)
        config = default_estimator_config(names)
    return {n: estimator_block(config, n) for n in names}


def check_applicable(files: list, specs: dict[str, dict], chosen: bool) -> None:
    """Raise if a chosen estimator does not apply to a file, or if none applies to a file.

    ``chosen``: the estimators were named with ``--estimator`` (each must apply to every file);
    otherwise every file needs at least one estimator that applies.
    """
    from dpaudit.audit import applicable_methods, check_applies
    from dpaudit.estimators import get

    for sf in files:
        if chosen:
            for name, spec in specs.items():
                check_applies(sf, name, spec)
        elif not any(get(spec["method"]).applies(sf) for spec in specs.values()):
            design = sf.meta["design"]
            raise ValueError(
                f"{sf.source}: none of the estimators {sorted(specs)} applies to this file's "
                f"design {design!r}; methods for {design!r}: {applicable_methods(design)}"
            )


def run(args: argparse.Namespace) -> int:
    from dpaudit import scores
    from dpaudit.audit import audit

    files = [scores.read(path) for path in args.scorefiles]
    specs = estimator_specs(args.estimator, args.config)
    check_applicable(files, specs, chosen=bool(args.estimator))
    table = audit(files, specs)
    if args.json:
        valid = table[table["valid"].astype(bool)] if len(table) else table
        best = float(valid["epsilon"].max()) if len(valid) else 0.0
        rows = json.loads(table.to_json(orient="records", double_precision=15))
        print(json.dumps({"epsilon": best if math.isfinite(best) else None, "rows": rows}))
    elif args.csv:
        print(table.to_csv(index=False), end="")
    else:
        cols = [
            c
            for c in (
                "setting",
                "seed",
                "estimator",
                "selection",
                "epsilon",
                "valid",
                "claimed_epsilon",
            )
            if c in table.columns
        ]
        print(table[cols].to_string(index=False) if len(table) else "no estimator applies")
    return 0
