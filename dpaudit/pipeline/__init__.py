"""Helpers the Snakemake rules use to turn config blocks into wildcards and parameters.

Kept in the library (not in the .smk files) so they are unit-tested and usable elsewhere:
this module turns experiments into settings, :mod:`dpaudit.pipeline.paths` declares every
output path once, :mod:`dpaudit.pipeline.targets` lists the files and parameters of the jobs
a config asks for.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

NONPRIVATE = "nonprivate"


def setting_name(target_epsilon: float | None) -> str:
    """``eps4``, ``eps0.5``, ... or ``nonprivate`` for a run without noise."""
    if target_epsilon is None or math.isinf(target_epsilon):
        return NONPRIVATE
    return f"eps{target_epsilon:g}"


def train_settings(experiment: dict[str, Any]) -> dict[str, float | None]:
    """Setting name -> target epsilon (None: no noise) of a ``kind: train`` experiment."""
    train = experiment["train"]
    out: dict[str, float | None] = {setting_name(e): float(e) for e in train["target_epsilons"]}
    if train.get("nonprivate"):
        out[NONPRIVATE] = None
    return out


def _fmt(value: Any) -> str:
    text = f"{value:g}" if isinstance(value, float) else str(value)
    return text.replace("-", "m").replace("+", "")


def simulate_settings(experiment: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Setting name -> mechanism parameters of a ``kind: simulate`` experiment.

    Each setting is the fixed ``params`` updated with one of the explicit ``points`` (a list of
    dicts, for parameters that vary together) and one point of the cartesian product of
    ``grid``; it is named after the varying values, like ``n1024_K32``.
    """
    base = dict(experiment.get("params") or {})
    grid = experiment.get("grid") or {}
    points = experiment.get("points") or [{}]
    keys = list(grid)
    out: dict[str, dict[str, Any]] = {}
    for point in points:
        for values in itertools.product(*(grid[k] for k in keys)):
            varying = {**point, **dict(zip(keys, values, strict=True))}
            name = "_".join(f"{k}{_fmt(v)}" for k, v in varying.items()) or "base"
            if name in out:
                raise ValueError(f"two settings are both named {name!r}")
            out[name] = {**base, **varying}
    return out


def varying_keys(experiment: dict[str, Any]) -> list[str]:
    """The parameter names that vary across the settings of a simulate experiment."""
    keys = list(experiment.get("grid") or {})
    for point in experiment.get("points") or []:
        keys += [k for k in point if k not in keys]
    return keys


def experiment_settings(experiment: dict[str, Any]) -> dict[str, Any]:
    """Setting name -> what defines it, for experiments that write score files."""
    kind = experiment["kind"]
    if kind == "train":
        return train_settings(experiment)
    if kind == "simulate":
        return simulate_settings(experiment)
    return {}


def setting_columns(experiment: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Setting name -> the grid values that vary across settings (joined onto audit tables)."""
    if experiment["kind"] == "simulate":
        keys = varying_keys(experiment)
        return {s: {k: p[k] for k in keys} for s, p in simulate_settings(experiment).items()}
    if experiment["kind"] == "train":
        return {s: {"target_epsilon": e} for s, e in train_settings(experiment).items()}
    return {}


def experiment_designs(experiment: dict[str, Any]) -> set[str]:
    """The score-file designs an experiment produces."""
    if experiment["kind"] == "simulate":
        from dpaudit.mechanisms.registry import DESIGNS

        return {DESIGNS[experiment["mechanism"]]}
    return {experiment.get("design", "one_run")}


def applicable_estimators(config: dict[str, Any], experiment: str) -> list[str]:
    """Names of the estimator blocks to run on ``experiment``: those it lists (default all),
    restricted to the methods that apply to its designs."""
    from dpaudit import estimators

    exp = config["experiments"][experiment]
    names = exp.get("estimators") or sorted(config.get("estimators", {}))
    designs = experiment_designs(exp)
    keep = []
    for name in names:
        method = estimators.get(config["estimators"][name]["method"])
        if designs & set(method.designs):
            keep.append(name)
    return keep


def canonical(value: Any) -> Any:
    """``value`` with every mapping's keys sorted, recursively.

    Snakemake decides whether a job's parameters changed by comparing their representation,
    so the order of keys in a config file must not matter.
    """
    if isinstance(value, dict):
        return {k: canonical(value[k]) for k in sorted(value)}
    if isinstance(value, list | tuple):
        return [canonical(v) for v in value]
    return value
