"""Confidence intervals for the mean of an exchangeable Bernoulli (XBern) vector.

Pillutla, Andrew, Kairouz, McMahan, Oprea, Oh (NeurIPS 2023), "Unleashing the Power of
Randomization in Auditing Differentially Private ML", arXiv:2305.18447, Appendix C:
XBern law Def. 5, Eq. 13-14; Bernstein intervals App. C.1; Wilson App. C.2, Algs. 5-7.

Input: ``n`` i.i.d. trials of a ``K``-dimensional XBern vector, as an ``(n, K)`` 0/1 matrix (one
row per trained model, one column per canary, after thresholding the scores). Everything here
depends on a row only through its count of ones ``s``: the per-row moments of Eq. (13) are
``m_l = binom(s, l) / binom(K, l)``, computed by the recurrence of Eq. (14),
``m_{l+1} = m_l (K m_1 - l) / (K - l)``.

Intervals (every bound is one-sided at failure probability ``beta``; a two-sided interval from
the same call holds with probability 1 - 2 beta, 1 - 3 beta / 2, 1 - 5 beta / 4 for orders 1, 2,
4, Props. 8, 9 and 11 -- the paper prints these with "<=", a typo):

* ``wilson`` -- Algorithms 5 (order 1), 6 (order 2) and 7 (order 4): asymptotic (CLT), closed-form
  roots of quadratics. As in the authors' released code (``xbern-confidence-intervals``, and the
  ``lidp_auditing`` release), every root is clipped to [0, 1] and combined with the worst-case
  Gaussian bound that uses Var <= 1/4 (lower = max(Wilson, mu_hat - Z sqrt(1/(4n))), upper =
  min(Wilson, mu_hat + Z sqrt(1/(4n)))); the upper bounds on mu_2, mu_3, mu_4 are computed the
  same way. This clipping only ever tightens the interval and is what reproduces the paper's
  numbers, so it is always applied.
* ``bernstein`` -- Algorithms 2, 3 and 4: non-asymptotic, found by root finding (``brentq``
  for one data set, a vectorised bisection to machine precision for a batch, e.g. a grid of
  thresholds). Each
  variance plug-in is clipped to [0, 1/4] (valid: the variance of a [0, 1] variable is <= 1/4).
* ``clopper_pearson`` -- the exact binomial interval on the first coordinate only (the paper's
  code computes it as a K = 1 reference; it ignores the other K - 1 canaries).

Variants (``variant``), where the paper, its derivations and its released code differ
(App. C.1-C.2; see docs/estimators/lidp.md):

* ``printed`` (default): the algorithms exactly as printed. Alg. 3/4 use the variance
  ``x/K - x^2 + mu2_bar`` (conservative: Eq. (17) has ``(K-1)/K mu2_bar``) and Alg. 4 uses
  sigma_2^2 of Eq. (18). Alg. 7 uses the printed quadratic with ``c = (K-2)(K-3)/(K(K-1))
  (mu4_bar - mu3_bar^2) + 4(K-2)/(K(K-1)) mu3_bar``, which does *not* follow from Eq. (18).
* ``released``: the ``xbern-confidence-intervals`` package: Wilson as printed; Bernstein with
  ``(K-1)/K mu2_bar`` and sigma_2^2 with the ``(mu4_bar - mu3_bar^2)`` term of Alg. 7.
* ``derived``: straight from Eqs. (17)-(18): Wilson order 4 solves
  ``n (x - mu2_hat)^2 = Z^2 sigma_2^2(x, mu3_bar, mu4_bar)``; Bernstein as ``released`` but
  with sigma_2^2 of Eq. (18).

The ``(mu4_bar - mu3_bar^2)`` form replaces ``x^2`` (the candidate mu_2) by ``mu3_bar^2``; since
mu_3 <= mu_2 this is conservative whenever ``mu3_bar <= mu_2``, which holds unless the canaries
are strongly correlated (mu_3 close to mu_2).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import optimize, special, stats

Interval = Literal["wilson", "bernstein", "clopper_pearson"]
Variant = Literal["printed", "released", "derived"]
INTERVALS: tuple[str, ...] = ("wilson", "bernstein", "clopper_pearson")
ORDERS: tuple[int, ...] = (1, 2, 4)
VARIANTS: tuple[str, ...] = ("printed", "released", "derived")

#: Bisection halvings for the Bernstein roots (the bracket has length <= 1, so 60 halvings
#: reach the spacing of doubles near 1).
BISECTION_STEPS = 60


class XBernInputError(ValueError):
    """Input that the XBern intervals cannot use (named in the message)."""


# ---------------------------------------------------------------------------------------------
# Input checks and moments (Eqs. 13-14)
# ---------------------------------------------------------------------------------------------


def check_open_unit(value: float, name: str) -> float:
    """``value`` as a float in (0, 1), or an :class:`XBernInputError` naming it."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise XBernInputError(f"{name} must be a number, got {value!r}") from None
    if not 0.0 < v < 1.0:
        raise XBernInputError(f"{name} must lie in (0, 1), got {value!r}")
    return v


