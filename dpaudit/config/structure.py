"""The cross-key checks of a whole config: what the schema cannot express.

:func:`check_references` runs them in order: each estimator block
(:mod:`dpaudit.config.estimator_checks`); each experiment's registered mechanism or analysis,
the estimators it names, each grid point of a train experiment (expanded by
:func:`dpaudit.pipeline.grid.grid_points`, checked against the schema here and by
:mod:`dpaudit.config.train_checks`), its LiDP estimators, verdict and trade-off figure; then the
experiments an analysis reads and the paper targets.
"""

from __future__ import annotations

from typing import Any

from dpaudit.config.errors import ConfigError, describe
from dpaudit.config.estimator_checks import (
    check_estimator_block,
    check_estimators_apply,
    check_lidp_order,
    check_lidp_trials,
)
from dpaudit.config.train_checks import check_train_point
from dpaudit.pipeline.grid import GridError, grid_points
from dpaudit.pipeline.settings import applicable_estimators, models_per_seed, setting_columns
from dpaudit.pipeline.targets import tradeoff_settings


def check_references(config: dict[str, Any], validator: Any = None) -> None:
    """Cross-key checks the schema cannot express."""
    names = sorted(config.get("estimators", {}))
    for name in names:
        check_estimator_block(name, config["estimators"][name])
    for exp, block in config.get("experiments", {}).items():
        _check_registered(exp, block)
        for name in block.get("estimators", []) or []:
            if name not in names:
                raise ConfigError(
                    f"config key experiments.{exp}.estimators: unknown estimator {name!r}; "
                    f"allowed: names defined under 'estimators': {names}"
                )
        check_estimators_apply(config, exp, block)
        for point, effective in _grid_points(exp, block, validator):
            try:
                check_train_point(exp, effective)
            except ConfigError as err:
                if not point:
                    raise
                raise ConfigError(f"{err} (at grid point {point!r} of experiments.{exp})") from None
        check_lidp_order(config, exp, block)
        check_lidp_trials(config, exp, block)
        _check_verdict_tradeoff(config, exp, block)
    _check_input_experiments(config)
    _check_paper_targets(config)


def _check_registered(exp: str, block: dict[str, Any]) -> None:
    """Mechanism and analysis names must be registered (their tables are the allowed values)."""
    if block.get("kind") == "simulate":
        from dpaudit.mechanisms.registry import MECHANISMS as table

        key = "mechanism"
    elif block.get("kind") == "analysis":
        from dpaudit.analyses import ANALYSES as table

        key = "analysis"
    else:
        return
    if block.get(key) not in table:
        raise ConfigError(
            f"config key experiments.{exp}.{key}: {block.get(key)!r} is not allowed; "
            f"allowed values: {sorted(table)}"
        )
    if key == "mechanism":
        _check_mechanism_params(exp, block)
    else:
        _check_analysis_inputs(exp, block)


def _check_analysis_inputs(exp: str, block: dict[str, Any]) -> None:
    """An analysis that reads audit tables needs its ``inputs``; the others take none."""
    from dpaudit.analyses.registry import READS_TABLES

    inputs = block.get("inputs") or []
    if block["analysis"] in READS_TABLES and not inputs:
        raise ConfigError(
            f"config key experiments.{exp}.inputs: analysis {block['analysis']!r} reads the "
            "audit tables of other experiments; allowed: a list of train or simulate experiments"
        )
    if block["analysis"] not in READS_TABLES and inputs:
        raise ConfigError(
            f"config key experiments.{exp}.inputs: analysis {block['analysis']!r} reads no "
            f"tables; allowed: [] (analyses that read tables: {sorted(READS_TABLES)})"
        )


def _check_mechanism_params(exp: str, block: dict[str, Any]) -> None:
    """Every key of ``params``, ``grid`` and ``points`` must be a parameter of the mechanism
    (so a misspelt key fails here, not in the middle of a run)."""
    from dpaudit.mechanisms.registry import accepted_params

    allowed = accepted_params(block["mechanism"])
    if allowed is None:
        return
    places = [("params", block.get("params") or {}), ("grid", block.get("grid") or {})]
    places += [(f"points[{i}]", p) for i, p in enumerate(block.get("points") or [])]
    for where, keys in places:
        for k in keys:
            if k not in allowed:
                raise ConfigError(
                    f"config key experiments.{exp}.{where}.{k}: not a parameter of mechanism "
                    f"{block['mechanism']!r}; allowed: {sorted(allowed)}"
                )


