"""Anytime-valid tests for the conformance checks: e-processes read at every step (pure NumPy).

An e-process (here a test martingale or supermartingale) E_t >= 0 with E_0 = 1 and
E[E_t | past] <= E_{t-1} under the claim obeys Ville's inequality,
P(sup_t E_t >= 1 / a) <= a: a check that departs at the first step t with E_t >= 1 / a keeps its
error probability a however often it is read and whenever the training is stopped (Ramdas,
Grunwald, Vovk and Shafer 2023, "Game-theoretic statistics and safe anytime-valid inference",
Statistical Science, arXiv:2210.01948, Sections 2-3; Howard, Ramdas, McAuliffe and Sekhon 2021,
"Time-uniform, nonparametric, nonasymptotic confidence sequences", Annals of Statistics,
arXiv:1810.08240, Section 3). A mixture (average) of test martingales over a fixed grid of
alternatives is again a test martingale (Ramdas et al. 2023, Section 4; the method of mixtures
of Howard et al. 2021), so no alternative has to be guessed in advance; its cost is the log of
the grid's size over the best single alternative.

Two likelihood-ratio martingales are used:

- :func:`binomial_log_e`: given the past, x_t ~ Binomial(n_t, p_t) with n_t and p_t known before
  step t (the sampling checks); the likelihood ratio of a fixed rate r against p_t, multiplied
  over the steps, is a test martingale; averaged over a grid of r. (For one Bernoulli draw per
  step this is also the betting martingale of Waudby-Smith and Ramdas 2024, "Estimating means
  of bounded random variables by betting", JRSS B, arXiv:2010.09686, Section 3, with the bet
  lambda = (r - p) / (p (1 - p)).)
- :func:`gaussian_scale_log_e`: given the past, y_t = sum of k_t squared N(0, s^2) values over
  s^2 stochastically dominates chi-square(k_t) (the noise check); the likelihood ratio of the
  smaller scale rho s, rho^(-k) exp(-y (rho^-2 - 1) / 2), is decreasing in y with mean 1 under
  chi-square(k), so a test supermartingale under the claim whatever the data add; averaged over
  a grid of rho < 1. It depends on the running sums only, so any read of them is valid.

One more, for a mean: :func:`symmetric_mean_log_e`: given the past, each value w = z + c where z
is symmetric and c an unknown offset in [-tol, tol] (the sensitivity probes' deficit below C and
the rounding of the clipping). For a symmetric z and any lambda,
E exp(lambda z - lambda^2 z^2 / 2) = E cosh(lambda z) exp(-lambda^2 z^2 / 2) <= 1, so
exp(lambda S_z - lambda^2 V_z^2 / 2) over the running sum S_z and sum of squares V_z^2 of the z
is a test supermartingale (de la Pena 1999, "A general class of exponential inequalities for
martingales and ratios", Annals of Probability 27(1): conditionally symmetric increments).
For lambda >= 0 the computable lambda (S_w - n tol) - lambda^2 sum (|w| + tol)^2 / 2 (n values
so far) is at most that, since S_z >= S_w - n tol and |z| <= |w| + tol; averaged over a grid of
lambda.

Each function returns log E_t for t = 1..T; :func:`first_crossing` gives the first step at which
E_t >= 1 / level (the check's first flagged step) and the anytime p-value min(1, 1 / sup E).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import logsumexp

#: Alternatives of the two-sided rate mixture: r = p exp(u) for these u (both signs).
RATE_LOG_RATIOS = np.geomspace(0.01, 4.0, 24)
#: Alternatives of the noise-scale mixture: rho = exp(-u) for these u (too little noise).
SCALE_LOG_RATIOS = np.geomspace(1e-3, 4.0, 32)
#: Bets of the symmetric-mean mixture, in units of 1 / the deficit's unit (one-sided: > 0).
MEAN_BETS = np.geomspace(1e-3, 1e3, 25)
#: Alternatives of a Bernoulli event's probability (the batch-size law).
EVENT_RATES = np.linspace(0.05, 0.95, 19)


def _mix(log_paths: np.ndarray) -> np.ndarray:
    """log of the uniform average over the rows (alternatives) of exp(log_paths)."""
    return logsumexp(log_paths, axis=0) - math.log(log_paths.shape[0])


def rate_grid(p: float, side: str) -> np.ndarray:
    """A grid of alternative rates around ``p`` in (0, 1): above it (``greater``), below it
    (``less``) or both (``two-sided``), p exp(+-u) for u in :data:`RATE_LOG_RATIOS`."""
    up = p * np.exp(RATE_LOG_RATIOS)
    down = p * np.exp(-RATE_LOG_RATIOS)
    grid = {"greater": up, "less": down, "two-sided": np.concatenate([down, up])}[side]
    grid = grid[(grid > 0) & (grid < 1)]
    if grid.size == 0:  # p within 1% of 1: one alternative halfway to the edge
        grid = np.array([(1 + p) / 2 if side == "greater" else p / 2])
    return grid


def binomial_log_e(
    successes: np.ndarray, trials: np.ndarray, null: np.ndarray | float, alternatives: np.ndarray
) -> np.ndarray:
    """log E_t, t = 1..T: the mixture over ``alternatives`` (rates in (0, 1)) of the products of
    Binomial likelihood ratios r vs ``null`` of ``successes`` out of ``trials`` per step (see the
    module docstring). ``null`` (per step or one rate) must lie in (0, 1)."""
    x = np.asarray(successes, dtype=np.float64)
    n = np.asarray(trials, dtype=np.float64)
    p = np.broadcast_to(np.asarray(null, dtype=np.float64), x.shape)
    if x.size == 0:
        return np.zeros(0)
    r = np.asarray(alternatives, dtype=np.float64)[:, None]
    steps = x * np.log(r / p) + (n - x) * (np.log1p(-r) - np.log1p(-p))
    return _mix(np.cumsum(steps, axis=1))


def gaussian_scale_log_e(sum_sq: np.ndarray, df: np.ndarray) -> np.ndarray:
    """log E at each read of the running sums: ``sum_sq`` the running sum of squares in units of
    the claimed scale (chi-square under the claim, larger with the data), ``df`` its running
    number of terms; the mixture over rho = exp(-u), u in :data:`SCALE_LOG_RATIOS`."""
    y = np.asarray(sum_sq, dtype=np.float64)
    k = np.asarray(df, dtype=np.float64)
    if y.size == 0:
        return np.zeros(0)
    u = SCALE_LOG_RATIOS[:, None]
    return _mix(k * u - y * np.expm1(2 * u) / 2)


def symmetric_mean_log_e(values: list[np.ndarray], tol: float) -> np.ndarray:
    """log E after each group of ``values`` (one array per step, any length) of the one-sided
    test that their mean is above 0 when each is, given the past, symmetric about a centre within
    ``tol`` of 0 (the module docstring); the mixture over lambda in :data:`MEAN_BETS`."""
    if not values:
        return np.zeros(0)
    w = [np.asarray(v, dtype=np.float64).ravel() for v in values]
    s = np.cumsum([float(v.sum()) - tol * v.size for v in w])
    v2 = np.cumsum([float(((np.abs(v) + tol) ** 2).sum()) for v in w])
    lam = MEAN_BETS[:, None]
    return _mix(lam * s - lam**2 * v2 / 2)


def first_crossing(log_e: np.ndarray, level: float, start: int = 1) -> tuple[int | None, float]:
    """(the first step, counted from ``start``, at which E_t >= 1 / ``level``, or None; the
    anytime p-value min(1, 1 / sup_t E_t))."""
    if log_e.size == 0:
        return None, 1.0
    hit = np.flatnonzero(log_e >= -math.log(level))
    top = float(np.max(log_e))
    return (int(hit[0]) + start if hit.size else None), min(1.0, math.exp(-top))
