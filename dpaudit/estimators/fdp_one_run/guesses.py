"""The guesses released by the tight one-run audit, and its rejections of a true null.

Xiang, Wang, Xiao, Tian, Wang 2025, "Tight Privacy Audit in One Run", arXiv:2509.08704: the
guesses released by a top-r filter on a confidence score (Def. 6, Eq. 7), and the exact rate at
which the test rejects a true f_{eps,delta} null (the Theorem 1 counterexample of
:mod:`dpaudit.mechanisms.fdp_pathological`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Protocol

import numpy as np

from dpaudit.estimators.common.ties import Cut
from dpaudit.estimators.fdp_one_run.tails import (
    check_counts,
    chernoff_log_p,
    exact_log_cdf,
    v_vector,
)

# --------------------------------------------------------------------------------------------
# Released guesses from scores
# --------------------------------------------------------------------------------------------

GUESS_RULES = ("balanced", "top_in", "centered")


def released_guesses(
    score: np.ndarray, membership: np.ndarray, r: int, rule: str = "balanced"
) -> tuple[int, int, int]:
    """(k_plus, k_minus, wrong) of the guesses released when r are asked for (Def. 6 with
    filter Eq. 7).

    ``balanced``: guess IN for the ceil(r/2) highest scores and OUT for the floor(r/2) lowest
    (the paper's "general case", as Steinke et al.); ``top_in``: IN for the r highest;
    ``centered``: confidence |score - median| and guess by the side of the median (IN above it;
    the paper's "special case"). A tied block of scores (of confidences) that straddles a cut is
    abstained on (:mod:`.common.ties`), so k_plus + k_minus <= r guesses are released, the same ones
    for every order of the canaries.
    """
    return guess_counter(score, membership, rule)(r)


def guess_counter(
    score: np.ndarray, membership: np.ndarray, rule: str = "balanced"
) -> Callable[[int], tuple[int, int, int]]:
    """r -> :func:`released_guesses` (score, membership, r, rule), sorting the scores once (a
    grid of r then costs one sort, not one per r)."""
    score = np.asarray(score, dtype=float).ravel()
    member = np.asarray(membership).ravel().astype(np.int64)
    n = len(score)
    if rule == "balanced" or rule == "top_in":
        cut = Cut(score, member)

        def count(r: int) -> tuple[int, int, int]:
            check_counts(n, r)
            want_in = r if rule == "top_in" else (r + 1) // 2
            kp, km = cut.top(want_in), cut.bottom(r - want_in)
            # non-members guessed IN + members guessed OUT
            return kp, km, (kp - cut.sum_top(kp)) + cut.sum_bottom(km)

        return count
    if rule == "centered":
        c = float(np.median(score))
        guess_in = score > c
        cut = Cut(np.abs(score - c), guess_in, guess_in != (member == 1))

        def count_centered(r: int) -> tuple[int, int, int]:
            check_counts(n, r)
            k = cut.top(r)
            ins = cut.sum_top(k, 0)
            return ins, k - ins, cut.sum_top(k, 1)

        return count_centered
    raise ValueError(f"unknown guess rule {rule!r}; allowed: {', '.join(GUESS_RULES)}")


# --------------------------------------------------------------------------------------------
# The test's rejections of a true f_{eps,delta} null (the Theorem 1 counterexample mechanism is
# dpaudit.mechanisms.fdp_pathological.Pathological)
# --------------------------------------------------------------------------------------------


class WrongCountLaw(Protocol):
    """An (eps, delta)-DP mechanism's n bits, r released guesses and the law of the number of
    wrong guesses (pmf over 0..r)."""

    n: int
    r: int
    epsilon: float
    delta: float

    def wrong_pmf(self) -> np.ndarray: ...


def rejection_table(
    n: int, r: int, epsilon: float, delta: float, confidence: float = 0.95, tail: str = "chernoff"
) -> np.ndarray:
    """Boolean over u = 0..r: does the paper's test reject the true null f_{eps,delta}?"""
    log_alpha = math.log1p(-confidence)
    v = v_vector("approx_dp", epsilon, n, r, delta=delta) if tail == "chernoff" else None
    out = np.zeros(r + 1, dtype=bool)
    for u in range(r + 1):
        log_p = exact_log_cdf("approx_dp", epsilon, n, r, u, delta)
        if v is not None:  # the default tail, as p_value computes it
            log_p = max(log_p, chernoff_log_p(v, u))
        if log_p <= log_alpha:
            out[u] = True
        else:
            break  # the p-value is nondecreasing in u
    return out


def pathological_rejection_rate(
    mech: WrongCountLaw, confidence: float = 0.95, tail: str = "chernoff"
) -> float:
    """Exact probability that the paper's test (family approx_dp at the mechanism's own
    (eps, delta)) rejects the TRUE null, for a mechanism whose number of wrong released guesses
    has the law ``mech.wrong_pmf()`` (e.g. the pathological mechanism of
    :mod:`dpaudit.mechanisms.fdp_pathological`)."""
    rej = rejection_table(mech.n, mech.r, mech.epsilon, mech.delta, confidence, tail)
    return float(np.sum(mech.wrong_pmf()[rej]))
