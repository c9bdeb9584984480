"""Tight privacy audit in one run (Xiang, Wang, Xiao, Tian, Wang, 2025), as printed.

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
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol

import numpy as np
from scipy import optimize, special, stats

from dpaudit.accounting.gaussian import epsilon_of_profile, gdp_delta
from dpaudit.estimators.ties import Cut

#: The null families, and the name of each one's parameter (larger = less private).
FAMILIES: dict[str, str] = {
    "gdp": "mu",
    "laplace": "mu",
    "approx_dp": "epsilon",
    "subsampled_gaussian": "mu",
}
TAILS = ("chernoff", "exact")

#: Composite Gauss-Legendre rule on the probability scale x of each Beta order statistic:
#: panels refined towards both ends (where t = BetaInv(x) has log singularities), nodes each.
PANELS = (0.0, 0.01, 0.1, 0.5, 0.9, 0.99, 0.999, 1.0)
NODES_PER_PANEL = 8
#: v is rounded down by this relative amount, which covers the measured discretization error
#: (quadrature <= 1e-5 and rank interpolation <= 1.1e-5 relative; tests/test_fdp_one_run.py).
#: Smaller v means a larger, still valid p-value (our "conservative
#: discretization").
V_ROUND_DOWN = 3e-5
#: Exact tail: panels of the rule for the mean of h over [0, t] (on the relative position x/t,
#: refined towards 0, where h of the most confident guesses varies on a log scale, and towards
#: 1, where for a large parameter h rises from ~0 to 1/2 within 1e-7 of x = 1) and of the
#: rule over the probability scale of the selection threshold (refined towards both ends, for
#: small p-values). The conditional error rate is rounded down by M_ROUND_DOWN (relative),
#: which covers the measured quadrature error (<= 1e-5 relative, tests/test_fdp_one_run.py):
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
#: Absolute tolerance of the score in the inversion of its survival function.
NEWTON_TOL = 1e-11
#: Largest family parameter the search will consider (mu, or epsilon for approx_dp).
PARAM_MAX = 200.0
#: Absolute tolerance of the parameter search.
PARAM_TOL = 1e-7
#: Bound on the normal score the exact-tail search solves (p between about e^-1250 and 1).
Z_CLIP = 50.0
#: Relative tolerance of Algorithm 2's root find in epsilon.
ALGORITHM2_RTOL = 1e-12


def canonical_family(family: str) -> str:
    """``approx-dp`` and ``approx_dp`` are the same family; unknown names raise."""
    name = str(family).strip().lower().replace("-", "_")
    if name not in FAMILIES:
        raise ValueError(
            f"unknown null family {family!r}; allowed: {', '.join(FAMILIES)} "
            "(approx-dp is accepted for approx_dp)"
        )
    return name


def _check(n: int, r: int, wrong: int | None = None) -> None:
    for name, val in (("n", n), ("r", r)):
        if not isinstance(val, int | np.integer):
            raise TypeError(f"{name} must be an integer, got {val!r}")
    if n < 1:
        raise ValueError(f"need n >= 1 bits, got n={n}")
    if not 1 <= r <= n:
        raise ValueError(f"need 1 <= r <= n released guesses, got r={r}, n={n}")
    if wrong is not None:
        if not isinstance(wrong, int | np.integer):
            raise TypeError(f"wrong must be an integer, got {wrong!r}")
        if not 0 <= wrong <= r:
            raise ValueError(f"need 0 <= wrong <= r, got wrong={wrong}, r={r}")


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")


def _check_family_args(family: str, delta: float | None, q: float | None) -> None:
    if family == "approx_dp":
        if delta is None or not 0.0 <= delta < 1.0:
            raise ValueError(f"family approx_dp needs delta in [0, 1), got {delta}")
    if family == "subsampled_gaussian":
        if q is None or not 0.0 < q <= 1.0:
            raise ValueError(f"family subsampled_gaussian needs q in (0, 1], got {q}")


def error_prob(score: np.ndarray) -> np.ndarray:
    """g(s) = 1 / (1 + e^s): the MAP decoder's error given |privacy loss| = s (Eq. 16)."""
    return special.expit(-np.asarray(score, dtype=float))


