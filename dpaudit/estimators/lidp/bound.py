"""LiDP lower bound on epsilon and its threshold tuning (Pillutla et al., NeurIPS 2023).

Algorithm 1 (line 8): with ``x`` the (n, K) 0/1 statistics of the K inserted canaries (1 = the
model falls in the rejection set R_k, i.e. score >= tau) and ``y`` the (n, m) statistics of m
null canaries,

    eps_hat = log( (p1_lower - delta) / p0_upper ),

where ``p1_lower`` is an XBern lower bound on the mean of ``x`` at failure probability beta/2
and ``p0_upper`` an XBern upper bound on the mean of ``y`` at beta/2 (:mod:`.xbern`), so that
P(eps < eps_hat) <= beta (asymptotically for Wilson). Eq. (4) (add/remove, two models per
trial) and Eq. (12) (replace-one, one model per trial; App. B.2) give the same computation.
Only this direction of the DP inequality is audited, as in the paper. ``eps_hat`` is reported
as 0 when the argument of the log is <= 1 or ``p1_lower <= delta``: 0 is always a valid bound.

Threshold (App. E.1): "we repeat the estimation of eps_hat(tau) for a grid of thresholds on a
holdout set of n trials, fix tau* = argmax, then report numbers over a fresh set of n trials".
The grid (not given in the paper) is the released code's: 500 equally spaced points between
min(q10(in scores), q10(null scores)) and max(q90(in), q90(null)), pooled over all trials and
canaries of the *holdout* trials. Our calibration (docs/estimators/lidp.md) reproduces the paper's
numbers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, replace

import numpy as np

from dpaudit.estimators.lidp import xbern
from dpaudit.estimators.lidp.xbern import XBernInputError, XBernSummary
from dpaudit.estimators.selection import rules

#: Grid size and quantiles of the released code (App. E.1 leaves the grid open).
GRID_SIZE = 500
GRID_QUANTILES = (0.1, 0.9)
#: Scores per block when counting over the threshold grid (memory bound, cache).
CHUNK_SCORES = 2**17
#: Scores per block of :func:`grid_index` (measured: 2^16 is about 3x faster than 2^19).
GRID_INDEX_BLOCK = 2**16


def check_confidence(confidence: float) -> float:
    """``confidence`` as a float in (0, 1), or a clear error."""
    return xbern.check_open_unit(confidence, "confidence")


def check_delta(delta: float) -> float:
    d = float(delta)
    if not 0.0 <= d < 1.0:
        raise XBernInputError(f"delta must lie in [0, 1), got {delta!r}")
    return d


def epsilon_from_bounds(p1_lower, p0_upper, delta: float) -> np.ndarray:
    """max(0, log((p1_lower - delta) / p0_upper)), elementwise; 0 where p1_lower <= delta."""
    p1 = np.asarray(p1_lower, dtype=float) - delta
    p0 = np.asarray(p0_upper, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        eps = np.log(p1 / p0)
    return np.where((p1 > 0) & (p0 > 0) & np.isfinite(eps), np.maximum(eps, 0.0), 0.0)


#: How the two score arrays are named in errors (the order check adds the canaries' role).
SCORE_NAMES = ("score_in", "score_out")


@dataclass(frozen=True)
class BoundSpec:
    """How a LiDP bound is computed: the audited ``delta``, the ``confidence`` (``beta = 1 -
    confidence`` is split in half between the two sides), and the XBern ``interval``, its
    ``order`` and the ``variant`` of the higher-order bound (:func:`.xbern.bounds`)."""

    delta: float
    confidence: float = 0.95
    interval: str = "wilson"
    order: int = 2
    variant: str = "printed"

    def checked(self) -> BoundSpec:
        """This spec with ``confidence`` in (0, 1) and ``delta`` in [0, 1) as floats, or a
        clear error."""
        confidence, delta = check_confidence(self.confidence), check_delta(self.delta)
        return replace(self, confidence=confidence, delta=delta)


def _check_inputs(
    check: Callable[[np.ndarray, str], np.ndarray],
    inserted: np.ndarray,
    null: np.ndarray,
    names: tuple[str, str],
    spec: BoundSpec,
    same_trials: bool = False,
) -> tuple[np.ndarray, np.ndarray, BoundSpec]:
    """Validate the inserted and null arrays with ``check``, the spec (:meth:`BoundSpec.checked`),
    and that each side has K >= ``spec.order`` canaries; ``same_trials``: both must have the
    same rows."""
    inserted, null = check(inserted, names[0]), check(null, names[1])
    if same_trials and inserted.shape[0] != null.shape[0]:
        raise XBernInputError(
            f"{names[0]} has {inserted.shape[0]} trials but {names[1]} has {null.shape[0]}"
        )
    spec = spec.checked()
    for arr, name, role in ((inserted, names[0], "inserted"), (null, names[1], "null")):
        what = name if "(" in name else f"{name} ({role} canaries)"
        xbern.check_order(spec.order, arr.shape[1], spec.interval, what)
    return inserted, null, spec


@dataclass
class LiDPBound:
    """The bound and the pieces it is made of (one row of the audit table)."""

    epsilon: float
    p1_lower: float
    p0_upper: float
    mu1_hat: float
    mu0_hat: float
    n_trials: int
    K: int
    m: int
    interval: str
    order: int
    confidence: float
    variant: str
    #: Moments of the inserted side (Eq. 13) and the correlation terms of Fig. 4 / Figs. 10-11,
    #: |mu2_hat - mu1_hat^2| (Eq. 8) and |mu4_hat - mu2_hat^2| (Eq. 9); NaN when K is too small.
    mu2_hat: float = float("nan")
    mu4_hat: float = float("nan")
    corr2: float = float("nan")
    corr4: float = float("nan")

    def as_row(self) -> dict:
        return asdict(self)


def _side_bounds(sx: XBernSummary, sy: XBernSummary, spec: BoundSpec):
    """(p1_lower, p0_upper): the XBern bounds of the two sides, each at beta / 2."""
    beta = 1.0 - spec.confidence
    p1_lower, _ = xbern.bounds(sx, beta / 2, spec.interval, spec.order, spec.variant)
    _, p0_upper = xbern.bounds(sy, beta / 2, spec.interval, spec.order, spec.variant)
    return p1_lower, p0_upper


def epsilon_lower_bound(x: np.ndarray, y: np.ndarray, spec: BoundSpec) -> LiDPBound:
    """Algorithm 1, line 8, from 0/1 matrices ``x`` (n, K) (inserted) and ``y`` (n', m) (null),
    as ``spec`` says."""
    x, y, spec = _check_inputs(
        xbern.check_binary, x, y, ("x (inserted canaries)", "y (null canaries)"), spec
    )
    order, delta = spec.order, spec.delta
    sx = XBernSummary.from_binary(x, order)
    sy = XBernSummary.from_binary(y, order)
    p1, p0 = _side_bounds(sx, sy, spec)
    mu = np.full(4, np.nan)
    mu[: min(4, x.shape[1])] = xbern.moments(x, min(4, x.shape[1]))
    return LiDPBound(
        epsilon=float(epsilon_from_bounds(p1, p0, delta)),
        p1_lower=float(p1),
        p0_upper=float(p0),
        mu1_hat=float(sx.moments[0]),
        mu0_hat=float(sy.moments[0]),
        n_trials=int(x.shape[0]),
        K=int(x.shape[1]),
        m=int(y.shape[1]),
        interval=spec.interval,
        order=int(order),
        confidence=spec.confidence,
        variant=spec.variant,
        mu2_hat=float(mu[1]),
        mu4_hat=float(mu[3]),
        corr2=float(abs(mu[1] - mu[0] ** 2)),
        corr4=float(abs(mu[3] - mu[1] ** 2)),
    )


# ---------------------------------------------------------------------------------------------
# Thresholds
# ---------------------------------------------------------------------------------------------


def check_scores(score: np.ndarray, name: str) -> np.ndarray:
    score = np.asarray(score, dtype=np.float64)
    if score.ndim != 2 or score.shape[0] < 1 or score.shape[1] < 1:
        raise XBernInputError(f"{name} must be a non-empty 2-D (trials, canaries) array")
    bad = ~np.isfinite(score)
    if bad.any():
        t, k = np.argwhere(bad)[0]
        raise XBernInputError(f"{name} is not finite at trial {t}, canary {k}")
    return score


#: Below this many values :func:`quantiles` calls ``np.quantile`` directly.
QUANTILE_DIRECT_SIZE = 2**16


def _lerp(a: float, b: float, t: float) -> float:
    """numpy's linear interpolation of ``np.quantile(method="linear")`` (numpy 2.x
    ``_lerp``), so :func:`quantiles` returns the same floats; checked against
    ``np.quantile`` in the tests."""
    diff = b - a
    return b - diff * (1 - t) if t >= 0.5 else a + diff * t


def quantiles(x: np.ndarray, qs: tuple[float, ...], direct_size: int = QUANTILE_DIRECT_SIZE):
    """``np.quantile(x, qs)`` (linear method), identical floats, without sorting all of x.

    Each needed order statistic x_(k) is bracketed with a subsample of whole rows of x, the
    values in the bracket are selected (two comparisons per value) and partitioned; the
    bracket is checked (k must fall inside it) and ``np.quantile`` is used where it does not.
    """
    x = np.asarray(x, dtype=float)
    N = x.size
    if N <= direct_size:
        return np.quantile(x, qs)
    x = np.ascontiguousarray(x).reshape(-1, x.shape[-1] if x.ndim == 2 else 1)  # fast masks
    step = max(1, N // 2**16)  # rows: about 2^16 sampled values
    sample = np.sort(x[::step].ravel())  # whole rows (i.i.d. trials)
    m = sample.size
    out = []
    for q in qs:
        v = (N - 1) * np.float64(q)  # numpy's virtual index
        if v >= N - 1 or v < 0:
            out.append(float(np.quantile(x, q)))
            continue
        prev = np.floor(v)
        gamma = v - prev
        k0 = int(prev)
        k1 = k0 + 1
        j = k0 / (N - 1) * (m - 1)
        pk = k0 / (N - 1)
        margin = 6.0 * np.sqrt(m * pk * (1 - pk)) + 16  # 6 s.d. of the sample rank
        lo_j, hi_j = int(np.floor(j - margin)), int(np.ceil(j + margin))
        a = sample[lo_j] if lo_j >= 0 else -np.inf
        b = sample[hi_j] if hi_j < m else np.inf
        n_lt = int(np.count_nonzero(x < a))
        sel = x[(x >= a) & (x <= b)]
        if not (n_lt <= k0 and k1 < n_lt + sel.size):
            out.append(float(np.quantile(x, q)))
            continue
        part = np.partition(sel, [k0 - n_lt, k1 - n_lt])
        out.append(float(_lerp(part[k0 - n_lt], part[k1 - n_lt], gamma)))
    return np.array(out)


def threshold_grid(
    score_in: np.ndarray, score_out: np.ndarray, size: int = GRID_SIZE
) -> np.ndarray:
    """``size`` equally spaced thresholds from min of the two 10% quantiles to max of the two
    90% quantiles (released code; LiDP App. E.1)."""
    lo_q, hi_q = GRID_QUANTILES
    qi = quantiles(score_in, (lo_q, hi_q))
    qo = quantiles(score_out, (lo_q, hi_q))
    return np.linspace(min(qi[0], qo[0]), max(qi[1], qo[1]), int(size))


def grid_index(score: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """``c = #{j : grid_j <= score}`` for every score (``np.searchsorted(grid, score, "right")``
    exactly), as int32.

    For an (almost) equally spaced grid, such as :func:`threshold_grid`'s ``np.linspace``, the
    index is first guessed arithmetically, ``floor((score - grid_0) / step) + 1``, then moved by
    one where ``grid[c] <= score`` or ``grid[c - 1] > score``, and checked: every c must satisfy
    ``grid[c - 1] <= score < grid[c]`` (``grid[-1] = -inf``, ``grid[G] = +inf``), which defines
    the searchsorted index uniquely; where it does not (irregular grids), searchsorted is used.
    Several times faster than a binary search per score.
    """
    G = len(grid)
    score = np.asarray(score)
    if G < 2:
        return np.searchsorted(grid, score, side="right").astype(np.int32)
    lo = grid[0]
    step = (grid[-1] - lo) / (G - 1)
    if not (np.isfinite(step) and step > 0):
        return np.searchsorted(grid, score, side="right").astype(np.int32)
    below = np.concatenate([[-np.inf], grid])  # below[c] = grid[c - 1]
    above = np.concatenate([grid, [np.inf]])  # above[c] = grid[c]
    if score.ndim != 2:
        return _grid_index_block(score, grid, lo, step, below, above)
    out = np.empty(score.shape, dtype=np.int32)
    rows = max(1, GRID_INDEX_BLOCK // max(1, score.shape[1]))  # blocks that stay in cache
    for start in range(0, score.shape[0], rows):
        out[start : start + rows] = _grid_index_block(
            score[start : start + rows], grid, lo, step, below, above
        )
    return out


def _grid_index_block(score, grid, lo, step, below, above) -> np.ndarray:
    G = len(grid)
    guess = score - lo
    guess *= 1.0 / step
    np.clip(guess, 0.0, float(G - 1), out=guess)
    c = guess.astype(np.int32)  # truncation = floor on [0, G - 1]
    c += 1  # 1 .. G
    c += above.take(c) <= score
    c -= below.take(c) > score
    bad = below.take(c) > score
    bad |= above.take(c) <= score
    if bad.any():
        c[bad] = np.searchsorted(grid, score[bad], side="right")
    return c


def summaries_over_grid(score: np.ndarray, grid: np.ndarray, order: int) -> XBernSummary:
    """XBern summaries of ``score >= tau`` for every tau in ``grid`` (sorted ascending), batched.

    For each score, ``c = #{j : grid_j <= score}`` (:func:`grid_index`); the count of ones of a
    row at threshold j is the number of its scores with ``c > j``, a reverse cumulative sum of
    a per-row histogram of ``c`` (K >= G), or for K < G, from each row's sorted ``c`` through a
    difference array over (count, threshold). The integer table ``hist_counts`` (rows with s
    ones at tau_j) is the same either way. Cost O(n K log K + n min(K, G)) plus
    O(K G), memory O(CHUNK_SCORES * max(1, G / K)).
    """
    n, K = score.shape
    G = len(grid)
    order = min(order, K)
    per_count = xbern.per_row_moments(np.arange(K + 1), K, order)  # (order, K + 1)
    hist_counts = np.zeros((K + 1, G), dtype=np.int64)  # how many rows have count s at tau_j
    cols = np.arange(G)
    first_hist = np.zeros(G + 1, dtype=np.int64)
    by_sort = K < G
    if by_sort:
        diff = np.zeros((K + 1) * (G + 1), dtype=np.int64)
        base = ((K - np.arange(K + 1)) * (G + 1))[None, :]
    chunk = max(1, CHUNK_SCORES // K)  # rows per block (measured: 2^17 scores beat 2^19)
    for start in range(0, n, chunk):
        block = score[start : start + chunk]
        rows = block.shape[0]
        c = grid_index(block, grid)  # (rows, K) in 0..G
        first_hist += np.bincount(c[:, 0], minlength=G + 1)
        if by_sort:
            # with the row's c sorted, c_(1) <= .. <= c_(K), c_(0) = 0, c_(K+1) = G: the row
            # has K - r ones exactly for j in [c_(r), c_(r+1)); add 1 on that interval of
            # row K - r of hist_counts through a difference array (empty intervals cancel)
            ext = np.empty((rows, K + 2), dtype=np.int64)
            ext[:, 0] = 0
            ext[:, K + 1] = G
            ext[:, 1 : K + 1] = np.sort(c, axis=1)
            size = (K + 1) * (G + 1)
            diff += np.bincount((base + ext[:, :-1]).ravel(), minlength=size)
            diff -= np.bincount((base + ext[:, 1:]).ravel(), minlength=size)
        else:
            hist = np.bincount(
                (np.arange(rows)[:, None] * (G + 1) + c).ravel(), minlength=rows * (G + 1)
            ).reshape(rows, G + 1)
            # ones of row i at threshold j = sum_{v > j} hist[i, v]
            above = np.cumsum(hist[:, ::-1], axis=1)[:, ::-1][:, 1:]  # (rows, G)
            hist_counts += np.bincount((above * G + cols).ravel(), minlength=(K + 1) * G).reshape(
                K + 1, G
            )
    if by_sort:
        hist_counts = np.ascontiguousarray(np.cumsum(diff.reshape(K + 1, G + 1), axis=1)[:, :G])
    moments = per_count @ hist_counts / n  # (order, G)
    first = n - np.cumsum(first_hist)[:G]  # #{i : score[i, 0] >= grid_j} = #{i : c_i0 > j}
    return XBernSummary(n=n, K=K, moments=moments, first=first)


def epsilon_curve(
    score_in: np.ndarray, score_out: np.ndarray, grid: np.ndarray, spec: BoundSpec
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(eps_hat, p1_lower, p0_upper) at every threshold of ``grid`` (statistic: score >= tau)."""
    score_in, score_out, spec = _check_inputs(check_scores, score_in, score_out, SCORE_NAMES, spec)
    grid = np.sort(np.asarray(grid, dtype=float))
    sx = summaries_over_grid(score_in, grid, spec.order)
    sy = summaries_over_grid(score_out, grid, spec.order)
    p1, p0 = _side_bounds(sx, sy, spec)
    return epsilon_from_bounds(p1, p0, spec.delta), p1, p0


