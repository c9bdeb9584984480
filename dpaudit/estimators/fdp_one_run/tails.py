"""The p-value of the tight one-run audit: order-statistic error rates, Chernoff and exact tails.

Xiang, Wang, Xiao, Tian, Wang 2025, "Tight Privacy Audit in One Run", arXiv:2509.08704:

* Theorem 3, Eq. (25): the k-th best released guess of the dominating channels errs with
  probability v_k; with u = 1 - F_Y, v_j = E[h(U_(j))], U_(j) ~ Beta(j, n - j + 1), h the
  error quantile of :mod:`.families` (:func:`v_vector`, by composite Gauss-Legendre
  quadrature on the probability scale of U_(j), rounded down by ``V_ROUND_DOWN``).
* Proposition 1, Eq. (26): the Chernoff bound on P[at most u errors] for independent
  Bernoulli(v_k) (:func:`chernoff_log_p`).
* The exact law of the wrong count of the dominating audit, the right-hand side of Eq. (19)
  (an extension; :func:`exact_log_cdf`): W | T ~ Binomial(r, m(T)), T ~ Beta(r+1, n-r).

:func:`p_value` combines them: the exact tail, or max(Eq. 26, exact tail) by default (Eq. 26
alone falls below the true tail when few errors are expected; docs/estimators/fdp_one_run.md).
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy import optimize, special, stats

from dpaudit.estimators.common.checks import check_integers
from dpaudit.estimators.fdp_one_run.families import (
    canonical_family,
    check_family_args,
    error_prob,
    error_quantile,
    gdp_aux,
    gdp_quantile,
    laplace_kink,
    laplace_quantile,
    p_min,
    sgm_kink,
)

TAILS = ("chernoff", "exact")

#: Composite Gauss-Legendre rule on the probability scale x of each Beta order statistic:
#: panels refined towards both ends (where t = BetaInv(x) has log singularities), nodes each.
PANELS = (0.0, 0.01, 0.1, 0.5, 0.9, 0.99, 0.999, 1.0)
NODES_PER_PANEL = 8
#: v is rounded down by this relative amount, which covers the measured discretization error
#: (quadrature <= 1e-5 and rank interpolation <= 1.1e-5 relative;
#: tests/estimators/test_fdp_one_run.py).
#: Smaller v means a larger, still valid p-value (our "conservative
#: discretization").
V_ROUND_DOWN = 3e-5
#: Exact tail: panels of the rule for the mean of h over [0, t] (on the relative position x/t,
#: refined towards 0, where h of the most confident guesses varies on a log scale, and towards
#: 1, where for a large parameter h rises from ~0 to 1/2 within 1e-7 of x = 1) and of the
#: rule over the probability scale of the selection threshold (refined towards both ends, for
#: small p-values). The conditional error rate is rounded down by M_ROUND_DOWN (relative),
#: which covers the measured quadrature error (<= 1e-5 relative,
#: tests/estimators/test_fdp_one_run.py):
#: a smaller rate means a larger, still valid p-value.
MEAN_PANELS = (
    (0.0, 1e-8, 1e-6, 1e-4, 1e-3, 0.01, 0.05, 0.2, 0.5, 0.8, 0.95, 0.99, 0.999)
    + tuple(1 - 10.0**-k for k in range(4, 11))
    + (1.0,)
)
THRESHOLD_PANELS = (0.0, 1e-12, 1e-9, 1e-6, 1e-4, 1e-3, 0.01, 0.1, 0.5, 0.9, 0.99, 0.999, 1.0)
M_ROUND_DOWN = 1e-4
#: Every j up to this is evaluated exactly; above it a geometric grid plus linear interpolation.
J_EXACT = 256
J_GEOMETRIC = 400


def check_counts(n: int, r: int, wrong: int | None = None) -> None:
    check_integers(n=n, r=r)
    if n < 1:
        raise ValueError(f"need n >= 1 bits, got n={n}")
    if not 1 <= r <= n:
        raise ValueError(f"need 1 <= r <= n released guesses, got r={r}, n={n}")
    if wrong is not None:
        check_integers(wrong=wrong)
        if not 0 <= wrong <= r:
            raise ValueError(f"need 0 <= wrong <= r, got wrong={wrong}, r={r}")


# --------------------------------------------------------------------------------------------
# Order-statistic error probabilities v_j (Theorem 3, Eq. 25)
# --------------------------------------------------------------------------------------------


def j_grid(r: int) -> np.ndarray:
    """Ranks j at which v_j is computed: all j <= 256, then a geometric grid up to r."""
    if r <= J_EXACT + J_GEOMETRIC:
        return np.arange(1, r + 1)
    geo = np.geomspace(J_EXACT, r, J_GEOMETRIC).round().astype(np.int64)
    return np.unique(np.concatenate([np.arange(1, J_EXACT + 1), geo, [r]]))


def quadrature_rule(panels: tuple[float, ...] = PANELS) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights of the composite Gauss-Legendre rule on [0, 1] (default: PANELS)."""
    g, gw = np.polynomial.legendre.leggauss(NODES_PER_PANEL)
    edges = np.asarray(panels)
    a, b = edges[:-1, None], edges[1:, None]
    x = (a + (b - a) * (g + 1) / 2).ravel()
    w = ((b - a) * gw / 2).ravel()
    return x, w


