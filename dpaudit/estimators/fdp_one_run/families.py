"""The null families of the tight one-run audit: the law of the error probability, Algorithm 2.

Xiang, Wang, Xiao, Tian, Wang 2025, "Tight Privacy Audit in One Run", arXiv:2509.08704. The
null hypothesis is "the mechanism is f-DP" for f in a one-parameter family: mu-GDP (Def. 5),
Laplace (Lemma 1), f_{eps,delta} and the subsampled Gaussian (Eq. 29). For each, this module
gives what :mod:`.tails` integrates: h, the quantile function of the MAP decoder's
error probability g(|L|) = 1 / (1 + e^{|L|}) (Eq. 16) under the mixture (P + Q)/2 (the
integrand of Eq. 25; the closed forms of the survival functions are ours), the minimum bit-error
probability p_min of Lemma 2 (Eq. 14), and Algorithm 2's conversion of f_theta-DP to
(epsilon, delta) (Section 5.4).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize, special

from dpaudit.accounting.gaussian import epsilon_of_profile, gdp_delta

#: The null families, and the name of each one's parameter (larger = less private).
FAMILIES: dict[str, str] = {
    "gdp": "mu",
    "laplace": "mu",
    "approx_dp": "epsilon",
    "subsampled_gaussian": "mu",
}
#: Absolute tolerance of the score in the inversion of its survival function.
NEWTON_TOL = 1e-11
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


def check_family_args(family: str, delta: float | None, q: float | None) -> None:
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


def gdp_quantile(t: np.ndarray, mu: float, aux: tuple[np.ndarray, ...] | None = None) -> np.ndarray:
    """h(t) for mu-GDP: the base pair N(0,1) vs N(mu,1) (Def. 5); closed-form survival.

    ``aux`` = (log t, ndtri(t), ndtri(min(t/2, 1/2))), which do not depend on mu."""
    if mu <= 0:
        return np.full_like(t, 0.5)
    log_t, nd_t, nd_t2 = aux if aux is not None else gdp_aux(t)
    # P[W >= w] lies between Phibar(w - mu/2) and 2 Phibar(w - mu/2): a bracket for w(t).
    lo = np.maximum(0.0, mu / 2 - nd_t)
    hi = np.maximum(lo + 1e-12, mu / 2 - nd_t2)
    w = _safe_newton(lambda x: _gdp_log_survival(x, mu), log_t, lo, hi, start=lo)
    return error_prob(mu * w)


def gdp_aux(t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return np.log(t), special.ndtri(t), special.ndtri(np.minimum(t / 2, 0.5))


def laplace_quantile(t: np.ndarray, mu: float) -> np.ndarray:
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
        return gdp_quantile(t, theta)
    if family == "laplace":
        return laplace_quantile(t, theta)
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


def sgm_kink(mu: float, q: float) -> float | None:
    """Quantile where the lower branch of the subsampled-Gaussian |L| (L > 0, bounded by
    -log(1-q)) starts: h is smooth but numerically kinked there. None for q = 1."""
    if q >= 1:
        return None
    s_star = -math.log1p(-q)
    return float(np.exp(_sgm_log_survival(np.array([s_star * (1 - 1e-12)]), mu, q)[0][0]))


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
