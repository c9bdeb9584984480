"""The ``multi_split`` selection of the one-run, f-DP one-run and multi-run estimators.

Each estimator's ``sample_split`` / ``heldout`` selection chooses its guess count or threshold
on one random part of the data and bounds on the rest. ``multi_split`` runs that K times with
K different random splits, each at confidence 1 - gamma (1 - confidence), and reports the
ceil(gamma K)-th largest bound: valid at ``confidence`` under any dependence between the splits
(:class:`~dpaudit.estimators.selection.rules.MultiSplit` derives it; the quantile aggregation of
p-values of Meinshausen, Meier and Buehlmann 2009, Theorem 3.1). One split's luck no longer
decides the bound, which is what a single ``sample_split`` suffers from.

The row is the chosen split's row with ``selection`` = ``multi_split`` and the combination's
columns: ``splits`` (K), ``split_quantile`` (gamma), ``split_rank`` (ceil(gamma K)),
``split_confidence`` (each split's level), ``split_median_epsilon`` (the median of the K split
bounds, for reading only: NOT itself a bound at ``confidence``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from dpaudit.estimators.multi_run import bound as multi_run
from dpaudit.estimators.one_run import bound as one_run
from dpaudit.estimators.selection import rules

NAME = "multi_split"


def _combined_row(
    rule: rules.MultiSplit,
    confidence: float,
    run_split: Callable[[rules.Split, float], dict[str, Any]],
) -> tuple[dict[str, Any], rules.Combined]:
    """The chosen split's row with the overall confidence, validity and the combination's
    columns; and the combination (every split's row)."""
    combined = rules.combine_splits(rule, confidence, run_split, key=_epsilon)
    row = dict(combined.result)
    row.update(
        confidence=confidence,
        valid=bool(rule.valid and row["valid"]),
        selection=NAME,
        splits=int(rule.splits),
        split_quantile=float(rule.quantile),
        split_rank=combined.rank,
        split_confidence=combined.level,
        split_median_epsilon=float(np.median([r["epsilon"] for r in combined.results])),
    )
    return row, combined


def one_run_row(
    score: np.ndarray,
    membership: np.ndarray,
    delta: float,
    confidence: float,
    grid: Sequence[tuple[int, int]],
    rule: rules.MultiSplit,
) -> dict[str, Any]:
    """The one-run bound (Steinke et al. 2023, Theorem 3.1) under ``multi_split``."""

    def run_split(split: rules.Split, level: float) -> dict[str, Any]:
        (res,) = one_run.audit_scores(
            score,
            membership,
            delta=delta,
            confidence=level,
            grid=grid,
            selections=["sample_split"],
            split_seed=split.seed,
        )
        return res.as_row()

    return _combined_row(rule, confidence, run_split)[0]


def fdp_one_run_row(
    audit_scores: Callable[..., list[dict[str, Any]]],
    score: np.ndarray,
    membership: np.ndarray,
    confidence: float,
    rule: rules.MultiSplit,
    **kwargs: Any,
) -> dict[str, Any]:
    """The f-DP one-run bound (Xiang et al.) under ``multi_split``, ``audit_scores`` being
    :func:`dpaudit.estimators.fdp_one_run.audit.audit_scores` (passed in: that module runs this
    one); its ``p_value`` column (of the claimed epsilon) is the quantile aggregation of the
    splits' p-values."""

    def run_split(split: rules.Split, level: float) -> dict[str, Any]:
        (row,) = audit_scores(
            score,
            membership,
            confidence=level,
            selections=("sample_split",),
            split_seed=split.seed,
            **kwargs,
        )
        return row

    row, combined = _combined_row(rule, confidence, run_split)
    ps = [r["p_value"] for r in combined.results]
    p = math.nan if any(math.isnan(x) for x in ps) else rules.combine_p_values(ps, rule.quantile)
    row["p_value"] = p
    return row


def multi_run_row(
    score: np.ndarray,
    membership: np.ndarray,
    delta: float,
    confidence: float,
    select_fraction: float,
    estimate: str,
    rule: rules.MultiSplit,
) -> dict[str, Any]:
    """The multi-run threshold audit (``cp``: Eq. 1 of Annamalai et al. with Clopper-Pearson
    rates; ``gdp``: the GDP fit, never valid) with a held-out threshold, under ``multi_split``."""

    def run_split(split: rules.Split, level: float) -> dict[str, Any]:
        res = multi_run.threshold_audit(
            score,
            membership,
            delta=delta,
            confidence=level,
            selection="heldout",
            select_fraction=select_fraction,
            split_seed=split.seed,
            estimate=estimate,
        )
        return res.as_row()

    return _combined_row(rule, confidence, run_split)[0]


def _epsilon(row: dict[str, Any]) -> float:
    return float(row["epsilon"])


def rule_of(params: dict[str, Any], fraction: float = 0.5) -> rules.MultiSplit:
    """The strategy of an estimator block's ``splits``, ``split_quantile`` and ``split_seed``."""
    return rules.MultiSplit(
        splits=int(params["splits"]),
        quantile=float(params["split_quantile"]),
        seed=int(params["split_seed"]),
        fraction=fraction,
    )
