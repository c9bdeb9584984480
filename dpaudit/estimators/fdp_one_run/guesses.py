"""Tight privacy audit in one run (Xiang, Wang, Xiao, Tian, Wang 2025; arXiv:2509.08704).

As printed, with the caveats below.

n secret bits (canaries included by fair coins), one run of the mechanism, and r guesses
released by a top-r filter on a confidence score (Def. 6, Eq. 7). Of the r released guesses
``wrong`` are wrong. The null hypothesis is "the mechanism is f-DP" for f in a one-parameter
family (mu-GDP, Laplace, f_{eps,delta}, subsampled Gaussian). The paper's reduction:

* Theorem 1: any f-DP audit is "transmission-dominated" by n independent f-DP channels with the
  MAP decoder and score |privacy loss| (Def. 9-10, Lemma 2).
* Theorem 3, Eq. (25): the k-th best released guess of those channels errs with probability
  v_k, an integral against the order-statistic density (Theorem 2, Eq. 22). With the
  substitution u = 1 - F_Y in Eq. (25), v_j = E[h(U_(j))], U_(j) ~ Beta(j, n - j + 1), where
  h is the quantile function of the error probability 1/(1 + e^{|L|}) under (P + Q)/2 and
  j = 1 is the most confident released guess.
* Proposition 1, Eq. (26): P[at most u errors] <= min_{lambda<0} exp(-lambda u
  + sum_k ln(1 - v_k + v_k e^lambda)), the Chernoff bound for independent Bernoulli(v_k);
  this is the paper's p-value. It bounds the tail of independent Bernoulli(v_k), which is
  narrower than the true law of the released errors (they are dependent through the shared
  order statistics), so the default tail never reports less than the exact one below.
* Exact tail (``tail="exact"``, an extension): the exact law of the wrong count of the
  dominating audit (the right-hand side of Eq. 19), by conditioning on the selection
  threshold: W | T ~ Binomial(r, m(T)), T ~ Beta(r+1, n-r) (:func:`exact_log_cdf`); at
  r = n, W ~ Binomial(n, p_min).
* Section 5.4: the lower bound is the least private null that is still rejected, found here by
  root finding on the family parameter (the rejected, conservative end is returned), then
  reported as (epsilon, delta) by Algorithm 2.

Soundness caveats (docs/estimators/fdp_one_run.md, findings): Theorem 1 fails for the
f_{eps,delta} family with delta > 0 (a counterexample mechanism is in
:mod:`dpaudit.mechanisms.fdp_pathological`); that is left as printed. The V_k of Theorem 3 are not
independent: Eq. (26) alone falls below the true tail when few errors are expected, so the
default p-value is max(Eq. 26, exact tail), which is what the paper's Eq. (19) needs.

Where each part lives (every name is re-exported here, the estimator's one import path):
:mod:`.fdp_one_run_families` (the null families: h, p_min, Algorithm 2),
:mod:`.fdp_one_run_tails` (v_j, the Chernoff and exact tails, the p-value),
:mod:`.fdp_one_run_bound` (Section 5.4's search), :mod:`.fdp_one_run_definition` (the same
formulas by plain numerics, the reference of the tests); this module: the released guesses
(Def. 6, Eq. 7) and the rejections of a true f_{eps,delta} null.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Protocol

import numpy as np

from dpaudit.accounting.gaussian import gdp_delta
from dpaudit.estimators.fdp_one_run_bound import (
    PARAM_MAX,
    PARAM_TOL,
    Z_CLIP,
    FdpBound,
    epsilon_lower_bound,
    no_guess_bound,
    param_lower_bound,
)
from dpaudit.estimators.fdp_one_run_families import (
    ALGORITHM2_RTOL,
    FAMILIES,
    NEWTON_TOL,
    canonical_family,
    error_prob,
    error_quantile,
    from_epsilon,
    laplace_kink,
    p_min,
    sgm_delta,
    sgm_kink,
    to_epsilon,
)
from dpaudit.estimators.fdp_one_run_tails import (
    J_EXACT,
    J_GEOMETRIC,
    M_ROUND_DOWN,
    MEAN_PANELS,
    NODES_PER_PANEL,
    PANELS,
    TAILS,
    THRESHOLD_PANELS,
    V_ROUND_DOWN,
    check_counts,
    chernoff_log_p,
    chernoff_signed_root,
    clear_caches,
    exact_log_cdf,
    j_grid,
    p_value,
    poisson_binomial_log_cdf,
    quadrature_rule,
    threshold_error_rate,
    v_vector,
)
from dpaudit.estimators.ties import Cut

#: The families (:mod:`.fdp_one_run_families`), tails (:mod:`.fdp_one_run_tails`) and bound
#: (:mod:`.fdp_one_run_bound`) are re-exported: ``dpaudit.estimators.fdp_one_run`` stays the one
#: import path of the estimator.
__all__ = [
    "ALGORITHM2_RTOL",
    "FAMILIES",
    "GUESS_RULES",
    "J_EXACT",
    "J_GEOMETRIC",
    "MEAN_PANELS",
    "M_ROUND_DOWN",
    "NEWTON_TOL",
    "NODES_PER_PANEL",
    "PANELS",
    "PARAM_MAX",
    "PARAM_TOL",
    "TAILS",
    "THRESHOLD_PANELS",
    "V_ROUND_DOWN",
    "Z_CLIP",
    "canonical_family",
    "check_counts",
    "chernoff_log_p",
    "chernoff_signed_root",
    "clear_caches",
    "epsilon_lower_bound",
    "error_prob",
    "error_quantile",
    "exact_log_cdf",
    "FdpBound",
    "from_epsilon",
    "gdp_delta",
    "guess_counter",
    "j_grid",
    "laplace_kink",
    "no_guess_bound",
    "p_min",
    "p_value",
    "param_lower_bound",
    "pathological_rejection_rate",
    "poisson_binomial_log_cdf",
    "quadrature_rule",
    "rejection_table",
    "released_guesses",
    "sgm_delta",
    "sgm_kink",
    "threshold_error_rate",
    "to_epsilon",
    "v_vector",
    "WrongCountLaw",
]


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
    abstained on (:mod:`.ties`), so k_plus + k_minus <= r guesses are released, the same ones
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
