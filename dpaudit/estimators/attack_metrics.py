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

Every metric here is a maximum over thresholds chosen on the same data (except AUROC, which
averages over all of them), so an exact interval at the chosen threshold (Clopper-Pearson on
its TPR) would ignore the choice. The intervals are percentile bootstrap intervals instead
(Efron and Tibshirani 1993, Ch. 13) that re-choose the threshold in every resample: the IN and
OUT scores are resampled with replacement separately (a stratified bootstrap over canaries or
runs), or whole trials are resampled (a cluster bootstrap, for LiDP files whose canaries share
a model). They describe the sampling variability of the estimate, asymptotically; they are not
finite-sample guarantees.

Implementation: a resample is a vector of integer weights on the original scores, so every
resample reuses one sort of the pooled scores; per resample the ROC counts are cumulative sums
of the weights over the distinct scores in decreasing order (O(m) per resample).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

#: The bootstrap resamples are processed in blocks of this many (memory: block x distinct scores).
BLOCK = 16


@dataclass(frozen=True)
class Sorted:
    """The pooled scores grouped by distinct value, in decreasing order of score."""

    group: np.ndarray  # (n,) index of each original score's distinct value (0 = highest)
    n_groups: int
    is_in: np.ndarray  # (n,) bool


def sort_scores(score: np.ndarray, member: np.ndarray) -> Sorted:
    """Group the pooled scores by distinct value, highest first."""
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


def _best_log_ratio(num: np.ndarray, den: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """max(0, max over columns where ``ok`` of log(num / den)), per row."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(ok & (num > 0), num / den, 0.0)
    return np.log(np.maximum(ratio.max(axis=1), 1.0))


def metrics_from_counts(
    tp: np.ndarray, fp: np.ndarray, fprs: Sequence[float], delta: float, min_count: int
) -> dict[str, np.ndarray]:
    """The metrics of each row of ROC counts (see the module docstring), arrays of shape (B,)."""
    n_in, n_out = tp[:, -1:], fp[:, -1:]
    out: dict[str, np.ndarray] = {}
    # Mann-Whitney with ties counted 1/2 (= the trapezoids between consecutive ROC points):
    # each OUT score counts the IN scores above it plus half of those tied with it
    d_fp = np.diff(fp, axis=1)
    above = np.einsum("bj,bj->b", d_fp, tp[:, :-1] + np.diff(tp, axis=1) / 2)
    out["auroc"] = above / (n_in[:, 0] * n_out[:, 0])
    rows = np.arange(tp.shape[0])
    for a in fprs:
        # FP is non-decreasing along a row: the last column with FP <= a * n_out
        last = np.sum(fp <= a * n_out * (1 + 1e-12), axis=1) - 1
        out[tpr_column(a)] = tp[rows, last] / n_in[:, 0]
    out["balanced_accuracy"] = (1 + np.max(tp / n_in - fp / n_out, axis=1)) / 2
    c = max(min_count, 1)
    # log((TPR - delta) / FPR) and log((TNR - delta) / FNR), Eq. (1) with raw rates
    fwd = _best_log_ratio((tp / n_in - delta) * n_out, fp, fp >= c)
    fn = n_in - tp
    rev = _best_log_ratio(((n_out - fp) / n_out - delta) * n_in, fn, fn >= c)
    out["epsilon"] = np.maximum(fwd, rev)
    return out


def tpr_column(fpr: float) -> str:
    """The column of the TPR at FPR ``fpr``, e.g. ``tpr_at_fpr_0.001``."""
    return f"tpr_at_fpr_{fpr:g}"


def _counts(draws: np.ndarray, n: int) -> np.ndarray:
    """(b, n) how often each of n items appears in each row of ``draws`` (b, k)."""
    b = draws.shape[0]
    idx = (np.arange(b)[:, None] * n + draws).ravel()
    return np.bincount(idx, minlength=b * n).reshape(b, n).astype(float)


def stratified_weights(s: Sorted, rng: np.random.Generator, b: int) -> np.ndarray:
    """(b, n) weights: the IN and the OUT scores each resampled with replacement."""
    w = np.zeros((b, s.is_in.size))
    for cls in (np.flatnonzero(s.is_in), np.flatnonzero(~s.is_in)):
        w[:, cls] = _counts(rng.integers(0, cls.size, size=(b, cls.size)), cls.size)
    return w


def cluster_weights(cluster: np.ndarray, rng: np.random.Generator, b: int) -> np.ndarray:
    """(b, n) weights: whole clusters (trials) resampled with replacement."""
    ids, inverse = np.unique(cluster, return_inverse=True)
    times = _counts(rng.integers(0, ids.size, size=(b, ids.size)), ids.size)
    return times[:, inverse.ravel()]


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
            ci="bootstrap_percentile",
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
    """Metrics of the scores and their ``confidence`` percentile bootstrap intervals.

    ``cluster`` (same shape as ``score``), if given, resamples whole clusters (trials);
    otherwise IN and OUT scores are resampled separately. ``resamples`` = 0 gives no interval
    (NaN bounds).
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
    s = sort_scores(score, member)
    n = s.is_in.size
    point = metrics_from_counts(*roc_counts(s, np.ones((1, n))), fprs, delta, min_count)
    estimate = {k: float(v[0]) for k, v in point.items()}
    rng = np.random.default_rng(seed)
    clusters = None if cluster is None else np.asarray(cluster).ravel()
    if clusters is not None and clusters.size != n:
        raise ValueError(f"cluster has {clusters.size} entries for {n} scores")
    draws: dict[str, list[np.ndarray]] = {k: [] for k in estimate}
    for start in range(0, resamples, BLOCK):
        b = min(BLOCK, resamples - start)
        if clusters is None:
            w = stratified_weights(s, rng, b)
        else:
            w = cluster_weights(clusters, rng, b)
        tp, fp = roc_counts(s, w)
        # a cluster resample may draw no IN (or no OUT) score: skip it (rare; counted below)
        ok = (tp[:, -1] > 0) & (fp[:, -1] > 0)
        for k, v in metrics_from_counts(tp[ok], fp[ok], fprs, delta, min_count).items():
            draws[k].append(v)
    tail = (1 - confidence) / 2
    lower, upper = {}, {}
    for k in estimate:
        vals = np.concatenate(draws[k]) if draws[k] else np.array([])
        lo, hi = np.quantile(vals, [tail, 1 - tail]) if vals.size else (np.nan, np.nan)
        lower[k], upper[k] = float(lo), float(hi)
    unit = "trials" if clusters is not None else "canaries"
    return AttackMetrics(
        estimate,
        lower,
        upper,
        int(s.is_in.sum()),
        int((~s.is_in).sum()),
        resamples,
        confidence,
        unit,
    )