# --------------------------------------------------------------------------------------------
# Law of the score |L| under the mixture (P + Q) / 2, per family (Eq. 25; closed forms ours).
# --------------------------------------------------------------------------------------------


def _safe_newton(
    fun, log_t: np.ndarray, lo: np.ndarray, hi: np.ndarray, start: np.ndarray | None = None
) -> np.ndarray:
    """Solve fun(s) = log_t for a decreasing ``fun`` on brackets [lo, hi] (vectorised).

    ``fun`` returns (value, derivative). Newton steps that leave the bracket are replaced by
    bisection; the bracket is kept, so the iteration cannot diverge.
    """
    s = 0.5 * (lo + hi) if start is None else start
    for _ in range(100):
        f, df = fun(s)
        f = f - log_t
        lo = np.where(f > 0, s, lo)
        hi = np.where(f > 0, hi, s)
        with np.errstate(divide="ignore", invalid="ignore"):
            step = np.where(df < 0, f / df, 0.0)
        new = s - step
        bad = ~((new >= lo) & (new <= hi)) | ~np.isfinite(new) | ((step == 0) & (f != 0))
        new = np.where(bad, 0.5 * (lo + hi), new)
        done = np.max(np.abs(new - s)) <= NEWTON_TOL
        s = new
        if done:
            break
    return s


_INV_SQRT_2PI = 1.0 / math.sqrt(2 * math.pi)


def _gdp_log_survival(w: np.ndarray, mu: float) -> tuple[np.ndarray, np.ndarray]:
    """log P[W >= w] and its derivative, W = |N(mu/2, 1)| (score |L| = mu W).

    Linear scale (ndtr is accurate in the far tail) with a log-scale fallback where the
    survival underflows."""
    a, b = w - mu / 2, w + mu / 2
    surv = special.ndtr(-a) + special.ndtr(-b)
    dens = (np.exp(-0.5 * a * a) + np.exp(-0.5 * b * b)) * _INV_SQRT_2PI
    tiny = surv < 1e-290
    if np.any(tiny):
        at, bt = a[tiny], b[tiny]
        log_s = np.logaddexp(special.log_ndtr(-at), special.log_ndtr(-bt))
        log_d = np.logaddexp(-0.5 * at * at, -0.5 * bt * bt) + math.log(_INV_SQRT_2PI)
        out_log = np.log(np.where(tiny, 1.0, surv))
        out_log[tiny] = log_s
        ratio = np.where(tiny, 0.0, dens / np.where(tiny, 1.0, surv))
        ratio[tiny] = np.exp(log_d - log_s)
        return out_log, -ratio
    return np.log(surv), -dens / surv


def _gdp_quantile(
    t: np.ndarray, mu: float, aux: tuple[np.ndarray, ...] | None = None
) -> np.ndarray:
    """h(t) for mu-GDP: the base pair N(0,1) vs N(mu,1) (Def. 5); closed-form survival.

    ``aux`` = (log t, ndtri(t), ndtri(min(t/2, 1/2))), which do not depend on mu."""
    if mu <= 0:
        return np.full_like(t, 0.5)
    log_t, nd_t, nd_t2 = aux if aux is not None else _gdp_aux(t)
    # P[W >= w] lies between Phibar(w - mu/2) and 2 Phibar(w - mu/2): a bracket for w(t).
    lo = np.maximum(0.0, mu / 2 - nd_t)
    hi = np.maximum(lo + 1e-12, mu / 2 - nd_t2)
    w = _safe_newton(lambda x: _gdp_log_survival(x, mu), log_t, lo, hi, start=lo)
    return error_prob(mu * w)


