"""Confidence intervals of the attack metrics for independent canaries (or runs), each computed
from one sort of the scores, in O(m log m) (the bootstrap over m canaries costs O(m) per
resample; see :mod:`.metrics`).

IN scores X_1..X_n1 and OUT scores Y_1..Y_n0 are independent samples of two distributions; the
rule is "score >= t means IN". Each interval has two-sided confidence ``1 - alpha``:

* AUROC: DeLong, DeLong and Clarke-Pearson (1988), "Comparing the areas under two or more
  correlated receiver operating characteristic curves: a nonparametric approach", Biometrics
  44(3):837-845: the Mann-Whitney AUROC is the mean of the IN placement values, its variance
  S10 / n1 + S01 / n0 from the placement values of each class; the normal interval, clipped to
  [0, 1]. Asymptotic (not a finite-sample guarantee).
* TPR at FPR a, the estimand sup {TPR(t) : FPR(t) <= a}: exact and distribution-free. The true
  FPR of the j-th highest OUT score is the j-th order statistic of n0 uniforms (stochastically
  bounded under ties), Beta(j, n0 - j + 1) (David and Nagaraja 2003, "Order Statistics",
  Sec. 7.1), so an OUT order statistic j_lo (j_hi) is, with probability >= 1 - alpha/4, a
  threshold of FPR at most (at least) a; the TPR at that threshold is monotone in it, and
  given the OUT scores the IN count above it is Binomial(n1, TPR), bounded by Clopper and
  Pearson (1934, Biometrika 26(4):404-413) at alpha/4. The union bound gives 1 - alpha.
* Balanced accuracy (1 + D) / 2, D = max(0, sup_t TPR(t) - FPR(t)) (the Kolmogorov-Smirnov
  distance): the Dvoretzky-Kiefer-Wolfowitz inequality with Massart's constant (Massart 1990,
  "The tight constant in the Dvoretzky-Kiefer-Wolfowitz inequality", Annals of Probability
  18(3):1269-1283) bounds each empirical distribution function uniformly by
  sqrt(log(4 / alpha) / (2 n)) with probability 1 - alpha/2, so |D_hat - D| is at most the sum
  of the two. Finite-sample and valid for any distributions, conservative.
* The raw-count epsilon (a maximum of ratios over thresholds chosen on the data): no exact
  interval; the percentile bootstrap of :mod:`.metrics` (IN and OUT resampled
  separately, ``resamples`` times), drawn here in two stages so that a resample costs far less
  than m (:func:`epsilon_bootstrap`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import special, stats


def delong_auroc(x: np.ndarray, y: np.ndarray, alpha: float) -> tuple[float, float, float]:
    """(AUROC, lower, upper): ties count one half (mid-ranks); x the IN, y the OUT scores.
    Computed on the sorted scores, so that the floating-point sums, too, are the same for every
    order of the canaries."""
    x_up, y_up = np.sort(x), np.sort(y)
    # placement of each IN score among the OUT ones, and of each OUT score among the IN ones
    v10 = (np.searchsorted(y_up, x_up, "left") + np.searchsorted(y_up, x_up, "right")) / (
        2 * y.size
    )
    below_x = np.searchsorted(x_up, y_up, "left") + np.searchsorted(x_up, y_up, "right")
    v01 = 1 - below_x / (2 * x.size)
    auc = float(v10.mean())
    var = (v10.var(ddof=1) if x.size > 1 else 0.0) / x.size
    var += (v01.var(ddof=1) if y.size > 1 else 0.0) / y.size
    half = float(special.ndtri(1 - alpha / 2)) * math.sqrt(var)
    return auc, max(0.0, auc - half), min(1.0, auc + half)


def _clopper_pearson(k: int, n: int, alpha: float, side: str) -> float:
    """One-sided Clopper-Pearson bound at level ``alpha`` on a Binomial(n, p) count k."""
    if side == "lower":
        return 0.0 if k == 0 else float(stats.beta.ppf(alpha, k, n - k + 1))
    return 1.0 if k == n else float(stats.beta.ppf(1 - alpha, k + 1, n - k))


def tpr_at_fpr_interval(
    x: np.ndarray, y: np.ndarray, fpr: float, alpha: float
) -> tuple[float, float]:
    """Exact interval (module docstring) of sup {TPR(t) : FPR(t) <= fpr}."""
    n0 = y.size
    y_down = np.sort(y)[::-1]
    x_up = np.sort(x)
    j = np.arange(1, n0 + 1)

    def end(ok: np.ndarray, pick: Any, search: str, side: str, none: float) -> float:
        """The Clopper-Pearson ``side`` bound on the TPR of the threshold at the order
        statistic ``pick(j[ok])`` (``search``: ">" or ">=" it), ``none`` where no j is ok."""
        if not ok.any():
            return none
        k = int(x.size - np.searchsorted(x_up, y_down[int(pick(j[ok])) - 1], search))
        return _clopper_pearson(k, x.size, alpha / 4, side)

    # P[U_(j) <= a] = P[Binomial(n0, a) >= j]: the threshold "> y_(j)" has FPR <= a
    lower = end(stats.binom.sf(j - 1, n0, fpr) >= 1 - alpha / 4, np.max, "right", "lower", 0.0)
    # P[U_(j) > a] = P[Binomial(n0, a) <= j - 1]: the threshold ">= y_(j)" has FPR > a
    upper = end(stats.binom.cdf(j - 1, n0, fpr) >= 1 - alpha / 4, np.min, "left", "upper", 1.0)
    return lower, upper


def balanced_accuracy_interval(
    estimate: float, n_in: int, n_out: int, alpha: float
) -> tuple[float, float]:
    """DKW-Massart interval (module docstring) around the balanced accuracy ``estimate``."""
    eps = sum(math.sqrt(math.log(4 / alpha) / (2 * n)) for n in (n_in, n_out))
    return max(0.5, estimate - eps / 2), min(1.0, estimate + eps / 2)


#: Number of blocks of the pooled sorted scores in :func:`epsilon_bootstrap` (performance
#: only: the resamples' maxima are exact).
BLOCKS = 256
#: Resamples processed together (memory only).
CHUNK = 50


def _block_edges(group_start: np.ndarray, n: int) -> np.ndarray:
    """Cut positions 0 = e_0 < ... = n at distinct-score boundaries (``group_start``): fine
    near both ends, where the ratios of the raw-count epsilon peak, about n / BLOCKS apart in
    the middle."""
    fine = np.round(16 * 1.5 ** np.arange(40)).astype(np.intp)
    fine = fine[fine < n // 2]
    want = np.unique(np.r_[0, fine, n - fine, np.linspace(0, n, BLOCKS + 1).round(), n])
    snapped = group_start[np.searchsorted(group_start, want, side="right") - 1]
    return np.unique(np.r_[snapped, n]).astype(np.intp)


def _ratios(tp, fp, n_in, n_out, delta, cnt):
    """Best of log's arguments at cuts with (TP, FP): (TPR - delta) / FPR where FP >= cnt and
    (TNR - delta) / FNR where FN >= cnt, 0 where neither applies."""
    with np.errstate(divide="ignore", invalid="ignore"):
        fwd_num = (tp / n_in - delta) * n_out
        fwd = np.where((fp >= cnt) & (fwd_num > 0), fwd_num / fp, 0.0)
        fn = n_in - tp
        rev_num = ((n_out - fp) / n_out - delta) * n_in
        rev = np.where((fn >= cnt) & (rev_num > 0), rev_num / fn, 0.0)
    return np.maximum(fwd, rev)


def epsilon_bootstrap(
    score: np.ndarray,
    member: np.ndarray,
    delta: float,
    min_count: int,
    resamples: int,
    rng: np.random.Generator,
    counts=None,
) -> np.ndarray:
    # Long (110 lines): one chunk's two-stage draw (block totals, then the expanded blocks) takes
    # the generator's numbers in this fixed order (a split that reorders the draws changes every
    # interval), and a third of the body is the tests' ``counts`` branch and _spread's arguments.
    """``resamples`` bootstrap draws of the raw-count epsilon (:mod:`.metrics`), the IN
    and the OUT scores each resampled with replacement (n1 and n0 draws).

    Two stages, exactly the same law as drawing the n1 (n0) indices: the pooled scores are
    sorted and cut into blocks at distinct-score boundaries; a resample's draws per block are
    Multinomial(n1; a_k / n1) (Multinomial(n0; b_k / n0)) for a block of a_k IN (b_k OUT)
    scores, which fixes TP and FP at every block edge; only where a block's bound on the ratios
    (TP at most its end value, FP at least its start value) beats the best edge value is the
    block expanded, its draws spread uniformly over its scores (given its total, they are
    uniform draws among them). So each resample's maximum is exact.

    ``counts`` (tests only): a function (resample index, block start, block end) -> (IN counts,
    OUT counts) of the scores in that block (pooled order), replacing the random second stage.
    """
    score = np.asarray(score, dtype=float).ravel()
    member = np.asarray(member).ravel().astype(bool)
    order = np.argsort(-score, kind="stable")
    s, is_in = score[order], member[order]
    n, n_in = s.size, int(is_in.sum())
    n_out = n - n_in
    group_start = np.r_[0, np.flatnonzero(s[1:] != s[:-1]) + 1]
    cut_ok = np.zeros(n + 1, dtype=bool)  # cut after position p - 1 is a threshold
    cut_ok[group_start] = True
    cut_ok[n] = True
    edges = _block_edges(group_start, n)
    lo, hi = edges[:-1], edges[1:]
    cum_in = np.r_[0, np.cumsum(is_in)]
    a, b = np.diff(cum_in[edges]), np.diff(edges) - np.diff(cum_in[edges])
    in_idx, out_idx = np.flatnonzero(is_in), np.flatnonzero(~is_in)
    cnt = max(min_count, 1)
    out = np.empty(resamples)
    for start in range(0, resamples, CHUNK):
        rows = np.arange(start, min(start + CHUNK, resamples))
        if counts is None:
            w = rng.multinomial(n_in, a / n_in, size=rows.size)
            v = rng.multinomial(n_out, b / n_out, size=rows.size)
        else:
            pairs = [counts(r, lo_k, hi_k) for r in rows for lo_k, hi_k in zip(lo, hi, strict=True)]
            w = np.array([p[0].sum() for p in pairs]).reshape(rows.size, -1)
            v = np.array([p[1].sum() for p in pairs]).reshape(rows.size, -1)
        tp = np.zeros((rows.size, edges.size), dtype=np.int64)
        fp = np.zeros_like(tp)
        np.cumsum(w, axis=1, out=tp[:, 1:])
        np.cumsum(v, axis=1, out=fp[:, 1:])
        best = np.maximum(_ratios(tp, fp, n_in, n_out, delta, cnt).max(axis=1), 1.0)
        # a block's bound on its inner cuts: TP at most its end value, FP at least its start
        # value (and at least cnt where the ratio counts), so both ratios at most these
        with np.errstate(divide="ignore", invalid="ignore"):
            fwd_num = (tp[:, 1:] / n_in - delta) * n_out
            fwd = np.where(fwd_num > 0, fwd_num / np.maximum(fp[:, :-1], cnt), 0.0)
            rev_num = ((n_out - fp[:, :-1]) / n_out - delta) * n_in
            rev = np.where(rev_num > 0, rev_num / np.maximum(n_in - tp[:, 1:], cnt), 0.0)
        bound = np.maximum(fwd, rev)
        need_r, need_k = np.nonzero(bound > best[:, None])
        if need_r.size:
            seg_len = hi[need_k] - lo[need_k]
            seg_start = np.cumsum(seg_len) - seg_len
            total = int(seg_len.sum())
            if counts is None:
                first_in = cum_in[lo[need_k]]
                inc_in = _spread(
                    rng,
                    w[need_r, need_k],
                    first_in,
                    a[need_k],
                    in_idx,
                    lo[need_k],
                    seg_start,
                    total,
                )
                inc_out = _spread(
                    rng,
                    v[need_r, need_k],
                    lo[need_k] - first_in,
                    b[need_k],
                    out_idx,
                    lo[need_k],
                    seg_start,
                    total,
                )
            else:
                inc_in, inc_out = np.zeros(total), np.zeros(total)
                for p, (r, k) in enumerate(zip(need_r, need_k, strict=True)):
                    ci, co = counts(rows[r], lo[k], hi[k])
                    inc_in[seg_start[p] : seg_start[p] + seg_len[p]] = ci
                    inc_out[seg_start[p] : seg_start[p] + seg_len[p]] = co
            seg = np.repeat(np.arange(need_r.size), seg_len)
            c_in, c_out = (
                _segment_cumsum(inc_in, seg_start, seg_len),
                _segment_cumsum(inc_out, seg_start, seg_len),
            )
            pos = np.arange(total) - np.repeat(seg_start, seg_len) + np.repeat(lo[need_k], seg_len)
            tp_in = tp[need_r, need_k][seg] + c_in  # TP of the cut after each position
            fp_in = fp[need_r, need_k][seg] + c_out
            val = np.where(cut_ok[pos + 1], _ratios(tp_in, fp_in, n_in, n_out, delta, cnt), 0.0)
            np.maximum.at(best, need_r[seg], val)
        out[rows] = np.log(best)
    return out


def _segment_cumsum(x: np.ndarray, seg_start: np.ndarray, seg_len: np.ndarray) -> np.ndarray:
    """Cumulative sums of ``x`` restarted at every segment (inclusive)."""
    c = np.cumsum(x)
    return c - np.repeat(c[seg_start] - x[seg_start], seg_len)


def _spread(rng, draws, first, size, idx, lo, seg_start, total):
    """Per expanded block: ``draws`` uniform draws among its ``size`` scores of one class
    (global class ranks first .. first + size - 1, pooled positions idx[...]), counted at their
    positions in the concatenation of the expanded blocks."""
    draws = np.asarray(draws, dtype=np.int64)
    if draws.sum() == 0:
        return np.zeros(total)
    owner = np.repeat(np.arange(draws.size), draws)
    pick = (rng.random(owner.size) * size[owner]).astype(np.int64)
    where = idx[first[owner] + pick] - lo[owner] + seg_start[owner]
    return np.bincount(where, minlength=total).astype(float)
