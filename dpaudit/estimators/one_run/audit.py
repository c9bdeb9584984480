"""Applies the one-run estimator (:mod:`.bound`) to single-model score files.

A parameter left out takes the schema's default (:func:`dpaudit.defaults.fill_defaults`).
"""

from __future__ import annotations

from typing import Any

from dpaudit.defaults import fill_defaults
from dpaudit.estimators.common.ties import in_id_order
from dpaudit.estimators.one_run import bound as one_run
from dpaudit.estimators.registry import FAMILY_FREE
from dpaudit.estimators.selection import multi_split
from dpaudit.scores import ScoreFile, ScoreFileError


def _grid(params: dict[str, Any], m: int) -> list[tuple[int, int]]:
    if params.get("grid"):
        return [(int(kp), int(km)) for kp, km in params["grid"]]
    grid = one_run.default_grid(m, params.get("k_values"))
    if not grid:
        raise ValueError(
            f"the candidate grid is empty: no k of k_values {params.get('k_values')} lies in "
            f"1..{m} (the file's canaries); give k_values of at most {m}"
        )
    return grid


def _fixed_pair(params: dict[str, Any], m: int) -> tuple[int, int] | None:
    """(k+, k-) of the ``fixed`` selection: ``fixed``, or from ``fixed_fraction`` r =
    round(fraction * m) guesses, the ceil(r/2) highest scores IN and the floor(r/2) lowest OUT
    (Steinke et al. 2023, Alg. 1 line 7 with k+ = k- = r/2; the r = n/2 of Xiang et al.,
    Fig. 6, App. A; the same split as ``fdp_one_run``'s ``guess: balanced``)."""
    fixed, fraction = params["fixed"], params["fixed_fraction"]
    if fixed and fraction is not None:
        raise ValueError("one_run: set fixed (k+, k-) or fixed_fraction, not both")
    if fraction is not None:
        r = max(1, round(float(fraction) * m))
        return (r + 1) // 2, r // 2
    return (int(fixed[0]), int(fixed[1])) if fixed else None


def run_one_run(sf: ScoreFile, params: dict[str, Any]) -> list[dict[str, Any]]:
    """Steinke-Nasr-Jagielski one-run bound (Theorem 3.1), per trial, per selection rule."""
    if sf.meta["design"] != "one_run":
        raise ScoreFileError(f"{sf.source}: one_run applies to one-run designs only")
    params = fill_defaults("one_run", params)
    confidence = float(params["confidence"])
    selections = params["selections"]
    fixed = _fixed_pair(params, sf.n_canaries)
    plain = [s for s in selections if s != multi_split.NAME]
    grid = _grid(params, sf.n_canaries)
    rows = []
    for t in range(sf.n_trials):
        score, member = in_id_order(sf.score[t], sf.membership[t], sf.canary_id[t])
        results = one_run.audit_scores(
            score,
            member,
            delta=sf.delta,
            confidence=confidence,
            grid=grid,
            selections=plain,
            fixed=fixed,
            split_seed=int(params["split_seed"]),
        )
        by_selection = {res.selection: res.as_row() for res in results}
        for sel in selections:
            if sel == multi_split.NAME:  # several sample splits, combined validly
                row = multi_split.one_run_row(
                    score,
                    member,
                    sf.delta,
                    confidence,
                    grid,
                    multi_split.rule_of(params),
                )
            else:
                row = by_selection[sel]
            rows.append({"trial": t, **row, "assumes": FAMILY_FREE})  # (eps, delta)-DP itself
    return rows
