"""Applies the one-run estimator (:mod:`.one_run`) to single-model score files.

A parameter left out takes the schema's default (:func:`dpaudit.defaults.fill_defaults`).
"""

from __future__ import annotations

from typing import Any

from dpaudit.defaults import fill_defaults
from dpaudit.estimators import one_run
from dpaudit.scores import ScoreFile, ScoreFileError


def _grid(params: dict[str, Any], m: int) -> list[tuple[int, int]]:
    if params.get("grid"):
        return [(int(kp), int(km)) for kp, km in params["grid"]]
    return one_run.default_grid(m, params.get("k_values"))


def run_one_run(sf: ScoreFile, params: dict[str, Any]) -> list[dict[str, Any]]:
    """Steinke-Nasr-Jagielski one-run bound (Theorem 3.1), per trial, per selection rule."""
    if sf.meta["design"] != "one_run":
        raise ScoreFileError(f"{sf.source}: one_run applies to one-run designs only")
    params = fill_defaults("one_run", params)
    confidence = float(params["confidence"])
    selections = params["selections"]
    fixed = params["fixed"]
    rows = []
    for t in range(sf.n_trials):
        results = one_run.audit_scores(
            sf.score[t],
            sf.membership[t],
            delta=sf.delta,
            confidence=confidence,
            grid=_grid(params, sf.n_canaries),
            selections=selections,
            fixed=tuple(fixed) if fixed else None,
            split_seed=int(params["split_seed"]),
        )
        for res in results:
            rows.append({"trial": t, **res.as_row()})
    return rows