def check_beta(beta: float) -> float:
    """``beta`` as a float in (0, 1), or a clear error."""
    return check_open_unit(beta, "failure probability beta")


def check_order(order: int, K: int, interval: str = "wilson", what: str = "x") -> int:
    """Check the interval name and that ``K`` canaries suffice for ``order``."""
    if interval not in INTERVALS:
        raise XBernInputError(f"unknown interval {interval!r}; allowed: {list(INTERVALS)}")
    if isinstance(order, bool) or not isinstance(order, int | np.integer) or order not in ORDERS:
        raise XBernInputError(f"order must be one of {list(ORDERS)}, got {order!r}")
    if interval == "clopper_pearson" and order != 1:
        raise XBernInputError(
            f"clopper_pearson uses the first coordinate only: order must be 1, got {order}"
        )
    if K < order:
        raise XBernInputError(
            f"the order-{order} {interval} interval needs K >= {order} canaries per trial, "
            f"but {what} has K = {K}"
        )
    return int(order)


def check_binary(x: np.ndarray, name: str = "x") -> np.ndarray:
    """Validate an ``(n, K)`` 0/1 matrix (bool or numeric); return it as given or as bool.

    Raises :class:`XBernInputError` naming the first bad entry (NaN, inf, a value not 0/1) or a
    bad shape.
    """
    x = np.asarray(x)
    if x.ndim != 2:
        raise XBernInputError(f"{name} must be a 2-D (trials, canaries) 0/1 array, got {x.shape}")
    if x.shape[0] < 1 or x.shape[1] < 1:
        raise XBernInputError(f"{name} is empty (shape {x.shape})")
    if x.dtype == bool:
        return x
    if not np.issubdtype(x.dtype, np.number):
        raise XBernInputError(f"{name} must be numeric or bool 0/1, got dtype {x.dtype}")
    if np.issubdtype(x.dtype, np.floating):
        nan = np.isnan(x)
        if nan.any():
            t, k = np.argwhere(nan)[0]
            raise XBernInputError(
                f"{name} has NaN at trial {t}, canary {k} ({int(nan.sum())} NaN in all)"
            )
    if x.dtype in (np.int8, np.uint8) and x.view(np.uint8).max() <= 1:
        return x  # one reduction over the bytes (-1 reads 255), no temporary the size of x
    if np.issubdtype(x.dtype, np.integer) and x.min() >= 0 and x.max() <= 1:
        return x
    bad = (x != 0) & (x != 1)
    if bad.any():
        t, k = np.argwhere(bad)[0]
        raise XBernInputError(
            f"{name} must hold only 0 and 1 (threshold the scores first); got {x[t, k]!r} "
            f"at trial {t}, canary {k}"
        )
    return x


def row_counts(x: np.ndarray, name: str = "x") -> np.ndarray:
    """Number of ones in each row of a validated 0/1 matrix, as int64 of shape (n,)."""
    x = check_binary(x, name)
    return np.count_nonzero(x, axis=1).astype(np.int64)