def _gdp_aux(t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return np.log(t), special.ndtri(t), special.ndtri(np.minimum(t / 2, 0.5))


def _laplace_quantile(t: np.ndarray, mu: float) -> np.ndarray:
    """h(t) for Lap(0,1) vs Lap(mu,1) (Lemma 1). |L| = mu with mixture probability
    t0 = (1 + e^-mu)/2, else P[|L| >= s] = 1 - e^{-mu/2} sinh(s/2) ... inverted in closed
    form: s(t) = 2 asinh((1 - t) e^{mu/2})."""
    if mu <= 0:
        return np.full_like(t, 0.5)
    t0 = 0.5 * (1 + math.exp(-mu))
    s = np.where(t <= t0, mu, 2 * np.arcsinh((1 - t) * math.exp(mu / 2)))
    return error_prob(np.minimum(s, mu))


def laplace_kink(mu: float) -> float:
    """The quantile at which the Laplace h(t) leaves its flat part (the atom |L| = mu)."""
    return 0.5 * (1 + math.exp(-mu))


def _sgm_log_tail(a: np.ndarray, mu: float, q: float, upper: bool) -> np.ndarray:
    """log of the mixture (1 - q/2) N(0,1) + (q/2) N(mu,1) mass above (or below) a."""
    sign = -1.0 if upper else 1.0
    lw0, lw1 = math.log1p(-q / 2), math.log(q / 2)
    return np.logaddexp(lw0 + special.log_ndtr(sign * a), lw1 + special.log_ndtr(sign * (a - mu)))


def _sgm_log_dens(a: np.ndarray, mu: float, q: float) -> np.ndarray:
    c = -0.5 * math.log(2 * math.pi)
    return np.logaddexp(math.log1p(-q / 2) - 0.5 * a * a, math.log(q / 2) - 0.5 * (a - mu) ** 2) + c


def _sgm_log_survival(s: np.ndarray, mu: float, q: float) -> tuple[np.ndarray, np.ndarray]:
    """log P[|L| >= s] and derivative for P = N(0,1), Q = (1-q) N(0,1) + q N(mu,1) (Eq. 29).

    L(z) = -log(1 - q + q e^{mu z - mu^2/2}) is decreasing in z: L >= s iff z <= z1(s) (only
    for s < -log(1-q)) and L <= -s iff z >= z2(s).
    """
    s = np.asarray(s, dtype=float)
    # upper branch, z2(s) = mu/2 + log((e^s - 1 + q)/q)/mu
    log_num2 = s + np.log1p((q - 1) * np.exp(-s))
    z2 = mu / 2 + (log_num2 - math.log(q)) / mu
    dz2 = np.exp(s - log_num2) / mu
    log_up = _sgm_log_tail(z2, mu, q, upper=True)
    d_up = -np.exp(_sgm_log_dens(z2, mu, q)) * dz2
    # lower branch (L >= s), for every s when q = 1: log(e^-s - 1 + q) = -s + log(1 - c),
    # c = (1 - q) e^s < 1, stable for large s
    s_star = -math.log1p(-q) if q < 1 else math.inf
    ok = s < s_star
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        log1mc = np.where(ok, np.log1p(-(1 - q) * np.exp(np.where(ok, s, 0.0))), 0.0)
        z1 = np.where(ok, mu / 2 + (-s + log1mc - math.log(q)) / mu, -np.inf)
        dz1 = np.where(ok, -np.exp(-log1mc) / mu, 0.0)
        log_low = np.where(ok, _sgm_log_tail(z1, mu, q, upper=False), -np.inf)
        d_low = np.where(ok, np.exp(_sgm_log_dens(z1, mu, q)) * dz1, 0.0)
    log_s = np.logaddexp(log_up, log_low)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return log_s, (d_up + d_low) / np.exp(log_s)


def _sgm_quantile(t: np.ndarray, mu: float, q: float) -> np.ndarray:
    """h(t) for the subsampled Gaussian pair "mu-GDP, q" of Eq. (29)."""
    if mu <= 0:
        return np.full_like(t, 0.5)
    if t.size == 0:  # no nodes below the kink (every Beta quantile mass above it)
        return np.empty_like(t)
    # Bracket from a table of the survival function on an s-grid.
    log_t = np.log(t)
    s_max = 1.0
    while _sgm_log_survival(np.array([s_max]), mu, q)[0][0] > np.min(log_t):
        s_max *= 2
    grid = np.linspace(0.0, s_max, 513)
    table = _sgm_log_survival(grid, mu, q)[0]
    table[0] = 0.0
    idx = np.clip(np.searchsorted(-table, -log_t), 1, len(grid) - 1)
    s = _safe_newton(lambda x: _sgm_log_survival(x, mu, q), log_t, grid[idx - 1], grid[idx])
    return error_prob(s)


def error_quantile(family: str, theta: float, t: np.ndarray, q: float | None = None) -> np.ndarray:
    """h(t): the t-quantile of the error probability g(|L|) under (P + Q)/2 (Eq. 25).

    Not defined here for ``approx_dp``, whose v_j have a closed form (:func:`v_vector`).
    """
    family = canonical_family(family)
    t = np.asarray(t, dtype=float)
    if family == "gdp":
        return _gdp_quantile(t, theta)
    if family == "laplace":
        return _laplace_quantile(t, theta)
    if family == "subsampled_gaussian":
        return _sgm_quantile(t, theta, 1.0 if q is None else q)
    raise ValueError("approx_dp has a closed-form v; use v_vector")


def p_min(family: str, theta: float, delta: float | None = None, q: float | None = None) -> float:
    """Minimum bit-error probability (alpha_opt + f(alpha_opt))/2 of Lemma 2, Eq. (14),
    = (1 - TV(P, Q))/2. With r = n, sum_j v_j = n p_min (our check of Eq. 25)."""
    family = canonical_family(family)
    if family == "gdp":
        return float(special.ndtr(-theta / 2))
    if family == "laplace":
        return 0.5 * math.exp(-theta / 2)
    if family == "approx_dp":
        return (1 - delta) * float(special.expit(-theta))
    tv = q * (2 * special.ndtr(theta / 2) - 1)
    return float(0.5 * (1 - tv))


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
    return _gdp_aux(_beta_nodes(n, r)[1])


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
    _check(n, r)
    _check_family_args(family, delta, q)
    if theta < 0:
        raise ValueError(f"family parameter must be >= 0, got {theta}")
    if family == "approx_dp":
        p0 = float(special.expit(-theta))
        return p0 * stats.binom.cdf(np.arange(r), n, delta)
    js, t, w = _beta_nodes(int(n), int(r))
    if family == "gdp":
        v_grid = _gdp_quantile(t, theta, _gdp_nodes_aux(int(n), int(r))) @ w
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
    h = lambda t: _laplace_quantile(t, mu)  # noqa: E731
    return _split_v(js, n, h, laplace_kink(mu), float(error_prob(mu)))


def sgm_kink(mu: float, q: float) -> float | None:
    """Quantile where the lower branch of the subsampled-Gaussian |L| (L > 0, bounded by
    -log(1-q)) starts: h is smooth but numerically kinked there. None for q = 1."""
    if q >= 1:
        return None
    s_star = -math.log1p(-q)
    return float(np.exp(_sgm_log_survival(np.array([s_star * (1 - 1e-12)]), mu, q)[0][0]))


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
    _check(n, r, wrong)
    _check_family_args(family, delta, q)
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
    _check(n, r, wrong)
    _check_tail(tail)
    log_p = exact_log_cdf(family, theta, n, r, wrong, delta, q)
    if tail != "exact":
        log_p = max(log_p, chernoff_log_p(v_vector(family, theta, n, r, delta=delta, q=q), wrong))
    return log_p if log else math.exp(log_p)


def _check_tail(tail: str) -> None:
    if tail not in TAILS:
        raise ValueError(f"unknown tail {tail!r}; allowed: {', '.join(TAILS)}")


# --------------------------------------------------------------------------------------------
# Algorithm 2: f-DP to (epsilon, delta)
# --------------------------------------------------------------------------------------------


def sgm_delta(epsilon: float, mu: float, q: float) -> float:
    """delta(eps) of the pair P = N(0,1), Q = (1-q)N(0,1) + qN(mu,1): the larger of the two
    hockey-stick divergences, each in closed form."""
    if mu <= 0:
        return 0.0
    e = math.exp(epsilon)
    # Q over P: region L <= -eps, i.e. z >= z2
    z2 = mu / 2 + math.log((e - 1 + q) / q) / mu
    d_qp = (1 - q) * special.ndtr(-z2) + q * special.ndtr(mu - z2) - e * special.ndtr(-z2)
    d_pq = 0.0
    if math.exp(-epsilon) - 1 + q > 0:  # P over Q: region L >= eps, i.e. z <= z1
        z1 = mu / 2 + math.log((math.exp(-epsilon) - 1 + q) / q) / mu
        d_pq = special.ndtr(z1) - e * ((1 - q) * special.ndtr(z1) + q * special.ndtr(z1 - mu))
    return float(max(d_qp, d_pq, 0.0))


def to_epsilon(family: str, theta: float, delta: float, q: float | None = None) -> float:
    """Algorithm 2: the (epsilon, delta) implied by f_theta at this delta (inf if delta is
    below 1 - f(0)); max(0, .)."""
    family = canonical_family(family)
    if not 0.0 <= delta <= 1.0:
        raise ValueError(f"delta must lie in [0, 1], got {delta}")
    if family == "approx_dp":
        return max(0.0, float(theta))
    if family == "laplace":
        if delta >= 1:
            return 0.0
        return max(0.0, theta + 2 * math.log1p(-delta))
    if delta <= 0:
        return math.inf if theta > 0 else 0.0
    if theta <= 0:  # identical distributions
        return 0.0
    if family == "gdp":
        return epsilon_of_profile(lambda e: gdp_delta(e, theta), delta, rtol=ALGORITHM2_RTOL)
    return epsilon_of_profile(lambda e: sgm_delta(e, theta, q), delta, rtol=ALGORITHM2_RTOL)


def from_epsilon(family: str, epsilon: float, delta: float, q: float | None = None) -> float:
    """The family parameter whose Algorithm-2 conversion at ``delta`` equals ``epsilon``."""
    family = canonical_family(family)
    if family == "approx_dp":
        return float(epsilon)
    if family == "laplace":
        return float(epsilon - 2 * math.log1p(-delta))
    if not math.isfinite(epsilon):
        return math.inf
    hi = 1.0
    while to_epsilon(family, hi, delta, q) < epsilon:
        hi *= 2
        if hi > 1e4:
            return math.inf
    return float(
        optimize.brentq(lambda m: to_epsilon(family, m, delta, q) - epsilon, 0.0, hi, xtol=1e-10)
    )


# --------------------------------------------------------------------------------------------
# The lower bound (Section 5.4)
# --------------------------------------------------------------------------------------------


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


def no_guess_bound(
    n: int, family: str, delta: float, confidence: float, tail: str = "chernoff"
) -> FdpBound:
    """The result of a guess count r at which every guess was abstained on (a tie straddling
    the cut, :mod:`.ties`): no guess released, nothing rejected, epsilon 0 (p-value 1).
    :func:`epsilon_lower_bound` itself needs r >= 1."""
    return FdpBound(
        family=family,
        param_name=FAMILIES[family],
        param=0.0,
        epsilon=0.0,
        p_value=1.0,
        n=int(n),
        r=0,
        wrong=0,
        delta=float(delta),
        confidence=float(confidence),
        tail=tail,
    )


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
    _check(n, r, wrong)
    _check_confidence(confidence)
    _check_family_args(family, delta, q)
    _check_tail(tail)
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
    lo, hi = 0.0, 1.0
    while rejected(hi):
        lo, hi = hi, 2 * hi
        if hi > PARAM_MAX:
            raise ValueError(
                f"every {family} parameter up to {PARAM_MAX} is rejected (n={n}, r={r}, "
                f"wrong={wrong}); the null family cannot describe these guesses"
            )
    if f(lo) > 0 and f(hi) < 0:
        theta = optimize.brentq(f, lo, hi, xtol=PARAM_TOL, rtol=1e-12)
    else:  # z saturated at an end: plain bisection on the rejection itself
        a, b = lo, hi
        while b - a > PARAM_TOL:
            mid = 0.5 * (a + b)
            a, b = (mid, b) if rejected(mid) else (a, mid)
        theta = a
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
    return FdpBound(
        family=family,
        param_name=FAMILIES[family],
        param=theta,
        epsilon=to_epsilon(family, theta, delta, q),
        p_value=p,
        n=int(n),
        r=int(r),
        wrong=int(wrong),
        delta=float(delta),
        confidence=float(confidence),
        tail=tail,
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
            _check(n, r)
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
            _check(n, r)
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
