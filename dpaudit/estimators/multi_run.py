"""Multi-run audits: one target per training run, FPR/FNR of a thresholded score, Eq. 1.

The distinguishing game is played once per run (Annamalai, Balle, Hayes, De Cristofaro, "To
Shuffle or not to Shuffle", Fig. 2): the target is in the training set (``membership`` 1) or
not (0), the run's score is thresholded, and the false positive rate alpha (non-members called
IN) and false negative rate beta (members called OUT) are bounded from above by one-sided
Clopper-Pearson intervals. Any (epsilon, delta)-DP mechanism keeps (alpha, beta) in the privacy
region of Kairouz et al. (their Section 3.2), so

    epsilon >= max{ ln((1 - alpha_up - delta) / beta_up), ln((1 - beta_up - delta) / alpha_up), 0 }

(their Eq. 1) whenever alpha_up >= alpha and beta_up >= beta. Both upper bounds must hold at
once, so each rate is bounded at level ``1 - (1 - confidence) / 2`` (a union bound over the two
rates): the bound then holds with probability at least ``confidence``. That per-rate level is
also the upper end of a two-sided ``confidence`` interval; the paper's "95% Clopper-Pearson"
reading with one-sided 95% per rate corresponds to ``confidence=0.90`` here (Annamalai et al. §3.2).

Threshold choice (the paper's Appendix B, Algorithm 5, sweeps every threshold with one sort and
reports the maximum on the same runs; it calls this standard but notes that a held-out set "is
the easiest method to ensure a technically valid lower bound", §3.3):

``same_data``  Algorithm 5: the best threshold on the evaluated runs. Uncorrected, ``valid``
               False (the maximum over thresholds is not covered by the confidence level).
``heldout``    the threshold is chosen on a random, membership-stratified part of the runs and
               the bound is computed on the other part only. ``valid`` True.

:func:`threshold_audit` with ``estimate="gdp"`` is the Gaussian-DP fit of Nasr et al. 2023
("Tight auditing of DP-SGD"): the point (alpha_up, beta_up) is mapped to
mu = Phi^-1(1 - alpha_up) - Phi^-1(beta_up) and reported as the epsilon(delta) of mu-GDP. It
assumes the mechanism's trade-off curve is Gaussian; when it is not, it can exceed the true
epsilon (private selection's max-of-K, and randomized response in tests/test_multi_run.py), so
it is an estimate, never a valid bound.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
from scipy import special

from dpaudit.accounting.gaussian import gdp_epsilon, gdp_mu_from_rates
from dpaudit.estimators import selection_rules as rules

SELECTIONS = ("same_data", "heldout")


# --------------------------------------------------------------------------------------------
# Input checks
# --------------------------------------------------------------------------------------------


def check_level(confidence: float, delta: float) -> None:
    """Reject a confidence outside (0, 1) or a delta outside [0, 1)."""
    if not isinstance(confidence, int | float) or not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence!r}")
    if not isinstance(delta, int | float) or not 0.0 <= delta < 1.0:
        raise ValueError(f"delta must lie in [0, 1), got {delta!r}")


def check_scores(score: np.ndarray, membership: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """1-D float scores and 0/1 membership with at least one member and one non-member."""
    score, membership, _ = _check_scores_range(score, membership)
    return score, membership


def _check_scores_range(
    score: np.ndarray, membership: np.ndarray
) -> tuple[np.ndarray, np.ndarray, tuple[float, float]]:
    """:func:`check_scores`, and the scores' (min, max), which its finiteness check computes."""
    score = np.asarray(score, dtype=np.float64).ravel()
    membership = np.asarray(membership).ravel()
    if score.shape != membership.shape:
        raise ValueError(f"score has {score.size} entries but membership has {membership.size}")
    if score.size == 0:
        raise ValueError("no trials: the score array is empty")
    # every score is finite iff the smallest and the largest are (NaN propagates through both)
    lo, hi = float(score.min()), float(score.max())
    if not (np.isfinite(lo) and np.isfinite(hi)):
        bad = ~np.isfinite(score)
        raise ValueError(
            f"score is not finite (NaN or inf) at trial {int(np.argmax(bad))} "
            f"({int(bad.sum())} non-finite in all)"
        )
    if membership.dtype in (np.int8, np.uint8, np.bool_):  # one byte reduction (-1 reads 255)
        if membership.view(np.uint8).max() > 1:
            raise ValueError("membership must be 0 or 1")
    elif not ((membership == 0) | (membership == 1)).all():
        raise ValueError("membership must be 0 or 1")
    membership = membership.astype(np.int8, copy=False)
    n1 = int(np.count_nonzero(membership))
    if n1 == 0:
        raise ValueError("no members: every trial has membership 0, so the FNR is undefined")
    if n1 == membership.size:
        raise ValueError("no non-members: every trial has membership 1, so the FPR is undefined")
    return score, membership, (lo, hi)


