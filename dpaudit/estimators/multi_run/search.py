"""The fast search behind :mod:`.bound`: the threshold of largest Eq. 1 without every bound.

:func:`.definition.plain_argmax` computes a Clopper-Pearson bound at every threshold
of the sweep and takes the maximum (Annamalai, Balle, Hayes, De Cristofaro 2024,
arXiv:2411.10614, Appendix B, Algorithm 5). This module finds the same maximum with far fewer
Beta quantiles: :func:`argmax_over_thresholds` by branch and bound over blocks of thresholds
(the objective falls in both rates, and along a sweep the rates are monotone, so a block is
bounded by its ends), and :func:`binned_argmax` by the same search over bins of the score range,
sorting only the scores of the bins that can still hold the maximum. Cheap certified lower
bounds on the Clopper-Pearson bound (:func:`_cp_floor`, :func:`_cp_lower`) decide which blocks
need exact bounds at all. None of this changes a value: a block is dropped only when a bound at
least its exact one is below a value attained, and ties hand back to the bound-order search.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from dpaudit.estimators.multi_run.definition import cp_upper


def _cp_floor(k: np.ndarray, n: float, level: float) -> np.ndarray:
    """A cheap lower bound on :func:`cp_upper` for level >= 1/2: max(k/n, bound at k = 0).

    The level-quantile of Beta(k+1, n-k) is at least its median, which is at least k/n (it
    lies between the mode k/(n-1) and the mean (k+1)/(n+1)); the bound grows with k. The
    k = 0 term, 1 - (1 - level)^(1/n), is the exact bound at k = 0; a relative 1e-12 below it
    absorbs rounding (SciPy's Beta quantile may land an ulp lower).
    """
    at_zero = -np.expm1(np.log1p(-level) / n) * (1.0 - 1e-12)
    return np.maximum(np.asarray(k, dtype=np.float64) / n, at_zero)


#: Berry-Esseen constant for sums of i.i.d. variables: sup_x |P(S_n <= x) - Phi(x)| <=
#: C E|X - EX|^3 / (sd^3 sqrt(n)) with C <= 0.4748 (Shevtsova 2011, arXiv:1111.6554, Thm 1).
_BERRY_ESSEEN = 0.4748


def _cp_lower(k: np.ndarray, n: np.ndarray | float, level: float) -> tuple[np.ndarray, np.ndarray]:
    """(a certified lower bound on :func:`cp_upper`, an approximation of it), both from a few
    elementary operations (no Beta quantile), for level >= 1/2. The lower bound is at most the
    exact bound and, for large counts (10-90% of n), 5.6-7.5 counts' worth below it at level
    0.975.

    For integer n and 1 <= j = floor(k) < n, cp_upper(k) >= cp_upper(j) (the Beta(k + 1, n - k)
    quantile grows with k), and cp_upper(j) is the q with P[Bin(n, q) <= j] = 1 - level
    (Clopper and Pearson 1934). By the Berry-Esseen theorem (:data:`_BERRY_ESSEEN`), for every p,
    P[Bin(n, p) <= j] >= Phi((j - n p) / sqrt(n p (1 - p))) - C g(p) / sqrt(n) with
    g(p) = (p^2 + (1 - p)^2) / sqrt(p (1 - p)) (the Bernoulli's third absolute moment over its
    sd^3). The p > j/n where that normal term equals 1 - level + e is the upper end of the
    Wilson score interval of j at z = Phi^-1(level - e). With e = C max(g(j/n), g(p0)) /
    sqrt(n), p0 the Wilson end of k at z = Phi^-1(level) (above p; g is convex, so its maximum
    on [j/n, p0] is at an end), P[Bin(n, p) <= j] >= 1 - level, so p <= cp_upper(j). A relative
    1e-12 (and 1e-9 of e) is allowed for rounding. A smaller z only lowers p, so z is taken
    from the tangent of Phi^-1 at ``level`` (one scalar, no per-count quantile); Phi^-1 is
    convex on [1/2, 1) and the tangent is <= 0 at 1/2, so where z > 0 it lies below Phi^-1.
    Elsewhere (k < 1, k >= n, fractional n, z <= 0) the lower bound is :func:`_cp_floor`. The
    approximation is p0 (the Wilson bound; 1 where k >= n). Both are used only to decide which
    blocks of thresholds to search, never for a value."""
    k = np.asarray(k, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    floor = _cp_floor(k, n, level)
    j = np.floor(k)
    z0 = float(special.ndtri(level))
    with np.errstate(all="ignore"):

        def g(p):
            return (p * p + (1.0 - p) * (1.0 - p)) / np.sqrt(p * (1.0 - p))

        def wilson(c, z):
            return (c + z * z / 2.0 + z * np.sqrt(c * (n - c) / n + z * z / 4.0)) / (n + z * z)

        p0 = wilson(k, z0)
        e = np.maximum(g(j / n), g(p0)) / np.sqrt(n)
        # z <= Phi^-1(level - C e) where z > 0: the tangent at level, z0 - C e / phi(z0)
        z = z0 - e * (
            _BERRY_ESSEEN * (1.0 + 1e-9) * math.sqrt(2.0 * math.pi) * math.exp(z0 * z0 / 2)
        )
        p = wilson(j, z) * (1.0 - 1e-12)
    ok = (j >= 1.0) & (j < n) & (n == np.floor(n)) & (z > 0.0) & np.isfinite(p)
    return np.where(ok, np.maximum(p, floor), floor), np.where(k < n, p0, 1.0)


def argmax_over_thresholds(
    k0: np.ndarray,
    n0: float,
    k1: np.ndarray,
    n1: float,
    level: float,
    objective,
    chunk: int = 4096,
) -> tuple[int, float, float, float]:
    """argmax_j objective(cp_upper(k0[j]), cp_upper(k1[j])) for an objective that decreases
    in both rates (Eq. 1, or the GDP mu), without computing every Clopper-Pearson bound.

    Along a sweep (:func:`.definition.sweep`) the false-positive counts ``k0`` never
    increase and the false-negative counts ``k1`` never decrease, and so do their Clopper-Pearson
    bounds; on a
    block of thresholds j in [lo, hi) the objective is therefore at most
    objective(cp_upper(k0[hi - 1]), cp_upper(k1[lo])), two bounds at the block's ends. Branch
    and bound (:func:`_branch_and_bound`) finds the maximum of the full sweep. The chosen
    index among exact ties is that of :func:`_argmax_in_bound_order` (used as it is when the
    counts are not monotone or a tie is possible). Returns (index, value, fpr_upper, fnr_upper).
    """
    k0 = np.asarray(k0, dtype=np.float64)
    k1 = np.asarray(k1, dtype=np.float64)
    if level < 0.5:
        raise ValueError(f"per-rate level must be >= 0.5, got {level}")
    monotone = bool(np.all(k0[1:] <= k0[:-1]) and np.all(k1[1:] >= k1[:-1]))
    if k0.size > 4 * _LEAF and monotone:
        found = _branch_and_bound(k0, n0, k1, n1, level, objective)
        if found is not None:
            return found
    return _argmax_in_bound_order(k0, n0, k1, n1, level, objective, chunk)


def _branch_and_bound(
    k0: np.ndarray, n0: float, k1: np.ndarray, n1: float, level: float, objective, floor=-np.inf
) -> tuple[int, float, float, float] | None:
    """The unique argmax of :func:`argmax_over_thresholds` over monotone counts (k0 never
    increasing, k1 never decreasing), or None when the maximum is attained at more than one
    index, is not finite, or is below ``floor``.

    Level by level: the exact value at both ends of every live block, the block's bound from
    them, the blocks that can still reach the best exact value split ``_FAN`` ways; blocks of
    at most ``_LEAF`` thresholds are evaluated whole. Few vectorised calls, whatever the size;
    each Clopper-Pearson bound is computed once (memoised by index). The search starts from the
    largest of ``floor`` (a value known to be attained, e.g. by the binned search) and the exact
    values at a few points picked by :func:`_seed_best`; a start only prunes blocks whose bound
    is below a value attained, so the maximum found is the same from any start."""
    size = k0.size
    rates = _RatesAt(k0, n0, k1, n1, level)
    a_at, b_at = rates.a_at, rates.b_at

    starts, ends = _first_blocks(size, 2)
    best_value = max(floor, _seed_best(rates, objective))
    while True:
        # the ends' exact values; the bound: smallest FPR bound at the end, FNR at the start
        best_value, ub, mid = _bound_blocks(rates, objective, starts, ends - 1, best_value)
        keep = ub >= best_value
        starts, ends, mid, ub = starts[keep], ends[keep], mid[keep], ub[keep]
        if int((ends - starts).max()) <= _LEAF:  # the kept blocks whole (keep is never empty)
            whole = np.concatenate([np.arange(s, e) for s, e in zip(starts, ends, strict=True)])
            a, b = rates(whole.astype(np.intp))  # (ends kept on their approximate bound too)
            best_value = max(best_value, float(objective(a, b).max()))
            break
        starts, ends = _split_blocks(starts, ends, mid, ub, best_value, rates.large)
    idx = np.flatnonzero(~np.isnan(a_at))
    val = objective(a_at[idx], b_at[idx])
    at_best = np.flatnonzero(val == best_value)
    if at_best.size != 1:  # a tie (or no finite value)
        return None
    w = int(idx[at_best[0]])
    return w, float(val[at_best[0]]), float(a_at[w]), float(b_at[w])


def _cp_approx(k: np.ndarray, n: float, level: float) -> np.ndarray:
    """A normal approximation of :func:`cp_upper` (the mean of Beta(k + 1, n - k) plus
    ``ndtri(level)`` standard deviations), used only to pick where to evaluate first."""
    m = (k + 1.0) / (n + 1.0)
    sd = np.sqrt(m * (1.0 - m) / (n + 2.0))
    return np.clip(m + special.ndtri(level) * sd, 0.0, 1.0)


def _seed_best(rates, objective, take: int = 8, pool: int = 4096) -> float:
    """The largest exact objective value (``rates``: a :class:`_RatesAt`) at the ``take``
    indices where :func:`_cp_approx` puts the objective highest (among at most ``pool``
    evenly spaced indices), or -inf. Any exact value is a valid start for the branch and
    bound; a value near the maximum prunes most blocks at the first levels. (``pool`` 4096:
    against 16,384 the approximation costs a quarter, 0.5 instead of 1.3 ms per call, and the
    GDP fit at 10^6 runs computes 4,142 exact bounds instead of 4,082.) On large searches
    (:class:`_RatesAt`) -inf: there the exact values at the ``_TOP`` most promising ends of
    each level of :func:`_bound_blocks` give the start value, at no extra cost."""
    if rates.large:
        return -np.inf
    size = rates.k0.size
    idx = np.arange(0, size, max(1, size // pool))
    with np.errstate(all="ignore"):
        approx = objective(
            _cp_approx(rates.k0[idx], rates.n0, rates.level),
            _cp_approx(rates.k1[idx], rates.n1, rates.level),
        )
    approx = np.where(np.isnan(approx), -np.inf, approx)
    if idx.size > take:
        idx = idx[np.argpartition(approx, idx.size - take)[idx.size - take :]]
    with np.errstate(all="ignore"):
        a, b = rates(idx)
        val = objective(a, b)
    best = float(np.max(val))
    return best if np.isfinite(best) else -np.inf


#: Leaf size, fan-out and number of first-level blocks of the branch and bound of
#: :func:`argmax_over_thresholds`.
_LEAF = 16
_FAN = 2
_FIRST_BLOCKS = 16
_MAX_FAN = 8
#: (least, most) parts of a block on large searches (see :func:`_split_blocks`).
_LARGE_FAN = (8, 16)


def _first_blocks(size: int, min_width: int) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends) of the first level's ``_FIRST_BLOCKS`` blocks over ``size`` items."""
    width = max(min_width, -(-size // _FIRST_BLOCKS))
    starts = np.arange(0, size, width)
    return starts, np.minimum(starts + width, size)


def _bound_blocks(rates, objective, starts: np.ndarray, end_points: np.ndarray, best: float):
    """One level of the branch and bound: each block's bound objective(FPR bound at its last
    point, FNR bound at its first) (``rates``: a :class:`_RatesAt`); returns (the best exact
    value attained so far, the blocks' bounds, the mean of each block's ends' approximate
    values). The caller drops the blocks whose bound is below the best value.

    Exact Clopper-Pearson bounds are computed only where they decide something. A block whose
    bound at the rates' certified lower bounds (:func:`_cp_lower`; the objective falls in
    both rates, so this is at least its exact bound) is below the best exact value is dropped
    as it would be on its exact bound, and that (certified) bound is returned. A block whose
    bound at the rates' approximations (the Wilson bounds of :func:`_cp_lower`, about half a
    count from the exact ones at 10^5 of 5 x 10^5) exceeds the best value by
    ``_SURE`` (relative) is kept without exact bounds, on that approximate bound (a wrong
    approximation only keeps a block that could have gone). The others get the exact bounds
    at their ends, and their exact values raise the best value; first of all, so do the exact
    values at the ``_TOP`` ends with the highest approximate value. Which blocks are dropped is
    therefore decided by exact values attained and bounds at least the exact ones, so the
    maximum found is the same as with every bound exact. On searches over fewer than
    ``_CHEAP_SIZE`` points, or with fewer than ``_CHEAP_MIN`` ends not computed yet, every end
    is computed exactly (the means are then of exact values)."""
    nb = starts.size
    pts = np.concatenate([starts, end_points])
    if not rates.large or np.count_nonzero(np.isnan(rates.a_at[pts])) < _CHEAP_MIN:
        a, b = rates(pts)
        with np.errstate(all="ignore"):
            val = objective(a, b)
            best = max(best, float(np.max(val)))
            return best, objective(a[nb:], b[:nb]), (val[:nb] + val[nb:]) / 2.0
    a_lo, b_lo, a_apx, b_apx = rates.cheap(pts)
    with np.errstate(all="ignore"):
        ub = objective(a_apx[nb:], b_apx[:nb])
        ub_lo = objective(a_lo[nb:], b_lo[:nb])
        guess = objective(a_apx, b_apx)
    mid = (guess[:nb] + guess[nb:]) / 2.0
    if _TOP and pts.size > _TOP:  # the most promising ends first (values attained)
        guess = np.where(np.isnan(guess), -np.inf, guess)
        top = pts[np.argpartition(guess, pts.size - _TOP)[pts.size - _TOP :]]
        with np.errstate(all="ignore"):
            best = max(best, float(np.max(objective(*rates(top)))))
    decided = np.zeros(nb, dtype=bool)  # dropped on the certified bound, or bounded exactly
    while True:  # the best value only rises, so this ends (each block computed at most once)
        drop = ~decided & (ub_lo < best)
        ub[drop] = ub_lo[drop]
        decided |= drop
        sure = np.isfinite(ub) & (ub > best + _SURE * max(1.0, abs(best)))
        need = ~decided & ~sure
        if not need.any():
            return best, ub, mid
        decided |= need
        m = int(np.count_nonzero(need))
        a, b = rates(np.concatenate([starts[need], end_points[need]]))
        with np.errstate(all="ignore"):
            ub[need] = objective(a[m:], b[:m])
            best = max(best, float(np.max(objective(a, b))))


#: Relative margin by which a block's approximate bound must exceed the best exact value for
#: :func:`_bound_blocks` to keep it without exact bounds (speed only), and the number of most
#: promising ends computed exactly first at each level.
_SURE = 1e-5
_TOP = 4
#: Below this many ends without an exact bound, :func:`_bound_blocks` computes them all exactly
#: (a few Beta quantiles cost less than the fixed cost of the cheap bounds' NumPy calls), and
#: :class:`_RatesAt` computes fewer points without looking for equal counts.
_CHEAP_MIN = 32
#: :func:`_bound_blocks` uses the cheap bounds on searches over at least this many points (on
#: smaller ones, e.g. sweeps of 10^4 runs, they discard few blocks and cost more than they save).
_CHEAP_SIZE = 16384


class _RatesAt:
    """Clopper-Pearson bounds of the counts ``k0`` (of ``n0``) and ``k1`` (of ``n1``) at given
    indices, each computed once (memoised: NaN marks one not computed yet)."""

    def __init__(self, k0: np.ndarray, n0: float, k1: np.ndarray, n1: float, level: float):
        self.k0, self.n0, self.k1, self.n1, self.level = k0, n0, k1, n1, level
        self.a_at = np.full(k0.size, np.nan)
        self.b_at = np.full(k0.size, np.nan)
        self.large = k0.size >= _CHEAP_SIZE

    def __call__(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        new = idx[np.isnan(self.a_at[idx])]
        if new.size:
            new = np.sort(new)
            new = new[np.append(True, new[1:] != new[:-1])]
            # from _CHEAP_MIN points on, one Beta quantile per run of equal counts (neighbouring
            # thresholds of a sweep share one of their two counts) and both rates in one call:
            # the same values as one call per index and rate
            k0, k1 = self.k0[new], self.k1[new]
            if new.size < _CHEAP_MIN:
                self.a_at[new] = cp_upper(k0, self.n0, self.level)
                self.b_at[new] = cp_upper(k1, self.n1, self.level)
                return self.a_at[idx], self.b_at[idx]
            first0 = np.append(True, k0[1:] != k0[:-1])
            first1 = np.append(True, k1[1:] != k1[:-1])
            k = np.concatenate([k0[first0], k1[first1]])
            m = int(np.count_nonzero(first0))
            n = np.empty(k.size)
            n[:m], n[m:] = self.n0, self.n1
            up = cp_upper(k, n, self.level)
            self.a_at[new] = up[:m][np.cumsum(first0) - 1]
            self.b_at[new] = up[m:][np.cumsum(first1) - 1]
        return self.a_at[idx], self.b_at[idx]

    def cheap(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """:func:`_cp_lower` of the counts at ``idx``, no exact bound computed: (FPR lower
        bounds, FNR lower bounds, FPR approximations, FNR approximations)."""
        m = idx.size
        k = np.concatenate([self.k0[idx], self.k1[idx]])
        n = np.empty(2 * m)
        n[:m], n[m:] = self.n0, self.n1
        lower, approx = _cp_lower(k, n, self.level)
        return lower[:m], lower[m:], approx[:m], approx[m:]


def _split_blocks(
    starts: np.ndarray,
    ends: np.ndarray,
    mid: np.ndarray,
    ub: np.ndarray,
    best: float,
    large: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """The next level of the branch and bound: each block [start, end) split into parts of
    (nearly) equal width. The number of parts only sets the speed, never the result: a block
    whose bound ``ub`` exceeds ``best`` by k times the margin of its ends' mean value ``mid``
    below ``best`` is split about k ways (the bound's excess shrinks with the width), at least
    ``_FAN`` and at most ``_MAX_FAN`` ways; on ``large`` searches (:class:`_RatesAt`, where
    :func:`_bound_blocks` bounds most blocks without Beta quantiles, so that a level costs
    mostly its fixed NumPy calls) ``_LARGE_FAN`` ways: fewer, wider levels."""
    fan, max_fan = _LARGE_FAN if large else (_FAN, _MAX_FAN)
    width = ends - starts
    with np.errstate(divide="ignore", invalid="ignore"):
        parts = np.ceil((ub - mid) / (best - mid))
    parts = np.where(np.isfinite(parts) & (mid < best), parts, fan)
    parts = np.minimum(np.clip(parts, fan, max_fan).astype(np.intp), np.maximum(width, 1))
    block = np.repeat(np.arange(starts.size), parts)
    part = np.arange(block.size) - np.repeat(np.cumsum(parts) - parts, parts)
    sub_starts = starts[block] + (width[block] * part) // parts[block]
    sub_ends = starts[block] + (width[block] * (part + 1)) // parts[block]
    nonempty = sub_ends > sub_starts
    return sub_starts[nonempty], sub_ends[nonempty]


def _unique_argmax(
    k0: np.ndarray, n0: float, k1: np.ndarray, n1: float, level: float, objective, floor=-np.inf
) -> tuple[int, float, float, float] | None:
    """:func:`_branch_and_bound` on monotone counts of any size (small ones evaluated whole):
    the unique argmax, or None on a tie or when no value is finite (or, searched by branch and
    bound, when the maximum is below ``floor``; the caller rejects that case either way)."""
    if k0.size > 4 * _LEAF:
        return _branch_and_bound(k0, n0, k1, n1, level, objective, floor)
    a = cp_upper(k0, n0, level)
    b = cp_upper(k1, n1, level)
    val = objective(a, b)
    best = float(val.max())
    at_best = np.flatnonzero(val == best)
    if at_best.size != 1:
        return None
    w = int(at_best[0])
    return w, float(val[w]), float(a[w]), float(b[w])


def binned_argmax(
    score: np.ndarray,
    member: np.ndarray,
    level: float,
    objective,
    eval_n0: int | None = None,
    eval_n1: int | None = None,
    codes: np.ndarray | None = None,
    score_range: tuple[float, float] | None = None,
) -> tuple[float, int, int, float, float, float, int, int] | None:
    """The threshold of :func:`.definition.sweep` that
    :func:`argmax_over_thresholds` picks, found without sorting all scores: (threshold,
    false_pos, false_neg, value, fpr_upper, fnr_upper, other_false_pos, other_false_neg), or
    None where that search must decide (a tie, no finite value, scores that cannot be binned).
    With ``codes`` (:func:`.bound.stratified_split` as int8 codes: the membership plus 2 for
    a score in the group), the sweep is that of the scores in the group (the held-out selection
    part), and the last two entries are the error counts of the other scores at the chosen
    threshold (the evaluation part; else 0, 0). ``score_range``: the scores' (min, max) when
    the caller has them already.

    The scores are counted into equal-width bins of the score range (one pass; the bin index is
    non-decreasing in the score, so a bin holds the thresholds between two values). At the end
    of each bin the error counts are exact (cumulative bin counts) and are those of a threshold
    of the sweep, the last score at or below it; a threshold inside bin ``b`` has a
    false-positive count at least the one at the bin's end and a false-negative count at least
    the one at its start, so the bound of :func:`argmax_over_thresholds` applies to runs of
    bins: branch and bound over bins, as over thresholds (:func:`_search_bins`). Only the scores
    in the bins that can still hold the maximum are sorted (:func:`_kept_scores`), and the
    maximum among their thresholds (and the threshold -inf) is the maximum of the whole sweep;
    a tie there hands back to the full sweep, so the choice among ties is unchanged.
    ``eval_n0``/``eval_n1`` project the counts onto those sample sizes, as the selection of a
    held-out threshold does (:func:`_project`)."""
    if score.size < _BINNED_MIN:
        return None
    binned = _bin_scores(score, member, codes, score_range)
    if binned is None:
        return None
    code, shift, counts = binned
    c0, c1 = counts[:, -2], counts[:, -1]
    cum0 = np.concatenate([[0], np.cumsum(c0)])
    cum1 = np.concatenate([[0], np.cumsum(c1)])
    n0, n1 = int(cum0[-1]), int(cum1[-1])
    if n0 == 0 or n1 == 0:
        return None
    # Error counts at the end of bins 0..nbins-1 (point p is the end of bin p - 1; point 0 is
    # the threshold -inf), projected as the sweep's would be.
    big_k0, big_k1 = n0 - cum0, cum1
    k0, m0, k1, m1 = _project(big_k0, n0, big_k1, n1, eval_n0, eval_n1)
    rates = _RatesAt(k0, m0, k1, m1, level)
    starts, best = _search_bins(rates, objective, cum0, cum1)
    if not np.isfinite(best):
        return None
    kept = np.zeros(counts.shape[0], dtype=bool)
    kept[starts] = True
    cs, cc, other_s, other_c = _kept_scores(score, code, shift, kept, codes is not None)
    # The kept scores' thresholds and their global counts.
    last = np.flatnonzero(np.append(cs[1:] != cs[:-1], True))
    in_bin = cc[last] >> shift
    cand1 = np.cumsum(cc & 1)[last]  # kept members at or below the threshold
    cand0 = last + 1 - cand1
    kept1 = np.concatenate([[0], np.cumsum(np.where(kept, c1, 0))])  # kept members before bin
    kept0 = np.concatenate([[0], np.cumsum(np.where(kept, c0, 0))])
    fn = np.concatenate([[0], big_k1[in_bin] + cand1 - kept1[in_bin]])
    fp = np.concatenate([[n0], big_k0[in_bin] - cand0 + kept0[in_bin]])
    ck0, _, ck1, _ = _project(fp, n0, fn, n1, eval_n0, eval_n1)
    found = _unique_argmax(ck0, m0, ck1, m1, level, objective, floor=best)
    if found is None or found[1] < best:
        return None
    j, value, a_j, b_j = found
    threshold = -np.inf if j == 0 else float(cs[last[j - 1]])
    other_fp = other_fn = 0
    if codes is not None:
        b = None if j == 0 else int(in_bin[j - 1])
        other_fp, other_fn = _other_counts(counts, other_s, other_c, shift, b, threshold)
    return threshold, int(fp[j]), int(fn[j]), value, a_j, b_j, other_fp, other_fn


def _other_counts(
    counts: np.ndarray,
    other_s: np.ndarray,
    other_c: np.ndarray,
    shift: int,
    b: int | None,
    threshold: float,
) -> tuple[int, int]:
    """(false positives, false negatives) of the scores outside the group (the evaluation part)
    at ``threshold``, in bin ``b`` (None: the threshold -inf): whole bins by their ``counts``
    (of :func:`_bin_scores`), the threshold's bin by its scores ``other_s`` with codes
    ``other_c`` (the bin is kept, as it holds the maximum, so its scores are at hand)."""
    e0, e1 = counts[:, 0], counts[:, 1]
    if b is None:
        return int(e0.sum()), 0
    here = (other_c >> shift) == b
    above = other_s[here] > threshold
    is_member = (other_c[here] & 1).astype(bool)
    other_fp = int(e0[b + 1 :].sum()) + int(np.count_nonzero(above & ~is_member))
    other_fn = int(e1[:b].sum()) + int(np.count_nonzero(~above & is_member))
    return other_fp, other_fn


def _bin_scores(
    score: np.ndarray,
    member: np.ndarray,
    codes: np.ndarray | None,
    score_range: tuple[float, float] | None,
) -> tuple[np.ndarray, int, np.ndarray] | None:
    """The scores counted into ``_BINS`` equal-width bins of their range, for
    :func:`binned_argmax`: (one code per score: its bin shifted left by ``shift``, plus the
    group bit of ``codes`` and the membership bit; ``shift``; the counts per bin and low bits,
    shape (bins, 2**shift)), or None when the range is empty or not finite."""
    lo, hi = (float(score.min()), float(score.max())) if score_range is None else score_range
    span = hi - lo
    nbins = _BINS
    scale = (nbins - 0.5) / span  # (score - lo) * scale < nbins, rounding included
    if not (np.isfinite(span) and span > 0.0 and np.isfinite(scale)):
        return None
    pos = score - lo
    pos *= scale
    if pos.itemsize == np.dtype(np.intp).itemsize:
        # the bin index cast in place, into the same buffer (one fresh 8-byte array, not two:
        # in the benchmark a fresh array costs its page faults); a 1-D cast between equal item
        # sizes writes each element after reading it
        code = pos.view(np.intp)
        np.copyto(code, pos, casting="unsafe")
    else:
        code = pos.astype(np.intp)
    # code: bin, then (with codes) the group bit, then the membership bit
    shift = 1 if codes is None else 2
    code <<= shift
    code += member if codes is None else codes
    counts = np.bincount(code, minlength=nbins << shift).reshape(nbins, 1 << shift)
    return code, shift, counts


def _project(
    k0: np.ndarray, n0: int, k1: np.ndarray, n1: int, eval_n0: int | None, eval_n1: int | None
) -> tuple[np.ndarray, float, np.ndarray, float]:
    """(k0, n0, k1, n1) as floats, or with ``eval_n0``/``eval_n1`` the rates k0/n0 and k1/n1
    as counts of those sample sizes (the Clopper-Pearson widths of the later bound)."""
    if eval_n0 is not None:
        return k0 * (eval_n0 / n0), eval_n0, k1 * (eval_n1 / n1), eval_n1
    return k0.astype(np.float64), n0, k1.astype(np.float64), n1


def _search_bins(
    rates: _RatesAt, objective, cum0: np.ndarray, cum1: np.ndarray
) -> tuple[np.ndarray, float]:
    """The branch and bound of :func:`binned_argmax` over bins: (the first bins of the blocks
    of one bin that can still hold the maximum, the best exact value attained). ``cum0`` and
    ``cum1``: the cumulative non-member and member counts at the bins' ends; a block with no
    score is dropped."""
    # Blocks of bins [start, end): thresholds with false positives >= k0[end] and false
    # negatives >= k1[start]; the exact values at points start and end are attained.
    starts, ends = _first_blocks(cum0.size - 1, 1)
    best = _seed_best(rates, objective)
    while True:
        best, ub, mid = _bound_blocks(rates, objective, starts, ends, best)
        keep = (ub >= best) & (cum0[ends] + cum1[ends] > cum0[starts] + cum1[starts])
        starts, ends = starts[keep], ends[keep]
        if starts.size == 0 or int((ends - starts).max()) == 1:
            break
        starts, ends = _split_blocks(starts, ends, mid[keep], ub[keep], best, rates.large)
    return starts, best


def _kept_scores(
    score: np.ndarray, code: np.ndarray, shift: int, kept: np.ndarray, grouped: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]:
    """The scores in the ``kept`` bins, sorted, and their codes (of :func:`_bin_scores`); with
    ``grouped``, those of the group apart from the others': (scores, codes, other scores,
    other codes; the last two None without ``grouped``)."""
    # the positions of the kept bins' scores, then the scores (a few thousand of 10^6): an
    # index array, about twice as fast as selecting with the boolean mask twice
    take = np.flatnonzero(np.take(np.repeat(kept, 1 << shift), code))
    cs, cc = score[take], code[take]
    order = np.argsort(cs, kind="stable")
    cs, cc = cs[order], cc[order]
    if not grouped:
        return cs, cc, None, None
    # the other part's scores in the kept bins, for its counts at the end
    in_group = (cc & 2).astype(bool)
    return cs[in_group], cc[in_group], cs[~in_group], cc[~in_group]


#: Number of equal-width bins, and the least number of scores, of :func:`binned_argmax`.
_BINS = 16384
_BINNED_MIN = 50000


def _argmax_in_bound_order(
    k0: np.ndarray,
    n0: float,
    k1: np.ndarray,
    n1: float,
    level: float,
    objective,
    chunk: int = 4096,
) -> tuple[int, float, float, float]:
    """:func:`argmax_over_thresholds` for any counts: thresholds visited in decreasing order
    of ``objective`` at :func:`_cp_floor` (an upper bound on their value), stopping once no
    unvisited threshold can beat the best exact value; among exact ties, the first in that
    order."""
    ub = objective(_cp_floor(k0, n0, level), _cp_floor(k1, n1, level))
    order = np.argsort(-ub, kind="stable")
    best = (-1, -np.inf, 1.0, 1.0)
    for start in range(0, order.size, chunk):
        idx = order[start : start + chunk]
        if best[0] >= 0 and ub[idx[0]] <= best[1]:
            break
        a = cp_upper(k0[idx], n0, level)
        b = cp_upper(k1[idx], n1, level)
        val = objective(a, b)
        i = int(np.argmax(val))
        if best[0] < 0 or val[i] > best[1]:
            best = (int(idx[i]), float(val[i]), float(a[i]), float(b[i]))
    return best
