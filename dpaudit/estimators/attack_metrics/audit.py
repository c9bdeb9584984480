"""Applies the attack metrics (:mod:`.metrics`) to score files of every design.

What one row describes and what the bootstrap resamples, per design:

* ``one_run``: one row per trial (each trial is one model with its own coin-flip canaries),
  the trial's canaries resampled (IN and OUT separately);
* ``multi_run``: one row for the file, its runs (one target score each) resampled (IN and OUT
  runs separately);
* ``lidp``: one row for the file, the inserted (IN) and null (OUT) canaries of all trials
  pooled, whole trials resampled (the canaries of one model are not independent).

Parameters left out take the schema's defaults (:func:`dpaudit.defaults.fill_defaults`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dpaudit.defaults import fill_defaults
from dpaudit.estimators.attack_metrics import metrics as attack_metrics
from dpaudit.estimators.registry import FAMILY_FREE
from dpaudit.scores import ScoreFile, ScoreFileError


def _metrics(sf: ScoreFile, p: dict[str, Any], score, member, cluster=None) -> dict[str, Any]:
    try:
        res = attack_metrics.attack_metrics(
            score,
            member,
            delta=sf.delta,
            fprs=[float(a) for a in p["fprs"]],
            confidence=float(p["confidence"]),
            resamples=int(p["resamples"]),
            seed=int(p["seed"]),
            min_count=int(p["min_count"]),
            cluster=cluster,
        )
    except ValueError as exc:
        raise ScoreFileError(f"{sf.source}: attack_metrics: {exc}") from exc
    return {**res.as_row(), "assumes": FAMILY_FREE}  # estimates (valid False), of any mechanism


def run_attack_metrics(sf: ScoreFile, params: dict[str, Any]) -> list[dict[str, Any]]:
    """AUROC, TPR at low FPRs, balanced accuracy and the raw-count epsilon (a point estimate,
    not valid), each with a percentile bootstrap interval."""
    p = fill_defaults("attack_metrics", params)
    design = sf.meta["design"]
    if design == "one_run":
        return [
            {"trial": t, **_metrics(sf, p, sf.score[t], sf.membership[t])}
            for t in range(sf.n_trials)
        ]
    if design == "multi_run":
        if sf.n_canaries != 1:
            raise ScoreFileError(
                f"{sf.source}: design multi_run expects one target canary per trial, got "
                f"{sf.n_canaries} columns"
            )
        return [_metrics(sf, p, sf.score[:, 0], sf.membership[:, 0])]
    if design == "lidp":
        trial = np.broadcast_to(np.arange(sf.n_trials)[:, None], sf.score.shape)
        return [_metrics(sf, p, sf.score, sf.membership, cluster=trial)]
    raise ScoreFileError(f"{sf.source}: attack_metrics does not apply to design {design!r}")