def tune_threshold(
    score_in: np.ndarray, score_out: np.ndarray, spec: BoundSpec, grid_size: int = GRID_SIZE
) -> tuple[float, float]:
    """(tau*, eps_hat(tau*)): the grid threshold maximising eps_hat on these (holdout) trials.

    Ties go to the smallest threshold. The returned eps_hat is *not* a valid bound: it was
    maximised over the grid on the same data.
    """
    grid = threshold_grid(score_in, score_out, grid_size)
    eps, _, _ = epsilon_curve(score_in, score_out, grid, spec)
    j = int(np.argmax(eps))
    return float(grid[j]), float(eps[j])


@dataclass
class LiDPAudit(LiDPBound):
    """:class:`LiDPBound` at a chosen threshold, with how the threshold was chosen."""

    threshold: float = float("nan")
    threshold_mode: str = ""
    n_tune: int = 0
    tuned_epsilon: float = float("nan")
    valid: bool = False
    #: Where the tuning trials came from: "file_rows" (declared held-out rows),
    #: "random_split" (``heldout_fraction``), or "" (none / not a held-out mode).
    heldout_source: str = ""


def heldout_count(n: int, heldout_fraction: float) -> int:
    """How many of ``n`` trials a held-out threshold tunes on, round(fraction x n); the other
    trials evaluate (the owner of this rounding: :func:`split_trials` and the config check)."""
    return int(round(float(heldout_fraction) * n))


