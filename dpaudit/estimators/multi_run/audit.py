"""Applies the multi-run estimators (:mod:`.bound`) to score files of design ``multi_run``.

A ``multi_run`` score file has one row per trial (one training run or one simulated run) and
one column, the target canary; ``membership`` says whether the target was in that run's
training set (hypothesis D) or not (D', the zero-out record in its place).

Parameters (the estimator's config block; a key left out takes the schema's default, filled by
:func:`dpaudit.defaults.fill_defaults`, so a runner and the pipeline read the same values):

``confidence``       joint confidence of the FPR and FNR bounds
``selections``       list of ``same_data`` / ``heldout`` / ``multi_split``
``splits``, ``split_quantile``  multi_split: K held-out splits, the ceil(gamma K)-th largest bound
``select_fraction``  share of the runs used to choose the threshold under ``heldout``
``split_seed``       seed of the held-out split
"""

from __future__ import annotations

from typing import Any

from dpaudit.defaults import fill_defaults
from dpaudit.estimators.multi_run import bound as multi_run
from dpaudit.estimators.registry import assumes
from dpaudit.estimators.selection import multi_split
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


def _common(method: str, params: dict[str, Any]) -> dict[str, Any]:
    p = fill_defaults(method, params)
    selections = p["selections"]
    if isinstance(selections, str):
        selections = [selections]
    return {
        "confidence": float(p["confidence"]),
        "selections": list(selections),
        "select_fraction": float(p["select_fraction"]),
        "split_seed": int(p["split_seed"]),
        "multi_split": multi_split.rule_of(p, float(p["select_fraction"])),
    }


def _rows(estimate: str, sf: ScoreFile, p: dict[str, Any]) -> list[dict[str, Any]]:
    """Rows of the threshold audit with ``estimate`` (``cp``: Clopper-Pearson, family-free;
    ``gdp``: the GDP fit, which assumes a GDP curve), one per selection rule."""
    tag = assumes("gdp_fit" if estimate == "gdp" else "multi_run_cp")
    return [{**row, "assumes": tag} for row in _selection_rows(estimate, sf, p)]


def _selection_rows(estimate: str, sf: ScoreFile, p: dict[str, Any]) -> list[dict[str, Any]]:
    score, member = _columns(sf)
    rows = []
    for sel in p["selections"]:
        if sel == multi_split.NAME:  # several held-out splits, combined validly
            try:
                rows.append(
                    multi_split.multi_run_row(
                        score,
                        member,
                        sf.delta,
                        p["confidence"],
                        p["select_fraction"],
                        estimate,
                        p["multi_split"],
                    )
                )
            except ValueError as exc:
                raise ScoreFileError(f"{sf.source}: {exc}") from exc
            continue
        try:
            res = multi_run.threshold_audit(
                score,
                member,
                delta=sf.delta,
                confidence=p["confidence"],
                selection=sel,
                select_fraction=p["select_fraction"],
                split_seed=p["split_seed"],
                estimate=estimate,
            )
        except ValueError as exc:
            raise ScoreFileError(f"{sf.source}: {exc}") from exc
        rows.append(res.as_row())
    return rows


def run_multi_run_cp(sf: ScoreFile, params: dict[str, Any]) -> list[dict[str, Any]]:
    """Clopper-Pearson FPR/FNR bounds and Eq. 1 (Annamalai et al., Alg. 5), per selection."""
    return _rows("cp", sf, _common("multi_run_cp", params))


def run_gdp_fit(sf: ScoreFile, params: dict[str, Any]) -> list[dict[str, Any]]:
    """GDP-fit estimate of Nasr et al. 2023 (an estimate, never valid), per selection."""
    return _rows("gdp", sf, _common("gdp_fit", params))
