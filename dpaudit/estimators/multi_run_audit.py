"""Applies the multi-run estimators (:mod:`.multi_run`) to score files of design ``multi_run``.

A ``multi_run`` score file has one row per trial (one training run or one simulated run) and
one column, the target canary; ``membership`` says whether the target was in that run's
training set (hypothesis D) or not (D', the zero-out record in its place).

Parameters read from the estimator's config block (all optional):

``confidence``       joint confidence of the FPR and FNR bounds (default 0.95)
``selections``       list of ``same_data`` / ``heldout`` (default both for ``multi_run_cp``,
                     ``["same_data"]`` for ``gdp_fit``)
``select_fraction``  share of the runs used to choose the threshold under ``heldout`` (0.5)
``split_seed``       seed of the held-out split (0)
"""

from __future__ import annotations

from typing import Any

from dpaudit.estimators import multi_run
from dpaudit.scores import ScoreFile, ScoreFileError


def _columns(sf: ScoreFile) -> tuple[Any, Any]:
    if sf.meta["design"] != "multi_run":
        raise ScoreFileError(f"{sf.source}: multi-run estimators apply to design multi_run only")
    if sf.n_canaries != 1:
        raise ScoreFileError(
            f"{sf.source}: design multi_run expects one target canary per trial, got "
            f"{sf.n_canaries} columns"
        )
    return sf.score[:, 0], sf.membership[:, 0]


def _common(params: dict[str, Any], default_sel: list[str]) -> dict[str, Any]:
    selections = params.get("selections", default_sel)
    if isinstance(selections, str):
        selections = [selections]
    return {
        "confidence": float(params.get("confidence", 0.95)),
        "selections": list(selections),
        "select_fraction": float(params.get("select_fraction", 0.5)),
        "split_seed": int(params.get("split_seed", 0)),
    }


def _rows(func, sf: ScoreFile, p: dict[str, Any]) -> list[dict[str, Any]]:
    score, member = _columns(sf)
    rows = []
    for sel in p["selections"]:
        try:
            res = func(
                score,
                member,
                delta=sf.delta,
                confidence=p["confidence"],
                selection=sel,
                select_fraction=p["select_fraction"],
                split_seed=p["split_seed"],
            )
        except ValueError as exc:
            raise ScoreFileError(f"{sf.source}: {exc}") from exc
        rows.append(res.as_row())
    return rows


def run_multi_run_cp(sf: ScoreFile, params: dict[str, Any]) -> list[dict[str, Any]]:
    """Clopper-Pearson FPR/FNR bounds and Eq. 1 (Annamalai et al., Alg. 5), per selection."""
    return _rows(multi_run.cp_audit, sf, _common(params, ["same_data", "heldout"]))


def run_gdp_fit(sf: ScoreFile, params: dict[str, Any]) -> list[dict[str, Any]]:
    """GDP-fit estimate of Nasr et al. 2023 (an estimate, never valid), per selection."""
    return _rows(multi_run.gdp_fit, sf, _common(params, ["same_data"]))
