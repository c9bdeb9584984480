"""Helpers the Snakemake rules use to turn config blocks into wildcards and parameters.

Kept in the library (not in the .smk files) so they are unit-tested and usable elsewhere.
"""

from __future__ import annotations

import logging
import math
import sys
from pathlib import Path
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


def experiment_designs(experiment: dict[str, Any]) -> set[str]:
    """The score-file designs an experiment produces."""
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


def script_logging(log_path: str | Path | None) -> logging.Logger:
    """Send the ``dpaudit`` loggers (and warnings) of a Snakemake script to its log file."""
    handler: logging.Handler
    if log_path:
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(log_path, mode="w")
    else:
        handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    logging.captureWarnings(True)
    return logging.getLogger("dpaudit")


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