def _check_input_experiments(config: dict[str, Any]) -> None:
    """Every experiment an analysis reads (``inputs``) is a train or simulate experiment."""
    experiments = config.get("experiments", {})
    for exp, block in experiments.items():
        for name in block.get("inputs") or []:
            if experiments.get(name, {}).get("kind") not in ("train", "simulate"):
                allowed = sorted(
                    n for n, b in experiments.items() if b.get("kind") in ("train", "simulate")
                )
                raise ConfigError(
                    f"config key experiments.{exp}.inputs: {name!r} is not a train or simulate "
                    f"experiment of the config; allowed: {allowed}"
                )


def _check_paper_targets(config: dict[str, Any]) -> None:
    """Two experiments (or two products of one: its figure, verdict and trade-off figure) must
    not publish the same paper target (one would overwrite the other)."""
    seen: dict[str, str] = {}
    for exp, block in config.get("experiments", {}).items():
        keys = {"paper_target": block.get("paper_target")}
        for product in ("verdict", "tradeoff"):
            keys[f"{product}.target"] = (block.get(product) or {}).get("target")
        for key, target in keys.items():
            if target and target in seen:
                raise ConfigError(
                    f"config key experiments.{exp}.{key}: {target!r} is already published by "
                    f"{seen[target]}; allowed: a target nothing else publishes"
                )
            if target:
                seen[target] = f"experiments.{exp}.{key}"


def _check_verdict_tradeoff(config: dict[str, Any], exp: str, block: dict[str, Any]) -> None:
    """A verdict groups by columns the audit table has and reads an estimator the experiment
    runs; a trade-off figure selects at least one setting of a multi_run experiment and asks
    for no more runs than a setting has (each fails only inside a job otherwise)."""
    from dpaudit.verdict import VERDICT_ID_COLUMNS  # pandas

    verdict, tradeoff = block.get("verdict"), block.get("tradeoff")
    if (verdict or tradeoff) and block.get("kind") != "train":
        raise ConfigError(
            f"config key experiments.{exp}.{'verdict' if verdict else 'tradeoff'}: only train "
            "experiments have it; allowed: null"
        )
    if verdict:
        columns = sorted(
            {k for values in setting_columns(block).values() for k in values}
            | set(VERDICT_ID_COLUMNS)
        )
        bad = [c for c in verdict["by"] if c not in columns]
        if bad:
            raise ConfigError(
                f"config key experiments.{exp}.verdict.by: no audit-table column {bad}; "
                f"allowed: {columns}"
            )
        names = applicable_estimators(config, exp)
        if verdict.get("estimator") is not None and verdict["estimator"] not in names:
            raise ConfigError(
                f"config key experiments.{exp}.verdict.estimator: {verdict['estimator']!r} does "
                f"not run on this experiment; allowed: {names} or null"
            )
    if tradeoff:
        if block.get("design") != "multi_run":
            raise ConfigError(
                f"config key experiments.{exp}.tradeoff: needs design multi_run (one target "
                f"per run), got {block.get('design')!r}; allowed: null"
            )
        if block.get("selection"):
            raise ConfigError(
                f"config key experiments.{exp}.tradeoff: a tuning audit's trials are not "
                "DP-SGD runs of the claimed epsilon; allowed: null"
            )
        if not tradeoff_settings(config, exp):
            columns = setting_columns(block)
            raise ConfigError(
                f"config key experiments.{exp}.tradeoff.where: {tradeoff.get('where')!r} "
                f"selects no setting; allowed: values of the setting columns {columns}"
            )
        runs = tradeoff.get("runs") or []
        available = len(block["seeds"]) * models_per_seed(block)
        if runs and available and max(runs) > available:
            raise ConfigError(
                f"config key experiments.{exp}.tradeoff.runs: asks for {max(runs)} runs, but a "
                f"setting trains {available} (seeds x shards x train.models_per_shard); "
                f"allowed: runs <= {available}"
            )


def _grid_points(
    exp: str, block: dict[str, Any], validator: Any
) -> list[tuple[str, dict[str, Any]]]:
    """(grid point name, the experiment block with its values set) of each point of a train
    experiment's ``grid`` / ``points`` (:func:`dpaudit.pipeline.grid.grid_points`); each point's
    block is checked against the schema like the experiment's own keys."""
    try:
        points = grid_points(exp, block)
    except GridError as err:
        raise ConfigError(str(err)) from None
    for name, effective in points:
        if name and validator is not None:
            errors = list(validator.iter_errors({"experiments": {exp: effective}}))
            errors = [e for e in errors if list(e.absolute_path)[:1] == ["experiments"]]
            if errors:
                raise ConfigError(
                    f"{describe(errors[0])} (the value set by grid point {name!r} of "
                    f"experiments.{exp})"
                )
    return points
