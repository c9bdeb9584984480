"""The tight one-run audit as the paper writes it, by plain numerics: the fast code's reference.

Xiang, Wang, Xiao, Tian, Wang 2025, "Tight Privacy Audit in One Run", arXiv:2509.08704. Each
function is one formula of the paper, evaluated by a fine fixed quadrature rule, a bounded
minimisation or a bisection: slow, but with no caching, rank interpolation, rounding or root
finding on a transformed statistic. The fast code (:mod:`.tails`,
:mod:`.bound`) is tested against it (tests/estimators/test_fdp_one_run.py): its
v_j are at most
these and within 5e-5 (relative), its tail is at least this one (a larger p-value) and close, and
its bound is at most :func:`param_lower_bound`'s (to its bisection tolerance) and within 2e-4.

* Theorem 3, Eq. (25): v_j = E[h(U_(j))], U_(j) ~ Beta(j, n - j + 1), with h the error quantile
  of :mod:`.families` (:func:`v_vector`).
* Eq. (19), the exact tail of the dominating audit: P[W <= u] = E_T[BinomCDF(u; r, m(T))],
  T = U_(r+1) ~ Beta(r + 1, n - r), m(t) the mean of h over [0, t] (:func:`exact_log_cdf`).
* Proposition 1, Eq. (26): min over lambda < 0 of exp(-lambda u + sum_k ln(1 - v_k + v_k
  e^lambda)) (:func:`chernoff_log_p`).
* Section 5.4: the largest family parameter whose null is rejected at level 1 - confidence
  (:func:`param_lower_bound`).

The f_{eps,delta} family (``approx_dp``) has a step for h, h(x) = 1[x > delta] / (1 + e^eps),
whose integrals are written exactly; the quadrature covers the smooth families ``gdp`` and
``subsampled_gaussian`` (Laplace's h is flat up to a kink and is left to the fast code's tests).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize, special, stats

from dpaudit.estimators.common.search import bisect_rejected, bracket
from dpaudit.estimators.fdp_one_run.families import canonical_family, error_quantile, p_min

#: Families whose h this module integrates by quadrature, and the one it integrates exactly.
SMOOTH_FAMILIES = ("gdp", "subsampled_gaussian")


def fine_rule(panels: int = 80, nodes: int = 20) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights of a composite Gauss-Legendre rule on [0, 1]: ``panels`` panels whose
    edges are log-spaced from 1e-12 towards both ends, ``nodes`` nodes each."""
    e = np.r_[0.0, np.logspace(-12, -0.31, panels // 2)]
    edges = np.unique(np.r_[e, 1 - e[::-1]])
    g, gw = np.polynomial.legendre.leggauss(nodes)
    a, b = edges[:-1, None], edges[1:, None]
    return (a + (b - a) * (g + 1) / 2).ravel(), ((b - a) * gw / 2).ravel()


def _h(family: str, theta: float, q: float | None):
    if family not in SMOOTH_FAMILIES:
        raise ValueError(f"the quadrature covers {SMOOTH_FAMILIES} and approx_dp, not {family}")
    return lambda x: error_quantile(family, theta, np.clip(x, np.finfo(float).tiny, 1.0), q)


def v_vector(
    family: str,
    theta: float,
    n: int,
    js: np.ndarray,
    delta: float | None = None,
    q: float | None = None,
) -> np.ndarray:
    """Eq. (25): v_j = E[h(U_(j))] at the ranks ``js`` (1 = most confident), U_(j) ~
    Beta(j, n - j + 1), integrated on the probability scale of U_(j). For ``approx_dp``,
    v_j = P[U_(j) > delta] / (1 + e^eps)."""
    family = canonical_family(family)
    js = np.asarray(js, dtype=float)
    if family == "approx_dp":
        return special.expit(-theta) * special.betaincc(js, n - js + 1, delta)
    x, w = fine_rule()
    t = special.betaincinv(js[:, None], (n - js + 1)[:, None], x[None, :])
    return _h(family, theta, q)(t) @ w


def chernoff_log_p(v: np.ndarray, wrong: int) -> float:
    """Proposition 1, Eq. (26): log of min over lambda < 0 of exp(-lambda u + sum_k
    ln(1 - v_k + v_k e^lambda)), by bounded scalar minimisation over [-60, 0] (the u = 0
    minimum, at lambda -> -inf, is then reached to within e^-60 per term)."""
    v = np.asarray(v, dtype=float)

    def kappa(lam: float) -> float:
        return -lam * wrong + float(np.sum(np.log1p(v * math.expm1(lam))))

    res = optimize.minimize_scalar(
        kappa, bounds=(-60.0, 0.0), method="bounded", options={"xatol": 1e-12}
    )
    return min(0.0, float(res.fun))


def exact_log_cdf(
    family: str,
    theta: float,
    n: int,
    r: int,
    wrong: int,
    delta: float | None = None,
    q: float | None = None,
) -> float:
    """Eq. (19): log P[W <= wrong] = log E_T[BinomCDF(wrong; r, m(T))], T ~ Beta(r + 1, n - r)
    (on its probability scale), m(t) = (1/t) * integral_0^t h; with r = n, W ~ Binomial(n,
    p_min) (Lemma 2, Eq. 14). For ``approx_dp``, m(t) = max(0, t - delta) / t / (1 + e^eps)."""
    family = canonical_family(family)
    if r == n:
        return float(stats.binom.logcdf(wrong, n, p_min(family, theta, delta, q)))
    y, wy = fine_rule(40, 10)
    t = special.betaincinv(float(r + 1), float(n - r), y)
    if family == "approx_dp":
        m = special.expit(-theta) * np.maximum(0.0, t - delta) / t
    else:
        x, wx = fine_rule(40, 10)
        m = _h(family, theta, q)(t[:, None] * x[None, :]) @ wx
    return min(0.0, math.log(float(np.sum(wy * stats.binom.cdf(wrong, r, m)))))


def p_value(
    n: int,
    r: int,
    wrong: int,
    family: str,
    theta: float,
    delta: float | None = None,
    q: float | None = None,
    tail: str = "chernoff",
) -> float:
    """log of the p-value of the null f_theta: the exact tail, or (``chernoff``) the larger of
    it and Eq. (26)."""
    log_p = exact_log_cdf(family, theta, n, r, wrong, delta, q)
    if tail == "chernoff":
        v = v_vector(family, theta, n, np.arange(1, r + 1), delta, q)
        log_p = max(log_p, chernoff_log_p(v, wrong))
    return log_p


def param_lower_bound(
    n: int,
    r: int,
    wrong: int,
    family: str,
    confidence: float = 0.95,
    delta: float | None = None,
    q: float | None = None,
    tail: str = "chernoff",
    tol: float = 1e-6,
) -> float:
    """Section 5.4: the largest family parameter theta whose null is rejected (p-value at most
    1 - confidence), 0 if none is, by doubling and bisection on the rejection itself (the
    families are nested, so the rejected parameters form an interval from 0)."""
    log_alpha = math.log1p(-confidence)

    def rejected(theta: float) -> bool:
        return p_value(n, r, wrong, family, theta, delta, q, tail) <= log_alpha

    if not rejected(0.0):
        return 0.0
    lo, hi = bracket(rejected)
    return bisect_rejected(rejected, lo, hi, tol)