def per_row_moments(counts: np.ndarray, K: int, order: int) -> np.ndarray:
    """Per-row moments ``m_1..m_order`` of Eq. (13) from the counts of ones, by Eq. (14).

    ``counts`` has any shape; the result has shape ``(order, *counts.shape)``. Exact for every
    binary vector (Prop. 6): ``m_l = binom(s, l) / binom(K, l)``.
    """
    if order > K:
        raise XBernInputError(f"moment of order {order} needs K >= {order}, got K = {K}")
    m1 = np.asarray(counts, dtype=np.float64) / K
    out = np.empty((order, *m1.shape))
    out[0] = m1
    for ell in range(1, order):
        out[ell] = out[ell - 1] * (K * m1 - ell) / (K - ell)
    return out


def moments(x: np.ndarray, order: int = 4, name: str = "x") -> np.ndarray:
    """Empirical moments ``mu_hat_1..mu_hat_order`` (means over trials of Eq. (13)).

    ``x`` is an ``(n, K)`` 0/1 matrix; returns a float array of length ``order``.
    """
    counts = row_counts(x, name)
    K = np.asarray(x).shape[1]
    return _moments_from_hist(np.bincount(counts, minlength=K + 1), K, order)


def _moments_from_hist(hist: np.ndarray, K: int, order: int) -> np.ndarray:
    """Moments from the histogram of row counts (length K + 1): O(K) instead of O(n)."""
    n = hist.sum()
    per_count = per_row_moments(np.arange(K + 1), K, order)  # (order, K + 1)
    return per_count @ hist / n


def _row_sums_packed(x: np.ndarray) -> np.ndarray | None:
    """Row sums of a checked 0/1 matrix of one-byte entries (bool, int8, uint8), read as
    8-byte words: the words of a row are added as integers, each byte lane counting the ones
    of its column position (at most K / 8 <= 255, so no lane carries into the next), and
    the eight lanes are then added (two lanes at a time, then by a multiplication). About
    2-3x faster than a byte sum into int16; the counts are the same integers. None where it
    does not apply (other dtypes, a K not a multiple of 8 or above 2040, rows not
    contiguous)."""
    n, K = x.shape
    if x.itemsize != 1 or K % 8 or K > 8 * 255 or not x.flags.c_contiguous:
        return None
    words = x.view(np.uint64)  # (n, K / 8)
    lanes = np.einsum("ij->i", words)  # integer sums (faster than .sum on short rows)
    low = np.uint64(0x00FF00FF00FF00FF)
    pairs = (lanes & low) + ((lanes >> np.uint64(8)) & low)  # four 16-bit lanes, <= 510 each
    return ((pairs * np.uint64(0x0001000100010001)) >> np.uint64(48)).astype(np.intp)


# ---------------------------------------------------------------------------------------------
# Sufficient statistics
# ---------------------------------------------------------------------------------------------


@dataclass
class XBernSummary:
    """What every interval needs: n, K, the empirical moments, and the ones in coordinate 0.

    ``moments`` has shape ``(order, *batch)`` and ``first`` shape ``batch``: a batch (e.g. one
    entry per candidate threshold) is handled in one vectorised call.
    """

    n: int
    K: int
    moments: np.ndarray
    first: np.ndarray

    @classmethod
    def from_binary(cls, x: np.ndarray, order: int = 4, name: str = "x") -> XBernSummary:
        x = check_binary(x, name)
        n, K = x.shape
        order = min(order, K)
        # 0/1 integers (checked above): a sum is the count, and faster than count_nonzero
        # (in the narrowest integer type that holds K: a row sum of int8 into int16 is twice
        # as fast as into int64)
        counts = _row_sums_packed(x)
        if counts is None:
            counts = (
                x.sum(axis=1, dtype=np.int16 if K < 2**15 else np.int64)
                if np.issubdtype(x.dtype, np.integer)
                else np.count_nonzero(x, axis=1)
            )
        hist = np.bincount(counts, minlength=K + 1)
        return cls(
            n=n,
            K=K,
            moments=_moments_from_hist(hist, K, order),
            first=np.asarray(np.count_nonzero(x[:, 0])),
        )


# ---------------------------------------------------------------------------------------------
# Wilson (Algorithms 5-7)
# ---------------------------------------------------------------------------------------------


def z_quantile(beta: float) -> float:
    """``Z_beta``: the (1 - beta)-quantile of N(0, 1) (``-ndtri(beta)``, the value of
    ``scipy.stats.norm.isf`` without its per-call argument handling)."""
    return float(-special.ndtri(beta))


