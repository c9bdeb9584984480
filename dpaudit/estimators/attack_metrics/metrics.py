"""Attack metrics of a membership-inference test, with bootstrap confidence intervals.

The metrics practitioners read beside epsilon, computed from the scores of IN canaries
(positives, ``membership`` 1) and OUT canaries (negatives), with the rule "score >= t means IN":

* ``auroc``: the area under the ROC curve, P[S_in > S_out] + P[S_in = S_out] / 2 (the
  Mann-Whitney statistic divided by n_in * n_out; ``sklearn.metrics.roc_auc_score``).
* ``tpr_at_fpr_<a>``: the largest TPR of a threshold whose FPR is at most ``a`` (a deterministic
  threshold, no interpolation between two; the convention of Carlini et al. 2022, "Membership
  inference attacks from first principles", arXiv:2112.03570, Sec. III).
* ``balanced_accuracy``: the best (TPR + TNR) / 2 over thresholds, i.e. (1 + max_t (TPR - FPR))
  / 2 (Kolmogorov-Smirnov distance of the two score distributions).
* ``epsilon``: the epsilon implied by the raw counts, max over thresholds of the two ratios of
  Eq. (1) of Annamalai et al. 2024 (arXiv:2411.10614) with the empirical rates in place of their
  confidence bounds, log((TPR - delta) / FPR) and log((TNR - delta) / FNR), over the thresholds
  with at least ``min_count`` false positives (false negatives) (as jax_privacy's
  ``epsilon_raw_counts``), floored at 0. A point estimate: NOT a lower bound (``valid`` False).

Every metric here but AUROC is a maximum over thresholds chosen on the same data, so an
interval at the chosen threshold as if fixed in advance would ignore the choice. For independent
canaries (runs) the intervals are those of :mod:`.ci`: DeLong for AUROC, exact
order-statistic + Clopper-Pearson intervals for the TPR at a fixed FPR, the DKW-Massart band for
balanced accuracy, and a percentile bootstrap (Efron and Tibshirani 1993, Ch. 13) re-choosing the
threshold in every resample for the raw-count epsilon. For LiDP files, whose canaries share a
model, every interval is a percentile bootstrap over whole trials (a cluster bootstrap,
:func:`resample_weights` and :func:`metrics_from_weights` below). They describe the sampling
variability of the estimate over canaries; the epsilon's is not a bound on epsilon.

Implementation (O(m) per resample, no sort): each class is sorted once; a resample is a vector
of integer counts on each class's sorted scores (how often each score was drawn, drawn exactly
by :func:`multinomial_counts`), whose cumulative sums give the ROC counts at every threshold;
every metric is attained at a threshold just above an OUT score or at an IN score
(:func:`metrics_from_weights`), so AUROC is a weighted rank sum and the maxima run over the OUT
(IN) scores, skipping, exactly, the blocks of thresholds whose upper bound cannot beat a value
already attained.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dpaudit.estimators.attack_metrics import ci

#: The bootstrap resamples are processed in blocks of this many (memory: block x m); the block
#: size does not change the resamples.
BLOCK = 16
#: Thresholds are grouped in blocks for the maxima over thresholds: the first FIRST_BLOCK OUT
#: (IN) scores from the top (bottom), then blocks growing geometrically by GROWTH, none longer
#: than 1/GRID of the class (performance only: the maxima are exact).
FIRST_BLOCK = 64
GROWTH = 1.25
GRID = 1024


@dataclass(frozen=True)
class Sorted:
    """The pooled scores grouped by distinct value, in decreasing order of score."""

    group: np.ndarray  # (n,) index of each original score's distinct value (0 = highest)
    n_groups: int
    is_in: np.ndarray  # (n,) bool


def _checked(score: np.ndarray, member: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(scores as float, membership) flattened, after the checks every metric needs: the same
    size, finite scores, 0/1 membership, and both IN and OUT canaries."""
    score = np.asarray(score, dtype=float).ravel()
    member = np.asarray(member).ravel()
    if score.shape != member.shape:
        raise ValueError(f"score and membership differ in size: {score.size} != {member.size}")
    if not np.all(np.isfinite(score)):
        raise ValueError("scores must be finite")
    if not np.all((member == 0) | (member == 1)):
        raise ValueError("membership must be 0 or 1")
    n_in = int(member.sum())
    if n_in == 0 or n_in == member.size:
        raise ValueError(
            f"attack metrics need IN and OUT canaries; got {n_in} IN and {member.size - n_in} OUT"
        )
    return score, member


