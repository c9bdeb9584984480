"""The exact privacy profile of the Gaussian mechanism and of mu-GDP.

Balle and Wang (ICML 2018), "Improving the Gaussian Mechanism for Differential Privacy",
Theorem 8: a Gaussian mechanism with L2 sensitivity Delta and noise scale sigma is
(epsilon, delta)-DP if and only if

    delta >= Phi(-epsilon/mu + mu/2) - e^epsilon * Phi(-epsilon/mu - mu/2),   mu = Delta/sigma.

Dong, Roth and Su (JRSS-B 2022), Corollary 2.13: a mechanism is mu-GDP if and only if it is
(epsilon, delta(epsilon))-DP for every epsilon >= 0 with the same delta(epsilon). So one pair of
functions serves both; ``mu`` is Delta/sigma for the Gaussian mechanism and the GDP parameter
otherwise.

Used for: the one-run paper's Gaussian upper bound (Steinke, Nasr, Jagielski 2023, Fig. 10-11:
mu = 1, epsilon(1e-5) = 4.38), the base budget of the selection paper's reduced game (Xiang,
Wang, Wang 2024, Section 5.1), and the GDP accountant's conversion.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize, special


def _check_mu(mu: float) -> None:
    if not (isinstance(mu, int | float | np.floating) and math.isfinite(mu) and mu > 0):
        raise ValueError(f"mu must be a finite number > 0, got {mu!r}")


def gaussian_delta(epsilon: float | np.ndarray, mu: float) -> float | np.ndarray:
    """delta(epsilon) of the Gaussian mechanism with mu = Delta/sigma (Balle-Wang Thm 8).

    The second term is evaluated as exp(epsilon + log Phi(.)) so large epsilon does not
    overflow. Vectorised over ``epsilon`` (each must be >= 0).
    """
    _check_mu(mu)
    eps = np.asarray(epsilon, dtype=float)
    if np.any(~(eps >= 0)):
        raise ValueError(f"epsilon must be >= 0, got {epsilon!r}")
    a = special.ndtr(-eps / mu + mu / 2)
    b = np.exp(eps + special.log_ndtr(-eps / mu - mu / 2))
    out = np.clip(a - b, 0.0, 1.0)
    return float(out) if out.ndim == 0 else out


def gaussian_epsilon(delta: float, mu: float) -> float:
    """The smallest epsilon with (epsilon, delta)-DP for the Gaussian mechanism (Thm 8 inverted).

    delta(epsilon) is strictly decreasing, so this is a root find (brentq, xtol 1e-12).
    Returns 0 when even epsilon = 0 holds, i.e. delta >= 2 Phi(mu/2) - 1.
    """
    _check_mu(mu)
    if not (isinstance(delta, int | float | np.floating) and 0 < delta < 1):
        raise ValueError(f"delta must lie in (0, 1), got {delta!r}")
    if gaussian_delta(0.0, mu) <= delta:
        return 0.0
    hi = max(1.0, mu * mu)
    while gaussian_delta(hi, mu) > delta:
        hi *= 2.0
    return float(
        optimize.brentq(lambda e: gaussian_delta(e, mu) - delta, 0.0, hi, xtol=1e-12, rtol=1e-14)
    )


def gaussian_mu(epsilon: float, delta: float) -> float:
    """The mu = Delta/sigma at which the Gaussian mechanism is exactly (epsilon, delta)-DP.

    Inverse of :func:`gaussian_epsilon` in mu (delta(epsilon) increases with mu).
    """
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"epsilon must be a finite number > 0, got {epsilon!r}")
    if not 0 < delta < 1:
        raise ValueError(f"delta must lie in (0, 1), got {delta!r}")
    hi = 1.0
    while gaussian_delta(epsilon, hi) < delta:
        hi *= 2.0
    return float(
        optimize.brentq(lambda m: gaussian_delta(epsilon, m) - delta, 1e-12, hi, xtol=1e-14)
    )


# mu-GDP <-> (epsilon, delta): the same curve (Dong, Roth, Su 2022, Corollary 2.13).
gdp_delta = gaussian_delta
gdp_epsilon = gaussian_epsilon
gdp_mu = gaussian_mu