def _quadratic_roots(a, b, c) -> tuple[np.ndarray, np.ndarray]:
    """Roots of ``a x^2 - b x + c = 0`` (note the sign of b, as in Algs. 5-7), smaller first.

    A negative discriminant (impossible for valid moments, possible by rounding) is set to 0.
    """
    disc = np.sqrt(np.maximum(b * b - 4.0 * a * c, 0.0))
    return (b - disc) / (2.0 * a), (b + disc) / (2.0 * a)


def _clip_lower(root, mu_hat, n: int, z: float) -> np.ndarray:
    worst = np.clip(mu_hat - z * np.sqrt(0.25 / n), 0.0, 1.0)
    return np.maximum(np.clip(root, 0.0, 1.0), worst)


def _clip_upper(root, mu_hat, n: int, z: float) -> np.ndarray:
    worst = np.clip(mu_hat + z * np.sqrt(0.25 / n), 0.0, 1.0)
    return np.minimum(np.clip(root, 0.0, 1.0), worst)


def _wilson_first(mu_hat, n: int, z: float) -> tuple[np.ndarray, np.ndarray]:
    """Alg. 5: roots of (n + Z^2) x^2 - (2 n mu_hat + Z^2) x + n mu_hat^2 = 0, clipped."""
    lo, hi = _quadratic_roots(n + z * z, 2 * n * mu_hat + z * z, n * mu_hat**2)
    return _clip_lower(lo, mu_hat, n, z), _clip_upper(hi, mu_hat, n, z)


def _wilson_mu1_given_mu2(mu1, mu2_bar, n: int, K: int, z: float):
    """Alg. 6 step 6 / Alg. 7 step 7: n (x - mu1)^2 = Z^2 (x/K - x^2 + (K-1)/K mu2_bar)."""
    a = n + z * z
    b = 2 * n * mu1 + z * z / K
    c = n * mu1**2 - (K - 1) / K * z * z * mu2_bar
    lo, hi = _quadratic_roots(a, b, c)
    return _clip_lower(lo, mu1, n, z), _clip_upper(hi, mu1, n, z)


def _wilson_mu2_fourth(mu2, mu3_bar, mu4_bar, n: int, K: int, z: float, variant: str):
    """Alg. 7 step 6: the larger root for mu2_bar (printed form, or derived from Eq. (18))."""
    kk = K * (K - 1)
    z2 = z * z
    if variant == "derived":
        a = n + z2
        c = n * mu2**2 - z2 * (4 * (K - 2) * mu3_bar + (K - 2) * (K - 3) * mu4_bar) / kk
    else:
        a = n + 2 * z2 * (2 * K - 3) / kk
        cc = (K - 2) * (K - 3) / kk * (mu4_bar - mu3_bar**2) + 4 * (K - 2) / kk * mu3_bar
        c = n * mu2**2 - cc * z2
    b = 2 * n * mu2 + 2 * z2 / kk
    _, hi = _quadratic_roots(a, b, c)
    return _clip_upper(hi, mu2, n, z)


def wilson_bounds(
    s: XBernSummary, beta: float, order: int, variant: str = "printed"
) -> tuple[np.ndarray, np.ndarray]:
    """Lower and upper Wilson bounds on mu_1, each one-sided at level ``beta`` (Algs. 5-7).

    Order 2 spends beta/2 on mu2_bar and beta/2 on mu_1 (Z_{beta/2}); order 4 spends beta/4
    on each of mu3_bar, mu4_bar, mu2_bar and mu_1 (Z_{beta/4}).
    """
    n, K, mu = s.n, s.K, s.moments
    if order == 1:
        return _wilson_first(mu[0], n, z_quantile(beta))
    if order == 2:
        z = z_quantile(beta / 2)
        mu2_bar = _wilson_first(mu[1], n, z)[1]
        return _wilson_mu1_given_mu2(mu[0], mu2_bar, n, K, z)
    z = z_quantile(beta / 4)
    mu3_bar = _wilson_first(mu[2], n, z)[1]
    mu4_bar = _wilson_first(mu[3], n, z)[1]
    mu2_bar = _wilson_mu2_fourth(mu[1], mu3_bar, mu4_bar, n, K, z, variant)
    return _wilson_mu1_given_mu2(mu[0], mu2_bar, n, K, z)