def sort_scores(score: np.ndarray, member: np.ndarray) -> Sorted:
    """Group the pooled scores by distinct value, highest first."""
    score, member = _checked(score, member)
    values, inverse = np.unique(-score, return_inverse=True)
    return Sorted(inverse.ravel(), len(values), member.astype(bool))


def roc_counts(s: Sorted, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Weighted (TP, FP) at each distinct threshold, highest first: arrays (B, groups + 1) whose
    column j counts the scores >= the j-th highest distinct value (column 0: nothing is IN).

    ``weights`` is (B, n): how often each original score appears in each resample.
    """
    b = weights.shape[0]
    offsets = (np.arange(b) * s.n_groups)[:, None]
    counts = []
    for cls in (s.is_in, ~s.is_in):
        idx = (offsets + s.group[cls][None, :]).ravel()
        per_group = np.bincount(idx, weights=weights[:, cls].ravel(), minlength=b * s.n_groups)
        cum = np.zeros((b, s.n_groups + 1))
        np.cumsum(per_group.reshape(b, s.n_groups), axis=1, out=cum[:, 1:])
        counts.append(cum)
    return counts[0], counts[1]


@dataclass(frozen=True)
class Classes:
    """The IN and the OUT scores, each class sorted by decreasing score, and where each class's
    scores fall among the other's: what every resample's metrics are computed from.

    A threshold's ROC point is (FP, TP) = the weight of the OUT (IN) scores at or above it. Every
    metric is attained at one of two kinds of threshold (module docstring of
    :func:`metrics_from_weights`): just above an OUT score, or at an IN score.
    """

    in_pos: np.ndarray  # (n_in,) file positions of the IN scores, highest first
    out_pos: np.ndarray  # (n_out,) file positions of the OUT scores, highest first
    in_order: np.ndarray  # (n_in,) the same, as positions among the IN scores (file order)
    out_order: np.ndarray  # (n_out,) the same among the OUT scores
    in_above: np.ndarray  # (n_out,) number of IN scores > each OUT score
    in_atleast: np.ndarray | None  # (n_out,) IN scores >= each OUT score; None: no IN = OUT tie
    out_above: np.ndarray | None  # (n_out,) OUT scores > each OUT score; None: no OUT ties (= j)
    out_atleast: np.ndarray  # (n_in,) number of OUT scores >= each IN score
    in_through: np.ndarray | None  # (n_in,) IN scores >= each IN score; None: no IN ties (= i + 1)
    out_edges: np.ndarray  # block edges over the OUT scores, from the top
    in_edges: np.ndarray  # block edges over the IN scores, from the bottom (decreasing)


def split_classes(score: np.ndarray, member: np.ndarray) -> Classes:
    """Sort each class once (checks the input as :func:`sort_scores` does)."""
    s = sort_scores(score, member)
    score = np.asarray(score, dtype=float).ravel()
    per_class = []
    for idx in (np.flatnonzero(s.is_in), np.flatnonzero(~s.is_in)):
        order = np.argsort(-score[idx], kind="stable")
        per_class.append((idx[order], order, np.sort(score[idx])))  # ascending copy to search
    (in_pos, in_order, x_up), (out_pos, out_order, y_up) = per_class
    x, y = x_up[::-1], y_up[::-1]  # decreasing
    n_in, n_out = x.size, y.size

    def count(up: np.ndarray, values: np.ndarray, side: str) -> np.ndarray:
        # how many of ``up`` are > (side "right") or >= (side "left") each value
        return (up.size - np.searchsorted(up, values, side=side)).astype(np.intp)

    in_above = count(x_up, y, "right")
    in_atleast = count(x_up, y, "left")
    out_above = count(y_up, y, "right")
    in_through = count(x_up, x, "left")
    return Classes(
        in_pos,
        out_pos,
        in_order,
        out_order,
        in_above,
        None if np.array_equal(in_atleast, in_above) else in_atleast,
        None if np.array_equal(out_above, np.arange(n_out)) else out_above,
        count(y_up, x, "left"),
        None if np.array_equal(in_through, np.arange(1, n_in + 1)) else in_through,
        _edges(n_out),
        n_in - _edges(n_in),
    )


def _edges(n: int) -> np.ndarray:
    """0 = e_0 < e_1 < ... = n: a block of FIRST_BLOCK, then blocks growing by GROWTH, none
    longer than n / GRID."""
    steps = int(np.ceil(np.log(max(n / FIRST_BLOCK, 1.0)) / np.log(GROWTH))) + 1
    inner = np.round(FIRST_BLOCK * GROWTH ** np.arange(steps)).astype(np.intp)
    grid = np.round(np.linspace(0, n, GRID + 1)).astype(np.intp)
    return np.unique(np.r_[0, inner[inner < n], grid, n])


def _cumulative(w: np.ndarray) -> np.ndarray:
    """(B, k + 1) int64: column j is the sum of the first j columns of ``w``."""
    out = np.empty((w.shape[0], w.shape[1] + 1), dtype=np.int64)
    out[:, 0] = 0
    np.cumsum(w, axis=1, out=out[:, 1:])
    return out


def _ratio(num: np.ndarray, den: np.ndarray, cnt: int) -> np.ndarray:
    """num / den where den >= cnt and num > 0, else 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where((den >= cnt) & (num > 0), num / den, 0.0)


def _ranges(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The concatenation of arange(lo[k], hi[k]) over k (lo < hi)."""
    length = hi - lo
    start = np.cumsum(length) - length
    return np.arange(length.sum()) - np.repeat(start - lo, length)


def _pruned_max(bound: np.ndarray, lo: np.ndarray, hi: np.ndarray, best: np.ndarray, value):
    """Per row, the max of ``best`` and of ``value(cols)`` over every threshold, where blocks
    [lo[k], hi[k]) whose upper ``bound`` (B, blocks) is at most ``best`` in every row (a value
    already attained) are skipped: they cannot raise the maximum, so the result is exact."""
    need = (bound > best[:, None]).any(axis=0)
    if not need.any():
        return best
    return np.maximum(best, value(_ranges(lo[need], hi[need])).max(axis=1))


def metrics_from_weights(
    c: Classes,
    w: np.ndarray,
    v: np.ndarray,
    fprs: Sequence[float],
    delta: float,
    min_count: int,
) -> dict[str, np.ndarray]:
    # Long (85 lines, 18 of them the docstring's proof of which thresholds suffice): the five
    # metrics share the cumulative weights tp, fp and the OUT-score blocks of one pass.
    """The metrics (module docstring) of each row of weights, arrays of shape (B,).

    ``w`` (B, n_in) and ``v`` (B, n_out): how often (an integer) each IN (OUT) score appears
    in each resample, both classes in decreasing order of score (``c.in_pos``, ``c.out_pos``);
    every row needs positive IN and OUT totals. O(B (n_in + n_out)), with no sort.

    Which thresholds suffice. Lowering the threshold from one OUT score to the next raises TP and
    leaves FP: so the best TPR at a given FPR, the best TPR - FPR and the best forward ratio
    (TPR - delta) / FPR at a given FP are all attained just above an OUT score (at the lowest
    threshold before FP grows). Raising it from one IN score to the next lowers FP and leaves
    TP: so the best reverse ratio (TNR - delta) / FNR at a given FN is attained at an IN score.
    The only other ROC points, (0, 0) and (1, 1), give TPR - FPR = 0 and ratios <= 1 - delta,
    below the floors. So the metrics equal the maxima over every threshold. The maxima skip
    blocks of thresholds that provably cannot beat a value attained at the blocks' edges: in a
    block, TP and FP are at most their last and at least their first values.
    """
    v = np.asarray(v)
    cw, cv = _cumulative(w), _cumulative(v)
    n_in, n_out = cw[:, -1:], cv[:, -1:]
    f_in, f_out = n_in.astype(float), n_out.astype(float)
    # just above each OUT score (decreasing): the IN and the OUT weight above it
    tp = np.take(cw, c.in_above, axis=1)
    fp = cv[:, :-1] if c.out_above is None else np.take(cv, c.out_above, axis=1)
    out: dict[str, np.ndarray] = {}
    # Mann-Whitney with ties counted 1/2: each OUT score counts the IN weight above it plus half
    # of the IN weight tied with it (a weighted rank sum, in integers)
    pairs = np.einsum("bj,bj->b", v, tp)
    if c.in_atleast is not None:
        pairs = (pairs + np.einsum("bj,bj->b", v, np.take(cw, c.in_atleast, axis=1))) / 2
    out["auroc"] = pairs / (f_in[:, 0] * f_out[:, 0])
    for a in fprs:
        # FP is non-decreasing: k = the last OUT score whose exclusion keeps FP within budget,
        # i.e. the number of cumulative OUT counts <= budget, less 1; counted over a prefix of
        # the columns that holds the budget in every row (the budget is small), else in full
        budget = a * f_out * (1 + 1e-12)
        head = min(int(2 * a * c.out_pos.size) + 2 * FIRST_BLOCK, cv.shape[1])
        if (cv[:, head - 1 : head] <= budget).any():
            head = cv.shape[1]
        k = np.minimum(np.count_nonzero(cv[:, :head] <= budget, axis=1) - 1, v.shape[1] - 1)
        out[tpr_column(a)] = np.take_along_axis(cw, c.in_above[k][:, None], 1)[:, 0] / f_in[:, 0]
    lo, hi = c.out_edges[:-1], c.out_edges[1:]

    # max (TP n_out - FP n_in) >= 0 (the point (0, 0) gives 0)
    def gap(cols) -> np.ndarray:
        return tp[:, cols] * n_out - fp[:, cols] * n_in

    best = np.maximum(gap(lo).max(axis=1), 0)
    best = _pruned_max(tp[:, hi - 1] * n_out - fp[:, lo] * n_in, lo, hi, best, gap)
    out["balanced_accuracy"] = (1 + best / (f_in[:, 0] * f_out[:, 0])) / 2
    cnt = max(min_count, 1)

    # log((TPR - delta) / FPR) just above each OUT score, Eq. (1) with raw rates
    def fwd_num(t: np.ndarray) -> np.ndarray:
        return (t / f_in - delta) * f_out

    def fwd(cols) -> np.ndarray:
        return _ratio(fwd_num(tp[:, cols]), fp[:, cols], cnt)

    bound = fwd_num(tp[:, hi - 1]) / np.maximum(fp[:, lo], cnt)
    forward = _pruned_max(bound, lo, hi, np.maximum(fwd(lo).max(axis=1), 1.0), fwd)

    # log((TNR - delta) / FNR) at each IN score (decreasing); blocks from the lowest
    lo, hi = c.in_edges[1:], c.in_edges[:-1]
    through = np.arange(1, c.in_pos.size + 1) if c.in_through is None else c.in_through

    def rev_num(f: np.ndarray) -> np.ndarray:
        return ((f_out - f) / f_out - delta) * f_in

    def rev(cols) -> np.ndarray:
        return _ratio(rev_num(cv[:, c.out_atleast[cols]]), n_in - cw[:, through[cols]], cnt)

    bound = rev_num(cv[:, c.out_atleast[lo]]) / np.maximum(n_in - cw[:, through[hi - 1]], cnt)
    reverse = _pruned_max(bound, lo, hi, np.maximum(rev(lo).max(axis=1), 1.0), rev)
    out["epsilon"] = np.log(np.maximum(forward, reverse))
    return out


def tpr_at_fpr(
    score: np.ndarray, member: np.ndarray, fprs: Sequence[float] = (0.001, 0.01)
) -> dict[str, float]:
    """The ``tpr_at_fpr_<a>`` columns of :func:`attack_metrics` alone (no interval; the same
    values, the convention of the module docstring), in linear time: with a budget of
    ``floor(a n_out)`` false positives (at most ``n_out - 1``), the threshold sits at the OUT
    score of that rank from the top, and the TPR is the fraction of IN scores strictly above
    it. One partial partition of the OUT scores and one count over the IN scores per FPR,
    instead of the sort of every score that the full metrics need."""
    for a in fprs:
        if not 0 < a < 1:
            raise ValueError(f"fprs must lie in (0, 1), got {a}")
    score, member = _checked(score, member)
    is_in = member == 1
    ins, outs = score[is_in], score[~is_in]
    n_out = outs.size
    # the rank from the top of the threshold's OUT score, as metrics_from_weights counts it
    ranks = [min(int(np.floor(a * n_out * (1 + 1e-12))), n_out - 1) for a in fprs]
    part = np.partition(outs, sorted({n_out - 1 - k for k in ranks}))
    return {
        tpr_column(a): np.count_nonzero(ins > part[n_out - 1 - k]) / ins.size
        for a, k in zip(fprs, ranks, strict=True)
    }


def tpr_column(fpr: float) -> str:
    """The column of the TPR at FPR ``fpr``, e.g. ``tpr_at_fpr_0.001``."""
    return f"tpr_at_fpr_{fpr:g}"


def _poisson_table() -> tuple[np.ndarray, np.ndarray]:
    """The Poisson(1) CDF F (float64, the values below 1) and a table of the Poisson(1) value of
    each 16-bit number u: the inverse CDF of U in [u, u + 1) / 2^16, or AMBIGUOUS where some
    F_k falls inside that interval."""
    pmf = np.exp(-1.0) / np.cumprod(np.r_[1.0, np.arange(1.0, 30.0)])
    cdf = np.cumsum(pmf)
    cdf = cdf[cdf < 1.0]
    u = np.arange(2**16)
    first = np.searchsorted(cdf, u / 2**16, side="right")  # the value at U = u / 2^16
    last = np.searchsorted(cdf, (u + 1) / 2**16, side="left")  # ... just below (u + 1) / 2^16
    return cdf, np.where(first == last, first, AMBIGUOUS).astype(np.uint8)


AMBIGUOUS = 255
_POISSON_CDF, _POISSON_OF_U16 = _poisson_table()


def multinomial_counts(
    rng: np.random.Generator, n: int, out: np.ndarray | None = None
) -> np.ndarray:
    """(n,) int64 (written into ``out`` if given): how often each of n items is drawn in n
    uniform draws with replacement, i.e. one Multinomial(n; 1/n, ..., 1/n) vector, exactly (to
    float64 precision), by Poissonisation: independent Poisson(1) counts are, given their total
    S, the counts of S uniform draws (Johnson, Kotz, Balakrishnan 1997, "Discrete Multivariate
    Distributions", Ch. 35); S - n of those draws chosen uniformly without replacement are then
    removed (S > n), or n - S more uniform draws added (S < n), leaving n uniform draws. A
    Poisson(1) count is the inverse CDF of a 16-bit random number (a table), with 53 more random
    bits where the 16 do not decide it (8 of the 2^16 values). Only |S - n| (about sqrt(n))
    draws are handled one by one: cheaper than drawing n indices and counting them."""
    u16 = rng.bit_generator.random_raw((n + 3) // 4).view(np.uint16)[:n]
    small = np.take(_POISSON_OF_U16, u16)
    undecided = np.flatnonzero(small == AMBIGUOUS)
    counts = np.empty(n, dtype=np.int64) if out is None else out
    counts[...] = small
    if undecided.size:
        fine = (u16[undecided] + rng.random(undecided.size)) / 2**16
        counts[undecided] = np.searchsorted(_POISSON_CDF, fine, side="right")
    extra = int(counts.sum()) - n
    if extra > 0:
        drop = rng.choice(n + extra, size=extra, replace=False)  # draws, numbered in item order
        np.subtract.at(counts, np.searchsorted(np.cumsum(counts), drop, side="right"), 1)
    elif extra < 0:
        np.add.at(counts, rng.integers(0, n, size=-extra), 1)
    return counts


def _counts(rng: np.random.Generator, n: int, b: int) -> np.ndarray:
    """(b, n) int64: ``b`` independent :func:`multinomial_counts` rows."""
    out = np.empty((b, n), dtype=np.int64)
    for r in range(b):
        multinomial_counts(rng, n, out[r])
    return out


def resample_weights(
    c: Classes, rng: np.random.Generator, b: int, cluster: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``b`` bootstrap resamples as integer weights (w, v) on the IN and the OUT scores, each
    class in decreasing order of score (the input of :func:`metrics_from_weights`).

    Without ``cluster``: per resample, the counts of n_in draws with replacement among the IN
    scores, then of n_out draws among the OUT scores (:func:`multinomial_counts`; so the
    resamples do not depend on ``BLOCK``). With ``cluster`` (one id per score, file order): per
    resample, the counts of as many draws among the distinct ids; a score weighs as often as its
    cluster was drawn.
    """
    if cluster is None:
        n_in, n_out = c.in_pos.size, c.out_pos.size
        w = np.empty((b, n_in), dtype=np.int64)
        v = np.empty((b, n_out), dtype=np.int64)
        for r in range(b):
            multinomial_counts(rng, n_in, w[r])
            multinomial_counts(rng, n_out, v[r])
        return w, v
    ids, inverse = np.unique(cluster, return_inverse=True)
    times = _counts(rng, ids.size, b)
    inverse = inverse.ravel()
    return times[:, inverse[c.in_pos]], times[:, inverse[c.out_pos]]


@dataclass
class AttackMetrics:
    """Point estimates and percentile bootstrap intervals, one entry per metric."""

    estimate: dict[str, float]
    lower: dict[str, float]
    upper: dict[str, float]
    n_in: int
    n_out: int
    resamples: int
    confidence: float
    unit: str
    method: str = "bootstrap_percentile"

    def as_row(self) -> dict[str, float | int | str | bool]:
        row: dict[str, float | int | str | bool] = {
            "epsilon": self.estimate["epsilon"],
            "valid": False,
            "estimate": "raw_counts",
        }
        for name, value in self.estimate.items():
            if name != "epsilon":
                row[name] = value
            row[f"{name}_lo"] = self.lower[name]
            row[f"{name}_hi"] = self.upper[name]
        row.update(
            n_in=self.n_in,
            n_out=self.n_out,
            ci=self.method,
            ci_unit=self.unit,
            ci_confidence=self.confidence,
            resamples=self.resamples,
        )
        return row


def attack_metrics(
    score: np.ndarray,
    member: np.ndarray,
    *,
    delta: float,
    fprs: Sequence[float] = (0.001, 0.01),
    confidence: float = 0.95,
    resamples: int = 1000,
    seed: int = 0,
    min_count: int = 10,
    cluster: np.ndarray | None = None,
) -> AttackMetrics:
    """Metrics of the scores and their two-sided ``confidence`` intervals.

    ``cluster`` (same shape as ``score``), if given: every interval is a percentile bootstrap
    over whole clusters (trials). Otherwise the intervals of :mod:`.ci` (the
    epsilon's a bootstrap with IN and OUT scores resampled separately). ``resamples`` = 0
    gives no interval (NaN bounds).
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if resamples < 0:
        raise ValueError(f"resamples must be >= 0, got {resamples}")
    if min_count < 0:
        raise ValueError(f"min_count must be >= 0, got {min_count}")
    if not 0 <= delta < 1:
        raise ValueError(f"delta must be in [0, 1), got {delta}")
    for a in fprs:
        if not 0 < a < 1:
            raise ValueError(f"fprs must lie in (0, 1), got {a}")
    c = split_classes(score, member)
    n_in, n_out = c.in_pos.size, c.out_pos.size
    n = n_in + n_out
    ones = np.ones((1, n_in), dtype=np.int64), np.ones((1, n_out), dtype=np.int64)
    point = metrics_from_weights(c, *ones, fprs, delta, min_count)
    estimate = {k: float(v[0]) for k, v in point.items()}
    rng = np.random.default_rng(seed)
    clusters = None if cluster is None else np.asarray(cluster).ravel()
    if clusters is not None and clusters.size != n:
        raise ValueError(f"cluster has {clusters.size} entries for {n} scores")
    if clusters is None:
        lower, upper = _exact_intervals(score, member, estimate, fprs, confidence, resamples)
        if resamples:
            draws = ci.epsilon_bootstrap(score, member, delta, min_count, resamples, rng)
            tail = (1 - confidence) / 2
            lower["epsilon"], upper["epsilon"] = map(float, np.quantile(draws, [tail, 1 - tail]))
    else:
        lower, upper = _cluster_bootstrap(
            c, rng, clusters, estimate, fprs, delta, min_count, confidence, resamples
        )
    unit = "trials" if clusters is not None else "canaries"
    method = "bootstrap_percentile" if clusters is not None else EXACT_CI
    return AttackMetrics(estimate, lower, upper, n_in, n_out, resamples, confidence, unit, method)


#: The ``ci`` column of independent canaries (runs): each metric's interval
#: (:mod:`.ci`).
EXACT_CI = (
    "auroc: DeLong; tpr_at_fpr: order statistic + Clopper-Pearson; "
    "balanced_accuracy: DKW-Massart; epsilon: bootstrap_percentile"
)


def _exact_intervals(score, member, estimate, fprs, confidence, resamples):
    """The intervals of :mod:`.ci` for independent canaries; NaN without
    resamples (no intervals asked for); the epsilon's is filled in by the caller."""
    nan = dict.fromkeys(estimate, float("nan"))
    lower, upper = dict(nan), dict(nan)
    if not resamples:
        return lower, upper
    score = np.asarray(score, dtype=float).ravel()
    member = np.asarray(member).ravel() == 1
    x, y = score[member], score[~member]
    alpha = 1 - confidence
    _, lower["auroc"], upper["auroc"] = ci.delong_auroc(x, y, alpha)
    for a in fprs:
        lower[tpr_column(a)], upper[tpr_column(a)] = ci.tpr_at_fpr_interval(x, y, a, alpha)
    lower["balanced_accuracy"], upper["balanced_accuracy"] = ci.balanced_accuracy_interval(
        estimate["balanced_accuracy"], x.size, y.size, alpha
    )
    return lower, upper


def _cluster_bootstrap(c, rng, clusters, estimate, fprs, delta, min_count, confidence, resamples):
    """Percentile intervals of every metric from ``resamples`` cluster-bootstrap resamples."""
    draws: dict[str, list[np.ndarray]] = {k: [] for k in estimate}
    for start in range(0, resamples, BLOCK):
        b = min(BLOCK, resamples - start)
        w, v = resample_weights(c, rng, b, clusters)
        # a cluster resample may draw no IN (or no OUT) score: skip it (rare)
        ok = (w.sum(axis=1) > 0) & (v.sum(axis=1) > 0)
        if not ok.all():
            w, v = w[ok], v[ok]
        for k, vals in metrics_from_weights(c, w, v, fprs, delta, min_count).items():
            draws[k].append(vals)
    tail = (1 - confidence) / 2
    lower, upper = {}, {}
    for k in estimate:
        vals = np.concatenate(draws[k]) if draws[k] else np.array([])
        lo, hi = np.quantile(vals, [tail, 1 - tail]) if vals.size else (np.nan, np.nan)
        lower[k], upper[k] = float(lo), float(hi)
    return lower, upper