# --------------------------------------------------------------------------------------------
# Clopper-Pearson and Eq. 1
# --------------------------------------------------------------------------------------------


def rate_level(confidence: float) -> float:
    """Per-rate one-sided level so that the FPR and FNR bounds hold jointly at ``confidence``."""
    return 1.0 - (1.0 - confidence) / 2.0


def cp_upper(k: np.ndarray | float, n: np.ndarray | float, level: float) -> np.ndarray:
    """One-sided Clopper-Pearson upper bound on a binomial rate: P[rate <= bound] >= level.

    The ``level`` quantile of Beta(k + 1, n - k), and 1 when k = n (Clopper and Pearson 1934).
    ``k`` may be fractional (used to project counts onto another sample size).
    """
    k = np.asarray(k, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        up = special.betaincinv(k + 1.0, n - k, level)
    return np.where(k >= n, 1.0, up)


def epsilon_from_rates(
    fpr_upper: np.ndarray | float, fnr_upper: np.ndarray | float, delta: float
) -> np.ndarray:
    """Eq. 1: max{ln((1 - a - delta)/b), ln((1 - b - delta)/a), 0} for upper bounds a, b."""
    a = np.asarray(fpr_upper, dtype=np.float64)
    b = np.asarray(fnr_upper, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        t1 = np.log(np.maximum(1.0 - a - delta, 0.0)) - np.log(b)
        t2 = np.log(np.maximum(1.0 - b - delta, 0.0)) - np.log(a)
    out = np.maximum(
        np.maximum(np.nan_to_num(t1, nan=0.0, neginf=0.0), np.nan_to_num(t2, nan=0.0, neginf=0.0)),
        0.0,
    )
    return out


def epsilon_from_counts(
    false_pos: int,
    n_nonmembers: int,
    false_neg: int,
    n_members: int,
    delta: float,
    confidence: float = 0.95,
) -> tuple[float, float, float]:
    """Lower bound at joint ``confidence`` from error counts: (epsilon, fpr_upper, fnr_upper)."""
    check_level(confidence, delta)
    for name, k, n in (
        ("false positives", false_pos, n_nonmembers),
        ("false negatives", false_neg, n_members),
    ):
        if not 0 <= k <= n or n <= 0:
            raise ValueError(f"need 0 <= {name} <= trials and trials > 0, got {k} of {n}")
    lvl = rate_level(confidence)
    a = float(cp_upper(false_pos, n_nonmembers, lvl))
    b = float(cp_upper(false_neg, n_members, lvl))
    return float(epsilon_from_rates(a, b, delta)), a, b


# --------------------------------------------------------------------------------------------
# Threshold sweep (Algorithm 5)
# --------------------------------------------------------------------------------------------


@dataclass
class Sweep:
    """Error counts of the rule "IN iff score > threshold" at every distinct threshold.

    ``threshold[j]`` runs over ``-inf`` (everything IN) and each distinct score in increasing
    order; ``false_pos[j]`` counts non-members with score > threshold, ``false_neg[j]`` members
    with score <= threshold. Ties are never split: a threshold sits between distinct scores.
    """

    threshold: np.ndarray
    false_pos: np.ndarray
    false_neg: np.ndarray
    n_members: int
    n_nonmembers: int


def sweep(score: np.ndarray, membership: np.ndarray) -> Sweep:
    """All thresholds from sorted scores (Algorithm 5, vectorised): the members' and the
    non-members' scores are sorted apart (a plain sort, several times faster than a stable
    argsort of all scores) and merged; the error counts are cumulative sums."""
    score, membership = check_scores(score, membership)
    is_member = membership == 1
    s1 = np.sort(score[is_member])  # members' scores
    s0 = np.sort(score[~is_member])  # non-members' scores
    n1, n0 = s1.size, s0.size
    # All scores in increasing order: a stable argsort of the two sorted runs is one linear
    # merge (Timsort), and tells which run, members or not, each score came from.
    both = np.concatenate([s0, s1])
    order = np.argsort(both, kind="stable")
    s = both[order]
    # Last position of each run of equal scores: thresholds between distinct values only.
    last = np.flatnonzero(np.append(s[1:] != s[:-1], True))
    distinct = s[last]
    fn = np.cumsum(order >= n0)[last]  # members at or below the threshold
    fp = n0 - (last + 1 - fn)  # non-members strictly above
    return Sweep(
        threshold=np.concatenate([[-np.inf], distinct]),
        false_pos=np.concatenate([[n0], fp]),
        false_neg=np.concatenate([[0], fn]),
        n_members=n1,
        n_nonmembers=n0,
    )


def sweep_epsilons(sw: Sweep, delta: float, level: float) -> tuple[np.ndarray, ...]:
    """(epsilon, fpr_upper, fnr_upper) at every threshold of ``sw`` (Eq. 1 per threshold)."""
    a = cp_upper(sw.false_pos, sw.n_nonmembers, level)
    b = cp_upper(sw.false_neg, sw.n_members, level)
    return epsilon_from_rates(a, b, delta), a, b


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

    Along a sweep (:func:`sweep`) the false-positive counts ``k0`` never increase and the
    false-negative counts ``k1`` never decrease, and so do their Clopper-Pearson bounds; on a
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


def _binned_argmax(
    score: np.ndarray,
    member: np.ndarray,
    level: float,
    objective,
    eval_n0: int | None = None,
    eval_n1: int | None = None,
    codes: np.ndarray | None = None,
    score_range: tuple[float, float] | None = None,
) -> tuple[float, int, int, float, float, float, int, int] | None:
    """The threshold of :func:`sweep` that :func:`argmax_over_thresholds` picks, found without
    sorting all scores: (threshold, false_pos, false_neg, value, fpr_upper, fnr_upper,
    other_false_pos, other_false_neg), or None where that search must decide (a tie, no finite
    value, scores that cannot be binned). With ``codes`` (:func:`_split_codes`: int8, the
    membership plus 2 for a score in the group), the sweep is that of the scores in the group
    (the held-out selection part), and the last two entries are the error counts of the other
    scores at the chosen threshold (the evaluation part; else 0, 0). ``score_range``: the
    scores' (min, max) when the caller has them already.

    The scores are counted into equal-width bins of the score range (one pass; the bin index is
    non-decreasing in the score, so a bin holds the thresholds between two values). At the end
    of each bin the error counts are exact (cumulative bin counts) and are those of a threshold
    of the sweep, the last score at or below it; a threshold inside bin ``b`` has a
    false-positive count at least the one at the bin's end and a false-negative count at least
    the one at its start, so the bound of :func:`argmax_over_thresholds` applies to runs of
    bins: branch and bound over bins, as over thresholds. Only the scores in the bins that can
    still hold the maximum are sorted, and the maximum among their thresholds (and the
    threshold -inf) is the maximum of the whole sweep; a tie there hands back to the full
    sweep, so the choice among ties is unchanged. ``eval_n0``/``eval_n1`` project the counts as
    :func:`_maximiser` does."""
    n = score.size
    if n < _BINNED_MIN:
        return None
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
    c0, c1 = counts[:, -2], counts[:, -1]
    cum0 = np.concatenate([[0], np.cumsum(c0)])
    cum1 = np.concatenate([[0], np.cumsum(c1)])
    n0, n1 = int(cum0[-1]), int(cum1[-1])
    if n0 == 0 or n1 == 0:
        return None
    # Error counts at the end of bins 0..nbins-1 (point p is the end of bin p - 1; point 0 is
    # the threshold -inf), projected as the sweep's would be.
    big_k0, big_k1 = n0 - cum0, cum1
    if eval_n0 is not None:
        k0, m0 = big_k0 * (eval_n0 / n0), eval_n0
        k1, m1 = big_k1 * (eval_n1 / n1), eval_n1
    else:
        k0, m0, k1, m1 = big_k0.astype(np.float64), n0, big_k1.astype(np.float64), n1
    rates = _RatesAt(k0, m0, k1, m1, level)

    # Blocks of bins [start, end): thresholds with false positives >= k0[end] and false
    # negatives >= k1[start]; the exact values at points start and end are attained.
    starts, ends = _first_blocks(nbins, 1)
    best = _seed_best(rates, objective)
    while True:
        best, ub, mid = _bound_blocks(rates, objective, starts, ends, best)
        keep = (ub >= best) & (cum0[ends] + cum1[ends] > cum0[starts] + cum1[starts])
        starts, ends = starts[keep], ends[keep]
        if starts.size == 0 or int((ends - starts).max()) == 1:
            break
        starts, ends = _split_blocks(starts, ends, mid[keep], ub[keep], best, rates.large)
    if not np.isfinite(best):
        return None
    # The scores in the kept bins, sorted; their thresholds' global counts.
    kept = np.zeros(nbins, dtype=bool)
    kept[starts] = True
    # the positions of the kept bins' scores, then the scores (a few thousand of 10^6): an
    # index array, about twice as fast as selecting with the boolean mask twice
    take = np.flatnonzero(np.take(np.repeat(kept, 1 << shift), code))
    cs, cc = score[take], code[take]
    order = np.argsort(cs, kind="stable")
    cs, cc = cs[order], cc[order]
    if codes is not None:  # the other part's scores in the kept bins, for its counts at the end
        in_group = (cc & 2).astype(bool)
        other_s, other_c = cs[~in_group], cc[~in_group]
        cs, cc = cs[in_group], cc[in_group]
    last = np.flatnonzero(np.append(cs[1:] != cs[:-1], True))
    in_bin = cc[last] >> shift
    cand1 = np.cumsum(cc & 1)[last]  # kept members at or below the threshold
    cand0 = last + 1 - cand1
    kept1 = np.concatenate([[0], np.cumsum(np.where(kept, c1, 0))])  # kept members before bin
    kept0 = np.concatenate([[0], np.cumsum(np.where(kept, c0, 0))])
    fn = np.concatenate([[0], big_k1[in_bin] + cand1 - kept1[in_bin]])
    fp = np.concatenate([[n0], big_k0[in_bin] - cand0 + kept0[in_bin]])
    if eval_n0 is not None:
        ck0, ck1 = fp * (eval_n0 / n0), fn * (eval_n1 / n1)
    else:
        ck0, ck1 = fp.astype(np.float64), fn.astype(np.float64)
    found = _unique_argmax(ck0, m0, ck1, m1, level, objective, floor=best)
    if found is None or found[1] < best:
        return None
    j, value, a_j, b_j = found
    threshold = -np.inf if j == 0 else float(cs[last[j - 1]])
    other_fp = other_fn = 0
    if codes is not None:  # the other part: whole bins by their counts, the threshold's bin by
        e0, e1 = counts[:, 0], counts[:, 1]  # its scores (the bin is kept: it holds the max)
        if j == 0:
            other_fp = int(e0.sum())
        else:
            b = int(in_bin[j - 1])
            here = (other_c >> shift) == b
            above = other_s[here] > threshold
            is_member = (other_c[here] & 1).astype(bool)
            other_fp = int(e0[b + 1 :].sum()) + int(np.count_nonzero(above & ~is_member))
            other_fn = int(e1[:b].sum()) + int(np.count_nonzero(~above & is_member))
    return threshold, int(fp[j]), int(fn[j]), value, a_j, b_j, other_fp, other_fn


#: Number of equal-width bins, and the least number of scores, of :func:`_binned_argmax`.
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


# --------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------


@dataclass
class MultiRunResult:
    """One row of the audit table for a multi-run estimator."""

    selection: str
    epsilon: float
    valid: bool
    threshold: float
    fpr_upper: float
    fnr_upper: float
    false_pos: int
    false_neg: int
    n_members: int
    n_nonmembers: int
    n_select: int
    confidence: float
    rate_confidence: float
    mu: float | None = None

    def as_row(self) -> dict:
        return asdict(self)


def stratified_split(
    membership: np.ndarray, select_fraction: float, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """(selection indices, evaluation indices): a seeded random split within each class."""
    chosen = _split_mask(np.asarray(membership), select_fraction, seed)
    return np.flatnonzero(chosen), np.flatnonzero(~chosen)  # both sorted, as before


def _split_mask(membership: np.ndarray, select_fraction: float, seed: int) -> np.ndarray:
    """The selection part of :func:`stratified_split` as a boolean mask."""
    return _split_codes(membership, select_fraction, seed) >= 2


def _split_codes(membership: np.ndarray, select_fraction: float, seed: int) -> np.ndarray:
    """The split of :func:`stratified_split` as one int8 code per run: 1 for a member, plus 2
    in the selection part (so 0 / 1 evaluation non-member / member, 2 / 3 selection).

    Per class (non-members first, then members, from one seeded generator) the class's
    positions are shuffled and the first ``round(select_fraction * size)`` are chosen. The
    positions are shuffled in place (``Generator.shuffle``): ``Generator.permutation`` of a
    1-D array copies it and shuffles the copy with the same draws, so the split is the same
    without the copy."""
    if not 0.0 < select_fraction < 1.0:
        raise ValueError(f"select_fraction must lie in (0, 1), got {select_fraction!r}")
    rng = np.random.default_rng(seed)
    is_member = (membership == 1).ravel()
    classes = (np.flatnonzero(membership == 0), np.flatnonzero(is_member))
    codes = is_member.view(np.int8)  # a fresh array: 1 for a member, 0 otherwise
    for cls, idx in enumerate(classes):
        rng.shuffle(idx)
        k = int(round(select_fraction * idx.size))
        if k < 1 or k >= idx.size:
            raise ValueError(
                f"heldout split leaves no {'members' if cls else 'non-members'} on one side "
                f"({idx.size} in all, select_fraction {select_fraction})"
            )
        codes[idx[:k]] = cls + 2
    return codes


def threshold_rule(selection: str, select_fraction: float, split_seed: int) -> rules.Strategy:
    """The selection strategy (:mod:`.selection_rules`) behind a selection name: ``same_data``
    is the uncorrected maximum over every threshold (filled in by the caller), ``heldout`` a
    split."""
    if selection == "same_data":
        return rules.Uncorrected(())
    if selection == "heldout":
        return rules.Split(split_seed, select_fraction)
    raise ValueError(f"unknown selection {selection!r}; allowed: {list(SELECTIONS)}")


def _maximiser(sw: Sweep, objective, eval_n1: int | None = None, eval_n0: int | None = None):
    """Maximise ``objective`` over the thresholds of ``sw`` (:func:`argmax_over_thresholds`);
    with ``eval_n1``/``eval_n0`` the error *rates* are projected onto those sample sizes (so the
    Clopper-Pearson widths are those of the later bound). Returns (index, (value, a, b))."""

    def maximise(grid, level: float):
        k0, n0, k1, n1 = sw.false_pos, sw.n_nonmembers, sw.false_neg, sw.n_members
        if eval_n1 is not None:
            k0, n0 = k0 * (eval_n0 / n0), eval_n0
            k1, n1 = k1 * (eval_n1 / n1), eval_n1
        j, value, a, b = argmax_over_thresholds(k0, n0, k1, n1, level, objective)
        return j, (value, a, b)

    return maximise


def _score_maximiser(
    score: np.ndarray,
    member: np.ndarray,
    objective,
    eval_n1: int | None = None,
    eval_n0: int | None = None,
    codes: np.ndarray | None = None,
    score_range: tuple[float, float] | None = None,
):
    """:func:`_maximiser` on the sweep of checked scores (with ``codes`` of
    :func:`_split_codes`, of the scores in the selection part), by :func:`_binned_argmax` where
    it decides and by the full sweep otherwise (the same threshold either way). Returns
    ((threshold, false_pos, false_neg, counts of the others at the threshold or None),
    (value, a, b))."""

    def maximise(grid, level: float):
        found = _binned_argmax(
            score, member, level, objective, eval_n0, eval_n1, codes, score_range
        )
        if found is not None:
            tau, fp, fn, value, a, b, other_fp, other_fn = found
            other = (other_fp, other_fn) if codes is not None else None
            return (tau, fp, fn, other), (value, a, b)
        if codes is None:
            s, m = score, member
        else:
            group = codes >= 2
            s, m = score[group], member[group]
        sw = sweep(s, m)
        j, res = _maximiser(sw, objective, eval_n1, eval_n0)(grid, level)
        return (float(sw.threshold[j]), int(sw.false_pos[j]), int(sw.false_neg[j]), None), res

    return maximise


def _threshold_audit(
    score: np.ndarray,
    membership: np.ndarray,
    confidence: float,
    selection: str,
    select_fraction: float,
    split_seed: int,
    objective,
    project: bool,
) -> tuple[float, bool, float, float, float, int, int, int, int, int, float]:
    """The threshold choice of :func:`threshold_audit`: (value, valid of the
    selection, threshold, fpr_upper, fnr_upper, false_pos, false_neg, n_members, n_nonmembers,
    n_select, per-rate level). ``project``: choose a held-out threshold with the rates projected
    onto the evaluation sizes."""
    score, membership, score_range = _check_scores_range(score, membership)
    level = rate_level(confidence)
    rule = threshold_rule(selection, select_fraction, split_seed)
    if isinstance(rule, rules.Uncorrected):
        maximise = _score_maximiser(score, membership, objective, score_range=score_range)
        picked = rules.select(rule, level, bound_at=None, maximise=maximise)
        (tau, fp, fn, _), (value, a, b) = picked.candidate, picked.result
        n1 = int(np.count_nonzero(membership))
        return (value, rule.valid, tau, a, b, fp, fn, n1, membership.size - n1, 0, level)
    codes = _split_codes(membership, rule.fraction, rule.seed)
    members = int(np.count_nonzero(membership))
    # the part sizes as _split_codes draws them: round(fraction * class size) chosen per class
    n1 = members - int(round(rule.fraction * members))
    n0 = membership.size - members - int(round(rule.fraction * (membership.size - members)))
    n_select = membership.size - n1 - n0

    def bound_at(choice, lvl: float):
        tau, other = choice
        if other is None:  # counted on the evaluation part
            evaluated = codes < 2
            s_ev, m_ev = score[evaluated], membership[evaluated]
            above = s_ev > tau
            other = (
                int(np.count_nonzero(above & (m_ev == 0))),
                int(np.count_nonzero(~above & (m_ev == 1))),
            )
        fp, fn = other
        a = float(cp_upper(fp, n0, lvl))
        b = float(cp_upper(fn, n1, lvl))
        return float(objective(a, b)), a, b, fp, fn

    eval_sizes = (n1, n0) if project else (None, None)  # (eval_n1, eval_n0)
    held = rules.HeldOut(
        grid=(),
        bound_at=None,
        transfer=lambda c: (c[0], c[3]),
        maximise=_score_maximiser(score, membership, objective, *eval_sizes, codes, score_range),
    )
    picked = rules.select(rule, level, bound_at, held_out=held)
    value, a, b, fp, fn = picked.result
    return (value, rule.valid, picked.candidate[0], a, b, fp, fn, n1, n0, n_select, level)


#: What :func:`threshold_audit` reports at the chosen threshold: ``cp`` the Clopper-Pearson
#: lower bound of Eq. 1, ``gdp`` the GDP fit of Nasr et al. 2023 (an estimate, never valid).
ESTIMATES = ("cp", "gdp")


def threshold_audit(
    score: np.ndarray,
    membership: np.ndarray,
    delta: float,
    confidence: float = 0.95,
    selection: str = "heldout",
    select_fraction: float = 0.5,
    split_seed: int = 0,
    estimate: str = "cp",
) -> MultiRunResult:
    """The multi-run audit of one score per run at one threshold, as ``estimate`` says.

    ``estimate="cp"``: the Clopper-Pearson lower bound on epsilon (Eq. 1); the bound holds
    jointly at ``confidence``, each rate being bounded at :func:`rate_level` ``(confidence)``.
    ``estimate="gdp"``: the GDP-fit estimate (Nasr et al. 2023), the largest mu over thresholds
    reported as the epsilon(delta) of mu-GDP (needs delta > 0). ``valid`` is then always False:
    it assumes a Gaussian trade-off curve and can exceed the true epsilon when that is wrong.

    ``selection`` is ``same_data`` (Algorithm 5's maximum over all thresholds on the same
    runs; ``valid`` False) or ``heldout`` (threshold chosen on ``select_fraction`` of the runs,
    bound on the rest; ``valid`` True for ``cp``: the GDP fit loses its selection bias but not
    its modelling assumption).
    """
    check_level(confidence, delta)
    if estimate == "cp":

        def objective(a, b):
            return epsilon_from_rates(a, b, delta)

    elif estimate == "gdp":
        if not delta > 0:
            raise ValueError(
                "the gdp estimate needs delta > 0 (mu-GDP with mu > 0 has no finite eps at 0)"
            )
        objective = gdp_mu_from_rates
    else:
        raise ValueError(f"unknown estimate {estimate!r}; allowed: {list(ESTIMATES)}")
    value, valid, *rest = _threshold_audit(
        score,
        membership,
        confidence,
        selection,
        select_fraction,
        split_seed,
        objective,
        project=estimate == "cp",
    )
    value = float(value)
    if estimate == "cp":
        return MultiRunResult(selection, value, valid, *rest[:8], confidence, rest[8])
    eps = gdp_epsilon(delta, value) if value > 0 else 0.0
    return MultiRunResult(selection, eps, False, *rest[:8], confidence, rest[8], mu=value)


def max_attainable(
    n_members: int, n_nonmembers: int, delta: float, confidence: float = 0.95
) -> float:
    """The ceiling of :func:`threshold_audit` (``cp``): no errors at all. About ln(n / 3.7) at 95%
    (CP caps epsilon_emp at roughly ln(R/3) for R runs per side)."""
    return epsilon_from_counts(0, n_nonmembers, 0, n_members, delta, confidence)[0]
