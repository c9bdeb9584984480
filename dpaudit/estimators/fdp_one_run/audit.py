"""Applies the tight one-run f-DP audit (:mod:`dpaudit.estimators.fdp_one_run`) to single-model
score files.

Per trial, r guesses are released (rule ``guess``: ``balanced`` = the paper's general case,
IN for the ceil(r/2) highest scores and OUT for the floor(r/2) lowest; ``top_in``; ``centered``
= the special case, top r by |score - median|) and their errors counted. The lower bound is
the paper's (Theorem 3 + Proposition 1 + Algorithm 2). Choosing r after looking at the data is
multiple testing; the selection rules mirror the one-run estimator (:mod:`.one_run`):

* ``fixed``: r from the config (``r``, or ``r_fraction`` of n); valid.
* ``grid_max_uncorrected``: the best bound over the r grid, each at the nominal level;
  NOT a valid bound (``valid: False``).
* ``bonferroni``: every grid point tested at level (1 - confidence) / |grid|; valid.
* ``sample_split``: r / n chosen on a random half of the canaries, bound on the other half;
  valid.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from dpaudit.defaults import estimator_defaults, fill_defaults
from dpaudit.estimators.common.checks import check_confidence
from dpaudit.estimators.common.ties import in_id_order
from dpaudit.estimators.fdp_abstention import bound as fdp_abstention
from dpaudit.estimators.fdp_one_run import bound as fdp_bound
from dpaudit.estimators.fdp_one_run import families, tails
from dpaudit.estimators.fdp_one_run import guesses as fdp
from dpaudit.estimators.registry import assumes
from dpaudit.estimators.selection import multi_split, rules
from dpaudit.keys import CLAIMED_EPSILON
from dpaudit.scores import ScoreFile, ScoreFileError

SELECTIONS = rules.ONE_RUN_SELECTIONS


def default_r_grid(n: int) -> list[int]:
    """1, 2, 5 times powers of ten up to n, and n itself."""
    rs = {c * 10**e for e in range(8) for c in (1, 2, 5) if c * 10**e <= n}
    return sorted(rs | {n})


def _row(
    sel: str,
    bound: fdp_bound.FdpBound,
    kp: int,
    km: int,
    confidence: float,
    level: float,
    grid_size: int,
    valid: bool,
    claimed_p: float,
    guess: str,
) -> dict[str, Any]:
    return {
        "selection": sel,
        "epsilon": bound.epsilon,
        "valid": valid,
        "family": bound.family,
        bound.param_name: bound.param,
        "param_name": bound.param_name,
        "r": bound.r,
        "wrong": bound.wrong,
        "n": bound.n,
        "k_plus": kp,
        "k_minus": km,
        "guess": guess,
        "p_value": claimed_p,
        "confidence": confidence,
        "level_per_test": level,
        "grid_size": grid_size,
        "tail": bound.tail,
        "delta_used": bound.delta,
    }


def audit_scores(
    score: np.ndarray,
    membership: np.ndarray,
    family: str = "gdp",
    delta: float = 1e-5,
    confidence: float = 0.95,
    q: float | None = None,
    tail: str = "chernoff",
    guess: str = "balanced",
    selections: tuple[str, ...] | list[str] = ("grid_max_uncorrected", "bonferroni"),
    r_fixed: int | None = None,
    r_grid: list[int] | None = None,
    split_seed: int = 0,
    claimed_epsilon: float = math.inf,
    bound: Callable[..., fdp_bound.FdpBound] = fdp_bound.epsilon_lower_bound,
) -> list[dict[str, Any]]:
    """Rows of the tight one-run audit for one trial's scores, one per selection rule.

    ``p_value`` in each row is the p-value of the null "the mechanism is f_theta-DP" at the
    theta whose Algorithm-2 conversion at ``delta`` equals ``claimed_epsilon`` (NaN without a
    finite claim), at the selected r; Bonferroni-adjusted (times |grid|) for ``bonferroni``.

    ``bound`` is the test run at each r (the signature of
    :func:`dpaudit.estimators.fdp_one_run.bound.epsilon_lower_bound`): another test on the same
    released guesses (:mod:`.fdp_abstention`) reuses the selection rules; its rows carry
    ``p_value`` NaN (the test reports no p-value).
    """
    family = families.canonical_family(family)
    score = np.asarray(score, dtype=float).ravel()
    membership = np.asarray(membership).ravel()
    n = len(score)
    check_confidence(confidence)
    grid = sorted({int(r) for r in (r_grid or default_r_grid(n)) if 1 <= int(r) <= n})
    if not grid:
        raise ValueError(f"the r grid has no value in [1, n={n}]")
    theta_claim = (
        families.from_epsilon(family, claimed_epsilon, delta, q)
        if math.isfinite(claimed_epsilon) and bound is fdp_bound.epsilon_lower_bound
        else math.nan
    )

    abstention = getattr(bound, "func", bound) is fdp_abstention.epsilon_lower_bound  # or partial
    tail_of_bound = fdp_abstention.TAIL if abstention else tail

    bounds_on = _bounds_on(score, membership, guess, family, delta, q, tail, bound, tail_of_bound)

    def bound_on(part: slice | np.ndarray) -> rules.BoundAt:
        return bounds_on(part)[0]

    rows: list[dict[str, Any]] = []
    for sel in selections:
        rule = rules.strategy(sel, grid, r_fixed, split_seed, "params r (or r_fraction)")
        (bound_at, maximise), held_out = bounds_on(slice(None)), None
        if isinstance(rule, rules.Explicit):
            rule = rules.Explicit(int(rule.candidate))
        elif isinstance(rule, rules.Split):
            a, bh = rule.halves(n)
            na, nb = len(a), len(bh)
            if na < 1:
                raise ValueError("sample_split needs at least 2 canaries")
            grid_a = sorted({max(1, min(na, round(r * na / n))) for r in grid})
            bound_at, maximise = bound_on(bh), None
            choose_at, choose_max = bounds_on(a)
            held_out = rules.HeldOut(
                grid_a, choose_at, partial(_rescale, n_from=na, n_to=nb), choose_max
            )
        picked = rules.select(
            rule, confidence, bound_at, key=_epsilon_of, maximise=maximise, held_out=held_out
        )
        b, kp, km = picked.result
        p = _claimed_p(theta_claim, b.n, b.r, b.wrong, family, delta, q, tail, bound)
        if isinstance(rule, rules.Bonferroni) and not math.isnan(p):
            p = min(1.0, p * picked.grid_size)
        rows.append(
            _row(sel, b, kp, km, confidence, picked.level, picked.grid_size, picked.valid, p, guess)
        )
    return rows


def _bounds_on(
    score: np.ndarray,
    membership: np.ndarray,
    guess: str,
    family: str,
    delta: float,
    q: float | None,
    tail: str,
    bound: Callable[..., fdp_bound.FdpBound],
    tail_of_bound: str,
) -> Callable[[slice | np.ndarray], tuple[rules.BoundAt, rules.Maximiser | None]]:
    """part -> (the test at each r on the canaries ``part`` of :func:`audit_scores`, a
    maximiser over the grid or None): the guesses released at r (ties straddling a cut abstain,
    :mod:`.common.ties`) and ``bound`` on them (``tail_of_bound``: the tail a row without guesses
    reports)."""

    def bound_on(part: slice | np.ndarray) -> tuple[rules.BoundAt, rules.Maximiser | None]:
        sc = score[part]
        counts = fdp.guess_counter(sc, membership[part], guess)

        def bound_at(r: int, level: float) -> tuple[fdp_bound.FdpBound, int, int]:
            kp, km, wrong = counts(r)  # kp + km <= r: ties straddling a cut abstain (.ties)
            if kp + km == 0:
                return (
                    fdp_bound.no_guess_bound(len(sc), family, delta, level, tail_of_bound),
                    kp,
                    km,
                )
            b = bound(len(sc), kp + km, wrong, family, delta, level, q, tail)
            return b, kp, km

        maximise = None
        if bound is fdp_abstention.epsilon_lower_bound and q is None:
            # the same pick as the loop over the grid, most bisections skipped
            maximise = partial(
                fdp_abstention.best_over_grid, len(sc), counts=counts, family=family, delta=delta
            )
        return bound_at, maximise

    return bound_on


def _claimed_p(
    theta_claim: float,
    n: int,
    r: int,
    wrong: int,
    family: str,
    delta: float,
    q: float | None,
    tail: str,
    bound: Callable[..., fdp_bound.FdpBound],
) -> float:
    """The p-value of the claimed null f_theta_claim at the released guesses (NaN without a
    finite claim or for another test than :func:`.bound.epsilon_lower_bound`; 1 when
    any theta is allowed or no guess was released)."""
    if math.isnan(theta_claim) or bound is not fdp_bound.epsilon_lower_bound:
        return math.nan
    if math.isinf(theta_claim) or r == 0:  # any theta allowed, or no guess: no rejection
        return 1.0
    return tails.p_value(n, r, wrong, family, theta_claim, delta, q, tail)


def _rescale(r: int, n_from: int, n_to: int) -> int:
    """A guess count chosen on ``n_from`` canaries, carried over to ``n_to`` (in [1, n_to])."""
    return max(1, min(n_to, round(r * n_to / n_from)))


def _epsilon_of(bound: tuple[fdp_bound.FdpBound, int, int]) -> float:
    return bound[0].epsilon


def run_fdp_one_run(sf: ScoreFile, params: dict[str, Any]) -> list[dict[str, Any]]:
    """Tight one-run f-DP audit (Xiang et al. 2025: Theorem 3, Proposition 1, Algorithm 2),
    per trial, per selection rule of r."""
    return run_released_guess_audit(sf, params, "fdp_one_run", fdp_bound.epsilon_lower_bound)


def run_released_guess_audit(
    sf: ScoreFile,
    params: dict[str, Any],
    method: str,
    bound: Callable[..., fdp_bound.FdpBound],
) -> list[dict[str, Any]]:
    """Estimator ``method``'s rows: the test ``bound`` on the r released guesses of each trial,
    per selection rule of r (shared by :func:`run_fdp_one_run` and the f-DP abstention audit of
    Mahloujifar et al., :mod:`.fdp_abstention.audit`)."""
    if sf.meta["design"] != "one_run":
        raise ScoreFileError(f"{sf.source}: {method} applies to one-run designs only")
    known = sorted(estimator_defaults(method))
    unknown = sorted(set(params) - set(known))
    if unknown:
        raise ValueError(f"{method}: unknown parameter(s) {unknown}; allowed: {known}")
    # A config loader may fill schema defaults with null: null means "not given".
    p = fill_defaults(method, {k: v for k, v in params.items() if v is not None})
    family = families.canonical_family(p["family"])
    delta = float(sf.delta if p["delta"] is None else p["delta"])  # null: the file's delta
    q = p.get("q")
    if family == "subsampled_gaussian" and q is None:
        raise ValueError(f"{method}: family subsampled_gaussian needs parameter q")
    n = sf.n_canaries
    r_fixed = p["r"]
    if r_fixed is None and p["r_fraction"] is not None:
        r_fixed = max(1, round(float(p["r_fraction"]) * n))
    selections = list(p["selections"])
    plain = tuple(s for s in selections if s != multi_split.NAME)
    common = {
        "family": family,
        "delta": delta,
        "q": None if q is None else float(q),
        "tail": p.get("tail", "chernoff"),
        "guess": p["guess"],
        "r_fixed": None if r_fixed is None else int(r_fixed),
        "r_grid": p["r_grid"],
        CLAIMED_EPSILON: sf.claimed_epsilon,
        "bound": bound,
    }
    confidence = float(p["confidence"])
    tag = assumes(method, family, delta)  # the family the (epsilon, delta) report assumes
    rows = []
    for t in range(sf.n_trials):
        score, member = in_id_order(sf.score[t], sf.membership[t], sf.canary_id[t])
        plain_rows = audit_scores(
            score,
            member,
            confidence=confidence,
            selections=plain,
            split_seed=int(p["split_seed"]),
            **common,
        )
        by_selection = {row["selection"]: row for row in plain_rows}
        for sel in selections:
            if sel == multi_split.NAME:  # several sample splits, combined validly
                row = multi_split.fdp_one_run_row(
                    audit_scores,
                    score,
                    member,
                    confidence,
                    multi_split.rule_of(p),
                    **common,
                )
            else:
                row = by_selection[sel]
            rows.append({"trial": t, **row, "assumes": tag})
    return rows