# ---------------------------------------------------------------------------------------------
# Bernstein (Algorithms 2-4)
# ---------------------------------------------------------------------------------------------


VarianceFn = Callable[[np.ndarray], np.ndarray]


def _bisect(f: VarianceFn, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """A root of ``f`` in [lo, hi] elementwise, where f(lo) and f(hi) differ in sign.

    Scalars go to ``scipy.optimize.brentq`` (faster for one root); batches to a vectorised
    bisection of :data:`BISECTION_STEPS` halvings.
    """
    lo, hi = np.array(lo, dtype=float), np.array(hi, dtype=float)
    if lo.ndim == 0:
        if lo == hi:
            return lo
        return np.asarray(optimize.brentq(f, float(lo), float(hi), xtol=1e-15, maxiter=500))
    f_lo_pos = f(lo) > 0
    for _ in range(BISECTION_STEPS):
        mid = 0.5 * (lo + hi)
        same = (f(mid) > 0) == f_lo_pos
        lo = np.where(same, mid, lo)
        hi = np.where(same, hi, mid)
    return 0.5 * (lo + hi)


def _bernstein_bound(mu_hat, var: VarianceFn, n: int, log_term: float, upper: bool):
    """The root x of +-(x - mu_hat) - sqrt(2 L var(x) / n) = 2 L / (3 n) on the side of mu_hat
    given by ``upper`` (in [mu_hat, 1], else 1; or in [0, mu_hat], else 0)."""
    mu_hat = np.asarray(mu_hat, dtype=float)
    sign = 1.0 if upper else -1.0
    fallback = 1.0 if upper else 0.0

    def f(x):
        return (
            sign * (x - mu_hat) - np.sqrt(2.0 * log_term * var(x) / n) - 2.0 * log_term / (3.0 * n)
        )

    if mu_hat.ndim == 0:  # one root: plain floats (the same IEEE operations, no array overhead)
        m, ell = float(mu_hat), float(log_term)

        def f_float(x: float) -> float:
            return sign * (x - m) - math.sqrt(2.0 * ell * var(x) / n) - 2.0 * ell / (3.0 * n)

        if not f_float(fallback) > 0:
            return np.asarray(fallback)
        lo, hi = (m, fallback) if upper else (fallback, m)
        if lo == hi:
            return np.asarray(lo)
        return np.asarray(optimize.brentq(f_float, lo, hi, xtol=1e-15, maxiter=500))
    end = np.full_like(mu_hat, fallback)
    has_root = f(end) > 0
    root = _bisect(f, mu_hat, end) if upper else _bisect(f, end, mu_hat)
    return np.where(has_root, root, fallback)


def _bernstein_lower(mu_hat, var: VarianceFn, n: int, log_term: float) -> np.ndarray:
    """The x in [0, mu_hat] with mu_hat - x - sqrt(2 L var(x) / n) = 2 L / (3 n), else 0."""
    return _bernstein_bound(mu_hat, var, n, log_term, upper=False)


def _bernstein_upper(mu_hat, var: VarianceFn, n: int, log_term: float) -> np.ndarray:
    """The x in [mu_hat, 1] with x - mu_hat - sqrt(2 L var(x) / n) = 2 L / (3 n), else 1."""
    return _bernstein_bound(mu_hat, var, n, log_term, upper=True)


def _var_bernoulli(x):
    return x * (1.0 - x)


def _clip_var(v):
    if isinstance(v, float):  # a scalar root search (np.clip's value, without its overhead)
        return min(max(v, 0.0), 0.25)
    return np.clip(v, 0.0, 0.25)


def _as_scalar(v):
    """A 0-d bound as a float (for the scalar root searches), a batch as it is."""
    return float(v) if np.ndim(v) == 0 else v


def bernstein_bounds(
    s: XBernSummary, beta: float, order: int, variant: str = "printed"
) -> tuple[np.ndarray, np.ndarray]:
    """Lower and upper Bernstein bounds on mu_1, each one-sided at level ``beta`` (Algs. 2-4)."""
    n, K, mu = s.n, s.K, s.moments
    if order == 1:
        L = np.log(1.0 / beta)
        return (
            _bernstein_lower(mu[0], _var_bernoulli, n, L),
            _bernstein_upper(mu[0], _var_bernoulli, n, L),
        )
    coef = 1.0 if variant == "printed" else (K - 1) / K
    if order == 2:
        L = np.log(2.0 / beta)
        mu2_bar = _as_scalar(_bernstein_upper(mu[1], _var_bernoulli, n, L))
    else:
        L = np.log(4.0 / beta)
        mu3_bar = _as_scalar(_bernstein_upper(mu[2], _var_bernoulli, n, L))
        mu4_bar = _as_scalar(_bernstein_upper(mu[3], _var_bernoulli, n, L))
        kk = K * (K - 1)
        if variant == "released":
            tail = (K - 2) * (K - 3) * (mu4_bar - mu3_bar**2)

            def var2(x):
                num = 2 * x * (1 - x) + 4 * (K - 2) * (mu3_bar - x * x) + tail
                return _clip_var(num / kk)
        else:  # Eq. (18), as Alg. 4 prints it

            def var2(x):
                num = (
                    2 * x * (1 - x)
                    + 4 * (K - 2) * (mu3_bar - x * x)
                    + (K - 2) * (K - 3) * (mu4_bar - x * x)
                )
                return _clip_var(num / kk)

        mu2_bar = _as_scalar(_bernstein_upper(mu[1], var2, n, L))

    def var1(x):
        return _clip_var(x / K - x * x + coef * mu2_bar)

    return _bernstein_lower(mu[0], var1, n, L), _bernstein_upper(mu[0], var1, n, L)


# ---------------------------------------------------------------------------------------------
# Clopper-Pearson on the first coordinate
# ---------------------------------------------------------------------------------------------


def clopper_pearson_bounds(s: XBernSummary, beta: float) -> tuple[np.ndarray, np.ndarray]:
    """Exact one-sided binomial bounds at level ``beta`` from coordinate 0 of each trial."""
    k = np.asarray(s.first, dtype=float)
    n = s.n
    with np.errstate(invalid="ignore", divide="ignore"):
        lo = stats.beta.ppf(beta, np.maximum(k, 1), n - k + 1)
        hi = stats.beta.ppf(1 - beta, k + 1, np.maximum(n - k, 1))
    return np.where(k == 0, 0.0, lo), np.where(k == n, 1.0, hi)


# ---------------------------------------------------------------------------------------------
# Front door
# ---------------------------------------------------------------------------------------------


def bounds(
    s: XBernSummary,
    beta: float,
    interval: str = "wilson",
    order: int = 2,
    variant: str = "printed",
) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) bounds on mu_1 from a summary; each one-sided at failure prob. ``beta``."""
    beta = check_beta(beta)
    order = check_order(order, s.K, interval)
    if variant not in VARIANTS:
        raise XBernInputError(f"unknown variant {variant!r}; allowed: {list(VARIANTS)}")
    if s.moments.shape[0] < order and interval != "clopper_pearson":
        raise XBernInputError(
            f"summary holds {s.moments.shape[0]} moments, order {order} needs more"
        )
    if interval == "wilson":
        return wilson_bounds(s, beta, order, variant)
    if interval == "bernstein":
        return bernstein_bounds(s, beta, order, variant)
    return clopper_pearson_bounds(s, beta)


def xbern_interval(
    x: np.ndarray,
    beta: float = 0.05,
    interval: str = "wilson",
    order: int = 2,
    variant: str = "printed",
) -> tuple[float, float]:
    """(lower, upper) confidence bounds on the XBern mean of a 0/1 matrix ``x`` (n, K).

    Each bound alone holds with probability >= 1 - ``beta`` (asymptotically for Wilson).
    """
    x = check_binary(x)
    check_order(order, x.shape[1], interval)
    s = XBernSummary.from_binary(x, order=max(order, 1))
    lo, hi = bounds(s, beta, interval, order, variant)
    return float(lo), float(hi)
