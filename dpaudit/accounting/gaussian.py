"""The privacy curve of mu-GDP, which is the exact privacy profile of the Gaussian mechanism.

One module owns the Gaussian differential privacy (GDP) curve; every estimator, mechanism and
accountant imports it from here. Argument order everywhere: the curve's argument first, ``mu``
last (``gdp_delta(epsilon, mu)``, ``gdp_epsilon(delta, mu)``, ``gdp_tradeoff(alpha, mu)``).

* Trade-off function (Dong, Roth, Su 2022, "Gaussian Differential Privacy", JRSS-B,
  arXiv:1905.02383, the definition of mu-GDP: G_mu = T(N(0, 1), N(mu, 1))):
  G_mu(alpha) = Phi(Phi^-1(1 - alpha) - mu), the type II error of the optimal test of N(0, 1)
  against N(mu, 1) at type I error alpha.
* Privacy profile (same paper, Corollary 2.13; Balle and Wang, ICML 2018, "Improving the
  Gaussian Mechanism for Differential Privacy", Theorem 8): a mechanism is mu-GDP if and only if
  it is (epsilon, delta(epsilon))-DP for every epsilon >= 0 with

      delta(epsilon) = Phi(-epsilon/mu + mu/2) - e^epsilon * Phi(-epsilon/mu - mu/2).

  A Gaussian mechanism with L2 sensitivity Delta and noise scale sigma is mu-GDP with
  mu = Delta/sigma, so one set of functions serves both.

Used for: the one-run paper's Gaussian upper bound (Steinke, Nasr, Jagielski 2023, Figs. 10-11:
mu = 1, epsilon(1e-5) = 4.38), the base budget of the selection paper's reduced game (Xiang,
Wang, Wang 2024, Section 5.1), the GDP accountant's conversion, the GDP fit of the multi-run
audit (Nasr et al. 2023) and Algorithm 2 of the tight one-run audit (Xiang et al. 2025).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy import optimize, special

#: Absolute and relative tolerances of the root finds in epsilon (:func:`epsilon_of_profile`);
#: the relative one is scipy's default for brentq.
EPSILON_XTOL = 1e-12
EPSILON_RTOL = 4 * float(np.finfo(float).eps)


def _check_mu(mu: float) -> None:
    if not (isinstance(mu, int | float | np.floating) and math.isfinite(mu) and mu > 0):
        raise ValueError(f"mu must be a finite number > 0, got {mu!r}")


def _check_delta(delta: float) -> None:
    if not (isinstance(delta, int | float | np.floating) and 0 < delta < 1):
        raise ValueError(f"delta must lie in (0, 1), got {delta!r}")


def gdp_delta(epsilon: float | np.ndarray, mu: float) -> float | np.ndarray:
    """delta(epsilon) of mu-GDP (Dong, Roth, Su 2022, Corollary 2.13; Balle-Wang Thm 8).

    Evaluated in the log domain, exp(log a) * (1 - exp(log b - log a)) with
    a = Phi(-eps/mu + mu/2) and b = e^eps Phi(-eps/mu - mu/2), so it stays accurate in the
    tails and large epsilon does not overflow. Vectorised over ``epsilon`` (each >= 0).
    """
    _check_mu(mu)
    eps = np.asarray(epsilon, dtype=float)
    if np.any(~(eps >= 0)):
        raise ValueError(f"epsilon must be >= 0, got {epsilon!r}")
    log_a = special.log_ndtr(-eps / mu + mu / 2)
    log_b = eps + special.log_ndtr(-eps / mu - mu / 2)
    with np.errstate(invalid="ignore", over="ignore"):
        out = np.where(log_b < log_a, np.exp(log_a) * -np.expm1(log_b - log_a), 0.0)
    return float(out) if out.ndim == 0 else out


def epsilon_of_profile(
    profile: Callable[[float], float],
    delta: float,
    xtol: float = EPSILON_XTOL,
    rtol: float = EPSILON_RTOL,
) -> float:
    """The smallest epsilon >= 0 with profile(epsilon) <= ``delta``, for a nonincreasing
    privacy profile delta(epsilon) (0 when epsilon = 0 already holds).

    The upper end of the bracket doubles from 1 until it holds, then Brent's method
    (absolute and relative tolerances ``xtol``, ``rtol``).
    """
    if profile(0.0) <= delta:
        return 0.0
    hi = 1.0
    while profile(hi) > delta:
        hi *= 2.0
    return float(optimize.brentq(lambda e: profile(e) - delta, 0.0, hi, xtol=xtol, rtol=rtol))


def gdp_epsilon(delta: float, mu: float) -> float:
    """The smallest epsilon with (epsilon, delta)-DP for mu-GDP (Corollary 2.13 inverted).

    delta(epsilon) is strictly decreasing, so this is a root find. Returns 0 when even
    epsilon = 0 holds, i.e. delta >= 2 Phi(mu/2) - 1.
    """
    _check_mu(mu)
    _check_delta(delta)
    return epsilon_of_profile(lambda e: gdp_delta(e, mu), delta)


def gdp_mu(epsilon: float, delta: float) -> float:
    """The mu at which mu-GDP (the Gaussian mechanism with Delta/sigma = mu) is exactly
    (epsilon, delta)-DP: the inverse of :func:`gdp_epsilon` in mu (delta(eps) increases
    with mu)."""
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"epsilon must be a finite number > 0, got {epsilon!r}")
    _check_delta(delta)
    hi = 1.0
    while gdp_delta(epsilon, hi) < delta:
        hi *= 2.0
    return float(optimize.brentq(lambda m: gdp_delta(epsilon, m) - delta, 1e-12, hi, xtol=1e-14))


def gdp_tradeoff(alpha: float | np.ndarray, mu: float) -> float | np.ndarray:
    """The trade-off function G_mu(alpha) = Phi(Phi^-1(1 - alpha) - mu) of mu-GDP (Dong, Roth,
    Su 2022, arXiv:1905.02383): the smallest type II error at type I error ``alpha``."""
    _check_mu(mu)
    out = special.ndtr(special.ndtri(1.0 - np.asarray(alpha, dtype=float)) - mu)
    return float(out) if np.ndim(out) == 0 else out


def gdp_mu_from_rates(alpha: np.ndarray | float, beta: np.ndarray | float) -> np.ndarray:
    """The mu of the GDP trade-off curve through (alpha, beta), i.e. G_mu(alpha) = beta:
    Phi^-1(1 - alpha) - Phi^-1(beta) (G_mu(alpha) = beta solved for mu; used by the GDP fit of
    Nasr et al. 2023). Vectorised; may be <= 0 for points above the diagonal."""
    # -ndtri(alpha) and ndtri(beta) are scipy.stats.norm.isf / .ppf without their per-call
    # argument handling (the same values).
    return -special.ndtri(np.asarray(alpha, dtype=float)) - special.ndtri(
        np.asarray(beta, dtype=float)
    )


# The Gaussian mechanism with mu = Delta/sigma has the same curve (Balle and Wang 2018, Thm 8):
# the names under which the accountants and commands call it.
gaussian_delta = gdp_delta
gaussian_epsilon = gdp_epsilon
gaussian_mu = gdp_mu


def gaussian_rdp_epsilon(sigma: float, delta: float) -> float:
    """epsilon(delta) of the Gaussian mechanism with sensitivity 1 and noise ``sigma`` from its
    RDP curve ``a / (2 sigma^2)``, converted by Balle et al. (2020, arXiv:1905.09982, Thm. 21):
    ``inf_{a>1} a/(2 sigma^2) + log(1/(a delta))/(a-1) + log(1 - 1/a)``. The conversion
    Pillutla et al. (NeurIPS 2023, App. E.1) calibrate the LiDP study's sigma with."""
    if sigma <= 0 or not 0 < delta < 1:
        raise ValueError(f"need sigma > 0 and delta in (0, 1), got {sigma}, {delta}")

    def f(log_am1: float) -> float:
        a = 1.0 + math.exp(log_am1)
        return a / (2 * sigma**2) + math.log(1 / (a * delta)) / (a - 1) + math.log(1 - 1 / a)

    res = optimize.minimize_scalar(
        f, bounds=(-12.0, 12.0), method="bounded", options={"xatol": 1e-12}
    )
    return max(0.0, float(res.fun))
