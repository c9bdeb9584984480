"""Every chosen estimator on every score file it applies to. Without --config, each --estimator
names a method run with its default parameters; with --config, names refer to the config's
estimator blocks. Default: every method (or block) whose bounds assume no trade-off family
(column 'assumes' empty); name the others (e.g. the GDP tests) to run them. The one-run bounds
need the canaries' membership to be independent fair coins: where a file's IN count is
implausible under the inclusion law it declares (two-sided exact binomial test, p-value in
column membership_pvalue, level dpaudit.audit.MEMBERSHIP_TEST_LEVEL), their rows carry no bound
and say why (column note).
"""

from __future__ import annotations

import argparse
import json
import math

from dpaudit.keys import CLAIMED_EPSILON, MEMBERSHIP_PVALUE

HELP = "run estimators on score files and print the audit table"


def arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("scorefiles", nargs="+", metavar="SCOREFILE", help="score files (.npz)")
    p.add_argument(
        "--estimator",
        action="append",
        default=[],
        metavar="NAME",
        help="estimator to run (repeatable); default: all that assume no trade-off family",
    )
    p.add_argument("--config", help="a dpaudit config file whose 'estimators' blocks to use")
    p.add_argument("--csv", action="store_true", help="print CSV instead of a text table")
    p.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object: epsilon (the largest valid, family-free bound), the "
        "union-bound joint_confidence at which that maximum holds, and the rows; infinite "
        'values are the strings "inf" / "-inf", NaN is null',
    )


def estimator_specs(names: list[str], config_path: str | None) -> dict[str, dict]:
    """Estimator blocks by name, as the pipeline's audit jobs get them
    (:func:`dpaudit.pipeline.params.estimator_block` of the validated config): from a config
    file, or each named method (default all) at the schema's defaults."""
    from dpaudit import estimators
    from dpaudit.config import (
        ConfigError,
        default_estimator_config,
        load_config_file,
        validate_config,
    )
    from dpaudit.pipeline.params import estimator_block

    if config_path:
        config = load_config_file(config_path)
        try:
            # the whole file against the schema; the cross-key checks of the estimator blocks
            # only: those of the experiments would import what they name (train.entry_point)
            validate_config(config, require_experiments=False, cross_checks=False)
            if config.get("estimators"):
                validate_config({"estimators": config["estimators"]}, require_experiments=False)
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
        names = names or [n for n in sorted(specs) if estimators.family_free(specs[n])]
        if not names:
            assumed = {n: estimators.block_assumes(b) for n, b in sorted(specs.items())}
            raise ValueError(
                f"{config_path}: every estimator block assumes a trade-off family ({assumed}); "
                "name the ones to run with --estimator"
            )
    else:
        for name in names:
            if name not in estimators.METHODS:
                raise ValueError(
                    f"unknown estimator method {name!r}; allowed: {sorted(estimators.METHODS)}"
                )
        names = names or default_methods()
        config = default_estimator_config(names)
    return {n: estimator_block(config, n) for n in names}


def default_methods() -> list[str]:
    """The methods ``dpaudit audit`` runs when none is named: those whose rows at the schema's
    default parameters assume no trade-off family (not the GDP tests of ``fdp_one_run`` and
    ``fdp_abstention``, whose default null family is ``gdp``, nor the ``gdp_fit`` estimate)."""
    from dpaudit import estimators
    from dpaudit.defaults import estimator_defaults

    return [
        name
        for name in sorted(estimators.METHODS)
        if estimators.family_free({"method": name, **estimator_defaults(name)})
    ]


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
        print(json.dumps({**headline(table), "rows": json_rows(table)}, allow_nan=False))
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
                "assumes",
                CLAIMED_EPSILON,
                MEMBERSHIP_PVALUE,
            )
            if c in table.columns
        ]
        if "note" in table.columns and table["note"].notna().any():  # why a row has no bound
            cols.append("note")
        shown = table[cols].fillna({"note": ""}) if "note" in cols else table[cols]
        print(shown.to_string(index=False) if len(table) else "no estimator applies")
    return 0


def headline(table) -> dict:
    """The headline of ``dpaudit audit --json``: ``epsilon``, the largest bound over the rows that
    may decide a verdict (:func:`dpaudit.verdict.usable_for_verdict`: valid, assuming no trade-off
    family the file does not declare, at the claim's delta or larger) or would but for a missing
    claim (a file whose ``claimed_epsilon`` is null, e.g. the noise-free control, still has valid
    bounds), over every file, estimator and selection rule; ``rows_combined``, how many rows that
    maximum ranges over; and ``joint_confidence``, the union bound 1 - sum(1 - confidence) over them
    (clipped at 0), the confidence at which the maximum is a lower bound. Each row's own
    ``confidence`` holds for that row alone: the maximum of N rows at 95% each holds at 1 - 0.05 N
    only (on 40 files of a mechanism whose true epsilon is 0 the largest of them exceeds 0 by
    chance). Without a usable row ``epsilon`` is 0 (a trivial bound) at ``joint_confidence`` 1."""
    from dpaudit.verdict import usable_for_verdict

    usable = table[usable_for_verdict(table, need_claim=False)] if len(table) else table
    if not len(usable):
        return {"epsilon": 0.0, "joint_confidence": 1.0, "rows_combined": 0}
    conf = usable["confidence"] if "confidence" in usable else None
    if conf is None or conf.isna().any():
        raise ValueError("a valid row has no confidence: cannot state the joint confidence")
    joint = 1.0 - float((1.0 - conf.astype(float)).sum())
    return {
        "epsilon": _json_value(float(usable["epsilon"].astype(float).max())),
        "joint_confidence": max(joint, 0.0),
        "rows_combined": len(usable),
    }


def _json_value(value):
    """A value JSON can hold: infinities as the strings "inf" / "-inf", NaN as null, NumPy
    scalars as Python ones."""
    if hasattr(value, "item") and not isinstance(value, str):
        value = value.item()
    if isinstance(value, float):
        if math.isnan(value):
            return None
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
    return value


def json_rows(table) -> list[dict]:
    """The rows of an audit table as ``dpaudit audit --json`` prints them: one object per row,
    infinite values as the strings "inf" / "-inf" (JSON has no infinity), missing values as
    null."""
    return [
        {key: _json_value(value) for key, value in row.items()}
        for row in table.to_dict(orient="records")
    ]