def split_trials(n: int, heldout_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A random split of trial indices into (holdout, evaluation) parts, both non-empty."""
    if not 0.0 < heldout_fraction < 1.0:
        raise XBernInputError(f"heldout_fraction must lie in (0, 1), got {heldout_fraction!r}")
    n_tune = heldout_count(n, heldout_fraction)
    if n_tune < 1 or n - n_tune < 1:
        raise XBernInputError(
            f"cannot split {n} trials into non-empty holdout and evaluation parts with "
            f"heldout_fraction={heldout_fraction}"
        )
    perm = np.random.default_rng(seed).permutation(n)
    return np.sort(perm[:n_tune]), np.sort(perm[n_tune:])


def audit_scores(
    score_in: np.ndarray,
    score_out: np.ndarray,
    delta: float,
    confidence: float = 0.95,
    interval: str = "wilson",
    order: int = 2,
    variant: str = "printed",
    threshold: float | str = "heldout",
    heldout_fraction: float = 0.5,
    split_seed: int = 0,
    grid_size: int = GRID_SIZE,
    heldout_trials: int = 0,
) -> LiDPAudit:
    """The LiDP audit of one set of trials: rows of ``score_in`` (n, K) and ``score_out``
    (n, m) are the same trials (models); higher score means IN.

    ``heldout_trials`` > 0 declares the first ``heldout_trials`` rows as trials drawn for
    tuning only (App. E.1's "holdout set of n trials"); the bound is then always computed on
    the other rows, whatever the threshold mode. 0 (default): no rows are reserved.

    ``threshold``:
      * a number: fixed in advance; all evaluation trials are used; valid.
      * ``"heldout"``: tuned on the declared held-out rows if there are any, else on a random
        ``heldout_fraction`` of the trials (App. E.1); the bound is computed on the other
        trials; valid.
      * ``"in_sample"``: tuned and evaluated on the same (evaluation) trials (the released
        code's "reuse" mode, "for testing only"); NOT a valid bound (``valid=False``).
    """
    score_in, score_out, spec = _check_inputs(
        check_scores,
        score_in,
        score_out,
        SCORE_NAMES,
        BoundSpec(delta, confidence, interval, order, variant),
        same_trials=True,
    )
    n = score_in.shape[0]
    h = check_heldout_trials(heldout_trials, n)
    rows = slice(h, n)  # the evaluation trials (slices: views, no copies of the scores)
    rule = threshold_rule(threshold, heldout_fraction, split_seed)
    source, tune, ev = "", None, rows
    if isinstance(rule, rules.Split):
        if h:
            tune, source = slice(0, h), "file_rows"
        else:
            tune, ev = split_trials(n, rule.fraction, rule.seed)
            source = "random_split"
    elif isinstance(rule, rules.Uncorrected):
        tune = rows
    tuned = {"epsilon": float("nan"), "n": 0}

    def bound_at(tau: float, level: float) -> LiDPBound:
        at_level = replace(spec, confidence=level)
        return epsilon_lower_bound(score_in[ev] >= tau, score_out[ev] >= tau, at_level)

    def maximise(grid, level: float) -> tuple[float, LiDPBound | None]:
        """tau* on the tuning trials (App. E.1); its bound when those are the evaluation
        trials too (in-sample)."""
        at_level = replace(spec, confidence=level)
        tau, tuned["epsilon"] = tune_threshold(score_in[tune], score_out[tune], at_level, grid_size)
        tuned["n"] = len(tune) if isinstance(tune, np.ndarray) else len(range(n)[tune])
        return tau, (bound_at(tau, level) if tune is ev else None)

    held = rules.HeldOut((), None, float, maximise) if isinstance(rule, rules.Split) else None
    picked = rules.select(rule, spec.confidence, bound_at, maximise=maximise, held_out=held)
    return LiDPAudit(
        **picked.result.as_row(),
        threshold=picked.candidate,
        threshold_mode=threshold if isinstance(threshold, str) else "fixed",
        n_tune=tuned["n"],
        tuned_epsilon=tuned["epsilon"],
        valid=picked.valid,
        heldout_source=source,
    )


def threshold_rule(
    threshold: float | str, heldout_fraction: float, split_seed: int
) -> rules.Strategy:
    """The selection strategy (:mod:`.selection.rules`) of a threshold mode: a number is
    :class:`~.selection.rules.Explicit`, ``heldout`` a :class:`~.selection.rules.Split` and
    ``in_sample`` the :class:`~.selection.rules.Uncorrected` maximum over the grid."""
    if isinstance(threshold, str):
        if threshold == "heldout":
            return rules.Split(split_seed, heldout_fraction)
        if threshold == "in_sample":
            return rules.Uncorrected(())
        raise XBernInputError(
            f"threshold must be a number, 'heldout' or 'in_sample', got {threshold!r}"
        )
    tau = float(threshold)
    if not np.isfinite(tau):
        raise XBernInputError(f"a fixed threshold must be finite, got {threshold!r}")
    return rules.Explicit(tau)


def check_heldout_trials(heldout_trials: int, n: int) -> int:
    """A declared number of held-out rows: an integer in [0, n - 1] (>= 1 row is evaluated)."""
    if isinstance(heldout_trials, bool) or int(heldout_trials) != heldout_trials:
        raise XBernInputError(f"heldout_trials must be an integer, got {heldout_trials!r}")
    h = int(heldout_trials)
    if not 0 <= h < n:
        raise XBernInputError(
            f"heldout_trials must lie in [0, {n - 1}] for {n} trials (at least one evaluation "
            f"trial), got {h}"
        )
    return h