@lru_cache(maxsize=64)
def _beta_nodes(n: int, r: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(j grid, Beta(j, n-j+1) quantiles at the Gauss-Legendre nodes, weights).

    Independent of the family: computed once per (n, r) and reused by every parameter value.
    """
    x, w = quadrature_rule()
    js = j_grid(r)
    t = special.betaincinv(js[:, None].astype(float), (n - js + 1)[:, None].astype(float), x)
    t = np.clip(t, np.finfo(float).tiny, 1.0)
    return js, t, w


@lru_cache(maxsize=64)
def _gdp_nodes_aux(n: int, r: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return gdp_aux(_beta_nodes(n, r)[1])


def clear_caches() -> None:
    """Forget the cached Beta quantiles (for timing cold runs, or after changing the grid)."""
    _beta_nodes.cache_clear()
    _gdp_nodes_aux.cache_clear()


def _interp_ranks(js: np.ndarray, v_grid: np.ndarray, r: int) -> np.ndarray:
    if len(js) == r:
        return v_grid
    return np.interp(np.arange(1, r + 1), js, v_grid)


def v_vector(
    family: str,
    theta: float,
    n: int,
    r: int,
    delta: float | None = None,
    q: float | None = None,
) -> np.ndarray:
    """v_1 >= ... : error probabilities of the r released guesses, most confident first
    (Theorem 3, Eq. 25; v_j here is the paper's v_{n-j+1}).

    ``v_j = E[h(U_(j))]``, U_(j) ~ Beta(j, n-j+1), by Gauss-Legendre quadrature on the
    probability scale of U_(j); v_j is nondecreasing in j. ``approx_dp`` (f_{eps,delta}) is
    exact: v_j = P[Binom(n, delta) <= j-1] / (1 + e^eps) (our closed form). For Laplace
    the flat part of h (the atom |L| = mu) is integrated exactly and the rest by quadrature.
    """
    family = canonical_family(family)
    check_counts(n, r)
    check_family_args(family, delta, q)
    if theta < 0:
        raise ValueError(f"family parameter must be >= 0, got {theta}")
    if family == "approx_dp":
        p0 = float(special.expit(-theta))
        return p0 * stats.binom.cdf(np.arange(r), n, delta)
    js, t, w = _beta_nodes(int(n), int(r))
    if family == "gdp":
        v_grid = gdp_quantile(t, theta, _gdp_nodes_aux(int(n), int(r))) @ w
    elif family == "laplace":
        v_grid = _laplace_v(js, n, theta)
    elif family == "subsampled_gaussian" and theta > 0 and sgm_kink(theta, q) is not None:
        h = lambda x: error_quantile(family, theta, x, q)  # noqa: E731
        v_grid = _split_v(js, n, h, sgm_kink(theta, q), None)
    else:
        v_grid = error_quantile(family, theta, t, q) @ w
    return (1 - V_ROUND_DOWN) * _interp_ranks(js, v_grid, r)


def _split_v(js: np.ndarray, n: int, h, t_kink: float, flat_below: float | None) -> np.ndarray:
    """v_j = E[h(U_(j))] with the integral split at the quantile ``t_kink`` where h is not
    smooth; below it h is the constant ``flat_below`` if given (an atom of |L|)."""
    a, b = js.astype(float), (n - js + 1).astype(float)
    x0 = special.betainc(a, b, t_kink)
    x, w = quadrature_rule()
    out = np.zeros(len(js))
    if flat_below is not None:
        out += flat_below * x0
    else:
        low = x0 > 0
        t = special.betaincinv(a[low, None], b[low, None], x0[low, None] * x[None, :])
        out[low] += x0[low] * (h(np.clip(t, np.finfo(float).tiny, 1.0)) @ w)
    rest = x0 < 1.0
    if np.any(rest):
        xr = x0[rest, None] + (1 - x0[rest, None]) * x[None, :]
        t = special.betaincinv(a[rest, None], b[rest, None], xr)
        out[rest] += (1 - x0[rest]) * (h(t) @ w)
    return out


def _laplace_v(js: np.ndarray, n: int, mu: float) -> np.ndarray:
    """v_j for Laplace: g(mu) P[U_(j) <= t0] + the integral of h over U_(j) > t0."""
    if mu <= 0:
        return np.full(len(js), 0.5)
    h = lambda t: laplace_quantile(t, mu)  # noqa: E731
    return _split_v(js, n, h, laplace_kink(mu), float(error_prob(mu)))


# --------------------------------------------------------------------------------------------
# p-values (Proposition 1 and the exact Poisson-binomial tail)
# --------------------------------------------------------------------------------------------


def chernoff_log_p(v: np.ndarray, wrong: int) -> float:
    """log of the right-hand side of Eq. (26), minimised over lambda < 0 (Proposition 1).

    kappa(lambda) = -lambda u + sum ln(1 - v + v e^lambda) is convex (Eq. 35); its minimiser
    is the root of dkappa/dlambda = -u + sum v e^lambda / (1 - v + v e^lambda). u >= sum v
    gives p = 1 (minimum at lambda = 0); u = 0 gives the limit lambda -> -inf, prod(1 - v).
    """
    v = np.asarray(v, dtype=float)
    u = float(wrong)
    if u >= v.sum():
        return 0.0
    if u == 0:
        return float(np.sum(np.log1p(-v)))
    with np.errstate(divide="ignore"):  # v = 0 (approx_dp's certain guesses): log v = -inf
        log_v, log_1mv = np.log(v), np.log1p(-v)

    def dkappa(lam: float) -> float:
        # v e^lam / (1 - v + v e^lam) = expit(log v + lam - log(1 - v))
        return float(special.expit(log_v + lam - log_1mv).sum()) - u

    lo = -1.0
    while dkappa(lo) > 0:
        lo *= 2
    lam = optimize.brentq(dkappa, lo, 0.0, xtol=1e-14, rtol=1e-14)
    kappa = -lam * u + float(np.sum(np.logaddexp(log_1mv, log_v + lam)))
    return min(0.0, kappa)


def chernoff_signed_root(v: np.ndarray, wrong: int) -> float:
    """z = sign(sum v - u) sqrt(-2 min_lambda kappa(lambda)), lambda over the whole real line.

    For sum v > u the minimiser is negative and exp(min kappa) is the p-value of Eq. (26), so
    "p <= alpha" is exactly "z >= sqrt(-2 ln alpha)". Unlike the p-value, which is flat (= 1)
    once sum v <= u, z is smooth and nearly linear in the family parameter: it is what the
    parameter search solves (used only to locate the root; rejection is checked on p)."""
    v = np.asarray(v, dtype=float)
    u = float(wrong)
    total = float(v.sum())
    if u == total:
        return 0.0
    with np.errstate(divide="ignore"):
        log_v, log_1mv = np.log(v), np.log1p(-v)
    if u == 0:
        kappa = float(np.sum(log_1mv))
    elif u == len(v):
        kappa = float(np.sum(log_v))
    else:

        def dkappa(lam: float) -> float:
            return float(special.expit(log_v + lam - log_1mv).sum()) - u

        if total > u:
            lo, hi = -1.0, 0.0
            while dkappa(lo) > 0:
                lo *= 2
        else:
            lo, hi = 0.0, 1.0
            while dkappa(hi) < 0:
                hi *= 2
        lam = optimize.brentq(dkappa, lo, hi, xtol=1e-12, rtol=1e-12)
        kappa = -lam * u + float(np.sum(np.logaddexp(log_1mv, log_v + lam)))
    kappa = min(0.0, kappa)
    return math.copysign(math.sqrt(-2 * kappa), total - u)


def poisson_binomial_log_cdf(v: np.ndarray, wrong: int) -> float:
    """log P[sum_k V_k <= u] for independent V_k ~ Bernoulli(v_k): the lower tail of the
    right-hand side of Eq. (24) taken literally. Recursion over k, truncated to the u + 1
    states that matter; clipped to <= 0.

    Not a valid p-value, and no tail option uses it: the released errors are dependent
    through the shared order statistics, and this law is narrower than the true one (at
    r = n it is a Poisson binomial with mean n p_min, against the true Binomial(n, p_min)),
    so it rejects true nulls too often. Kept as the anti-conservative reference of the tests;
    the exact tail is :func:`exact_log_cdf`."""
    v = np.asarray(v, dtype=float)
    u = int(wrong)
    if u >= len(v):
        return 0.0
    pmf = np.zeros(u + 1)
    pmf[0] = 1.0
    for vk in v:
        nxt = pmf * (1 - vk)
        nxt[1:] += pmf[:-1] * vk
        pmf = nxt
    total = float(pmf.sum())
    return min(0.0, math.log(total)) if total > 0 else -math.inf


def _mean_h(h, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(1 / (b - a)) * integral of h over [a, b], elementwise, by the MEAN_PANELS rule."""
    y, w = quadrature_rule(MEAN_PANELS)
    x = a[:, None] + (b - a)[:, None] * y[None, :]
    return h(np.clip(x, np.finfo(float).tiny, 1.0)) @ w


def threshold_error_rate(
    family: str, theta: float, t: np.ndarray, delta: float | None = None, q: float | None = None
) -> np.ndarray:
    """m(t) = (1/t) * integral_0^t h(x) dx: the error probability of each released guess given
    that the selection threshold (the (r+1)-th most confident channel) sits at quantile t.

    h is the error quantile of :func:`error_quantile` (nondecreasing, j = 1 most confident);
    given the threshold, the quantiles of the r released channels are i.i.d. Uniform(0, t).
    Closed form for ``approx_dp`` (h = 1[x > delta] / (1 + e^eps)); the kink of the Laplace
    atom and of the subsampled Gaussian's lower branch is integrated on its own panel.
    """
    family = canonical_family(family)
    t = np.asarray(t, dtype=float)
    if family == "approx_dp":
        return float(special.expit(-theta)) * np.maximum(0.0, t - delta) / t
    if theta <= 0:
        return np.full_like(t, 0.5)

    def h(x: np.ndarray) -> np.ndarray:
        return error_quantile(family, theta, x, q)

    kink, flat = None, None
    if family == "laplace":
        kink, flat = laplace_kink(theta), float(error_prob(theta))
    elif family == "subsampled_gaussian":
        kink = sgm_kink(theta, 1.0 if q is None else q)
    if kink is None:
        return _mean_h(h, np.zeros_like(t), t)
    out = np.full_like(t, np.nan)
    below = t <= kink
    if flat is not None:
        out[below] = flat
        low = flat
    else:
        if np.any(below):
            out[below] = _mean_h(h, np.zeros(int(below.sum())), t[below])
        low = float(_mean_h(h, np.zeros(1), np.array([kink]))[0])
    if not np.all(below):
        ta = t[~below]
        out[~below] = (kink * low + (ta - kink) * _mean_h(h, np.full_like(ta, kink), ta)) / ta
    return out


@lru_cache(maxsize=64)
def _threshold_nodes(n: int, r: int) -> tuple[np.ndarray, np.ndarray]:
    """Quantiles t of the selection threshold U_(r+1) ~ Beta(r+1, n-r) at the nodes of the
    THRESHOLD_PANELS rule on its probability scale, and the weights."""
    x, w = quadrature_rule(THRESHOLD_PANELS)
    t = special.betaincinv(float(r + 1), float(n - r), x)
    return np.clip(t, np.finfo(float).tiny, 1.0), w


def exact_log_cdf(
    family: str,
    theta: float,
    n: int,
    r: int,
    wrong: int,
    delta: float | None = None,
    q: float | None = None,
) -> float:
    """log P[at most ``wrong`` of the r released guesses are wrong] in the dominating audit of
    Theorem 1 (n independent f_theta channels, MAP decoder, top r by |L|): the exact
    right-hand side of Eq. (19), not the independent-Bernoulli model of Eq. (24).

    With channel quantiles U_1..U_n i.i.d. Uniform(0, 1) (j = 1 most confident, ties broken
    as Eq. 20) and errors E_i | U_i ~ Bernoulli(h(U_i)) independent, condition on the
    selection threshold T = U_(r+1) ~ Beta(r+1, n-r): the r released U_i are i.i.d.
    Uniform(0, T), so the wrong count is Binomial(r, m(T)) (:func:`threshold_error_rate`) and
    P[W <= u] = E_T[BinomCDF(u; r, m(T))]. With r = n there is no threshold: W ~ Binomial(n,
    p_min) exactly (Eq. 14). Gauss-Legendre quadrature over T in log space, m rounded down
    by M_ROUND_DOWN (conservative); the result is clipped to <= 0.
    """
    family = canonical_family(family)
    check_counts(n, r, wrong)
    check_family_args(family, delta, q)
    if wrong >= r:
        return 0.0
    if r == n:
        m, w = np.array([p_min(family, theta, delta, q)]), np.ones(1)
    else:
        t, w = _threshold_nodes(int(n), int(r))
        m = (1 - M_ROUND_DOWN) * threshold_error_rate(family, theta, t, delta, q)
    log_cdf = stats.binom.logcdf(int(wrong), int(r), np.clip(m, 0.0, 1.0))
    return min(0.0, float(special.logsumexp(log_cdf, b=w)))


def p_value(
    n: int,
    r: int,
    wrong: int,
    family: str,
    theta: float,
    delta: float | None = None,
    q: float | None = None,
    tail: str = "chernoff",
    log: bool = False,
) -> float:
    """The p-value (its natural log if ``log``) of the null "the mechanism is f_theta-DP" given
    ``wrong`` of ``r`` guesses wrong.

    ``tail="exact"``: :func:`exact_log_cdf`. ``tail="chernoff"``: Proposition 1 (Eq. 26), but
    never below the exact tail: Eq. (26) bounds the tail of independent Bernoulli(v_k), which
    is narrower than the true law, and with few expected errors it falls below the true tail
    (at r = n, u = 0 it is prod(1 - v_k) < (1 - p_min)^n), so the printed p-value alone would
    reject a true null too often there (docs/estimators/fdp_one_run.md, finding 2).
    """
    check_counts(n, r, wrong)
    check_tail(tail)
    log_p = exact_log_cdf(family, theta, n, r, wrong, delta, q)
    if tail != "exact":
        log_p = max(log_p, chernoff_log_p(v_vector(family, theta, n, r, delta=delta, q=q), wrong))
    return log_p if log else math.exp(log_p)


def check_tail(tail: str) -> None:
    if tail not in TAILS:
        raise ValueError(f"unknown tail {tail!r}; allowed: {', '.join(TAILS)}")
