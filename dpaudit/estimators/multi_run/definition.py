"""Multi-run audits as the paper defines them: Clopper-Pearson rates, Eq. 1, Algorithm 5.

The reference of :mod:`.bound` (Annamalai, Balle, Hayes, De Cristofaro 2024, "To Shuffle
or not to Shuffle: Auditing DP-SGD with Shuffling", arXiv:2411.10614): one target per training
run, in the training set (``membership`` 1) or not (0), one score per run thresholded. The
false positive rate alpha (non-members called IN) and the false negative rate beta (members
called OUT) are bounded from above by one-sided Clopper-Pearson intervals
(:func:`cp_upper`; Clopper and Pearson 1934), and any (epsilon, delta)-DP mechanism keeps
(alpha, beta) in the privacy region of Kairouz et al. (their Section 3.2), so

    epsilon >= max{ ln((1 - alpha_up - delta) / beta_up), ln((1 - beta_up - delta) / alpha_up), 0 }

(Annamalai et al., Section 3.2, Eq. 1; :func:`epsilon_from_rates`). Their Appendix B,
Algorithm 5, evaluates Eq. 1 at every threshold of one sorted sweep of the scores
(:func:`sweep`, :func:`sweep_epsilons`) and reports the maximum; :func:`plain_argmax` is that
maximum computed literally, bound by bound. It is the definition the fast search of
:mod:`.search` must reproduce bit for bit (tests/estimators/test_multi_run.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import special

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
    score, membership, _ = check_scores_range(score, membership)
    return score, membership


def check_scores_range(
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


def plain_argmax(
    k0: np.ndarray,
    n0: float,
    k1: np.ndarray,
    n1: float,
    level: float,
    objective: Callable[[np.ndarray, np.ndarray], np.ndarray],
) -> tuple[int, float, float, float]:
    """Algorithm 5's maximum, literally: the Clopper-Pearson bounds of the false-positive counts
    ``k0`` (of ``n0``) and false-negative counts ``k1`` (of ``n1``) at every threshold, the
    ``objective`` (Eq. 1, or the GDP mu) at each, and the first index of the largest value.
    Returns (index, value, fpr_upper, fnr_upper). The reference of
    :func:`.search.argmax_over_thresholds`, which returns the same value (and the
    same index where the maximum is attained once) without computing every bound."""
    a = cp_upper(np.asarray(k0, dtype=np.float64), n0, level)
    b = cp_upper(np.asarray(k1, dtype=np.float64), n1, level)
    val = objective(a, b)
    j = int(np.argmax(val))
    return j, float(val[j]), float(a[j]), float(b[j])
