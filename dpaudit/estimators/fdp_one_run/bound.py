"""The lower bound of the tight one-run audit: the least private null still rejected.

Xiang, Wang, Xiao, Tian, Wang 2025, "Tight Privacy Audit in One Run", arXiv:2509.08704,
Section 5.4: the p-value of :mod:`.tails` is computed for the nulls f_theta of a
family (:mod:`.families`), the largest rejected theta is found by root finding on the
family parameter (the rejected, conservative end is returned), and it is reported as
(epsilon, delta) by Algorithm 2.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import optimize, special

from dpaudit.estimators.common.checks import check_confidence
from dpaudit.estimators.common.search import bisect_rejected, bracket
from dpaudit.estimators.fdp_one_run.families import (
    FAMILIES,
    canonical_family,
    check_family_args,
    to_epsilon,
)
from dpaudit.estimators.fdp_one_run.tails import (
    check_counts,
    check_tail,
    chernoff_log_p,
    chernoff_signed_root,
    exact_log_cdf,
    v_vector,
)

#: Largest family parameter the search will consider (mu, or epsilon for approx_dp).
PARAM_MAX = 200.0
#: Absolute tolerance of the parameter search.
PARAM_TOL = 1e-7
#: Bound on the normal score the exact-tail search solves (p between about e^-1250 and 1).
Z_CLIP = 50.0


@dataclass
class FdpBound:
    """Result of one audit: the rejected family parameter and its (epsilon, delta) form."""

    family: str
    param_name: str
    param: float
    epsilon: float
    p_value: float
    n: int
    r: int
    wrong: int
    delta: float
    confidence: float
    tail: str

    @classmethod
    def of(
        cls, family: str, param: float, epsilon: float, p_value: float, counts: tuple, level: tuple
    ) -> FdpBound:
        """The result at ``param`` of the null ``family`` (its parameter named by
        :data:`.families.FAMILIES`), with ``counts`` = (n, r, wrong) and ``level`` = (delta,
        confidence, tail); the counts are stored as ``int``, delta and confidence as ``float``."""
        n, r, wrong = counts
        delta, confidence, tail = level
        return cls(
            family=family,
            param_name=FAMILIES[family],
            param=param,
            epsilon=epsilon,
            p_value=p_value,
            n=int(n),
            r=int(r),
            wrong=int(wrong),
            delta=float(delta),
            confidence=float(confidence),
            tail=tail,
        )


def no_guess_bound(
    n: int, family: str, delta: float, confidence: float, tail: str = "chernoff"
) -> FdpBound:
    """The result of a guess count r at which every guess was abstained on (a tie straddling
    the cut, :mod:`.common.ties`): no guess released, nothing rejected, epsilon 0 (p-value 1).
    :func:`epsilon_lower_bound` itself needs r >= 1."""
    return FdpBound.of(family, 0.0, 0.0, 1.0, (n, 0, 0), (delta, confidence, tail))


def param_lower_bound(
    n: int,
    r: int,
    wrong: int,
    family: str,
    confidence: float = 0.95,
    delta: float | None = None,
    q: float | None = None,
    tail: str = "chernoff",
) -> tuple[float, float]:
    """(theta_l, p-value at theta_l): the largest family parameter whose null is rejected at
    level 1 - confidence, 0 if none is (p-value then at theta = 0).

    Brent root finding on a smooth monotone transform of the p-value (see
    :func:`chernoff_signed_root`), then stepping down until the returned parameter is itself
    rejected (checked on the p-value): the conservative end. Every f-family here is nested
    (f_theta-DP implies f_theta'-DP for theta' >= theta), so rejecting theta_l rejects all
    smaller theta too, whatever the shape of p(theta).
    """
    family = canonical_family(family)
    check_counts(n, r, wrong)
    check_confidence(confidence)
    check_family_args(family, delta, q)
    check_tail(tail)
    log_alpha = math.log1p(-confidence)
    # Root finding on a smooth monotone statistic g(theta) (decreasing in theta), with
    # "rejected" <=> g >= 0 <=> p <= alpha. Exact tail: g = z - z_alpha with z the normal
    # quantile of the p-value. Chernoff: the signed root of the Chernoff exponent minus
    # sqrt(-2 ln alpha), and since its p-value is never below the exact tail (p_value),
    # the smaller of that and the exact tail's g.
    ze_alpha = -float(special.ndtri_exp(log_alpha))
    zc_alpha = math.sqrt(-2 * log_alpha)
    memo: dict[float, tuple[float, float]] = {}

    def evaluate(theta: float) -> tuple[float, float]:
        if theta not in memo:
            log_p = exact_log_cdf(family, theta, n, r, wrong, delta, q)
            g = _normal_score(log_p) - ze_alpha
            if tail == "chernoff":
                v = v_vector(family, theta, n, r, delta=delta, q=q)
                log_p = max(log_p, chernoff_log_p(v, wrong))
                g = min(g, chernoff_signed_root(v, wrong) - zc_alpha)
            memo[theta] = (log_p, g)
        return memo[theta]

    def rejected(theta: float) -> bool:
        return evaluate(theta)[0] <= log_alpha

    def f(theta: float) -> float:
        return evaluate(theta)[1]

    if not rejected(0.0):
        return 0.0, math.exp(evaluate(0.0)[0])
    lo, hi = bracket(rejected, PARAM_MAX)
    if hi > PARAM_MAX:
        raise ValueError(
            f"every {family} parameter up to {PARAM_MAX} is rejected (n={n}, r={r}, "
            f"wrong={wrong}); the null family cannot describe these guesses"
        )
    if f(lo) > 0 and f(hi) < 0:
        theta = optimize.brentq(f, lo, hi, xtol=PARAM_TOL, rtol=1e-12)
    else:  # z saturated at an end: plain bisection on the rejection itself
        theta = bisect_rejected(rejected, lo, hi, PARAM_TOL)
    # The conservative end: step down until the returned parameter is itself rejected.
    step = PARAM_TOL
    while not rejected(theta):
        theta = max(lo, theta - step)
        step *= 2
    return float(theta), math.exp(evaluate(theta)[0])


def _normal_score(log_p: float) -> float:
    """z = -Phi^{-1}(p) from log p, for log p <= 0 (clipped: a log p rounded above 0 must not
    reach ndtri_exp, which returns NaN there), bounded to [-Z_CLIP, Z_CLIP] so that the root
    finder never sees an infinity."""
    log_p = min(0.0, float(log_p))
    if log_p < -0.5 * Z_CLIP * Z_CLIP:
        return Z_CLIP
    return float(np.clip(-special.ndtri_exp(log_p), -Z_CLIP, Z_CLIP))


def epsilon_lower_bound(
    n: int,
    r: int,
    wrong: int,
    family: str = "gdp",
    delta: float = 1e-5,
    confidence: float = 0.95,
    q: float | None = None,
    tail: str = "chernoff",
) -> FdpBound:
    """The tight one-run lower bound (Theorem 3 + Proposition 1 + Algorithm 2).

    ``delta`` is the delta of the f_{eps,delta} null (``approx_dp``) and the delta at which
    the other families are converted to (epsilon, delta) by Algorithm 2.
    """
    family = canonical_family(family)
    theta, p = param_lower_bound(n, r, wrong, family, confidence, delta, q, tail)
    epsilon = to_epsilon(family, theta, delta, q)
    return FdpBound.of(family, theta, epsilon, p, (n, r, wrong), (delta, confidence, tail))
