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
epsilon (private selection's max-of-K, and randomized response in
tests/estimators/test_multi_run.py), so
it is an estimate, never a valid bound.

Where each part lives: :mod:`.definition` (Clopper-Pearson, Eq. 1, the sweep and Algorithm 5's
maximum computed bound by bound: the reference of the tests), :mod:`.search` (the same maximum
found by branch and bound); this module: the threshold choice (``same_data`` / ``heldout``), the
split and the result row; :mod:`.audit`: the runner over a score file.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from dpaudit.accounting.gaussian import gdp_epsilon, gdp_mu_from_rates
from dpaudit.estimators.multi_run.definition import (
    Sweep,
    check_level,
    check_scores_range,
    cp_upper,
    epsilon_from_counts,
    epsilon_from_rates,
    rate_level,
    sweep,
)
from dpaudit.estimators.multi_run.search import argmax_over_thresholds, binned_argmax
from dpaudit.estimators.selection import rules

SELECTIONS = ("same_data", "heldout")


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
    membership: np.ndarray,
    select_fraction: float,
    seed: int,
    score: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(selection indices, evaluation indices): a seeded random split within each class, the
    same for the runs in any order (:func:`_split_codes`; ``score``: the runs' scores)."""
    chosen = _split_mask(np.asarray(membership), select_fraction, seed, score)
    return np.flatnonzero(chosen), np.flatnonzero(~chosen)  # both sorted, as before


def _split_mask(
    membership: np.ndarray, select_fraction: float, seed: int, score: np.ndarray | None = None
) -> np.ndarray:
    """The selection part of :func:`stratified_split` as a boolean mask."""
    return _split_codes(membership, select_fraction, seed, score) >= 2


def _split_codes(
    membership: np.ndarray, select_fraction: float, seed: int, score: np.ndarray | None = None
) -> np.ndarray:
    """The split of :func:`stratified_split` as one int8 code per run: 1 for a member, plus 2
    in the selection part (so 0 / 1 evaluation non-member / member, 2 / 3 selection).

    Per class (non-members first, then members, from one seeded generator) the class's
    positions are shuffled and the first ``round(select_fraction * size)`` are chosen. With
    ``score``, the positions are first put in :func:`_content_order`, an order of the runs'
    contents alone, so that the same runs in any order get the same split (issue 36); without
    it (membership alone: the runs of a class are alike) they are shuffled in file order. The
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
        if score is not None:
            idx = idx[_content_order(np.asarray(score, dtype=float).ravel()[idx])]
        rng.shuffle(idx)
        k = int(round(select_fraction * idx.size))
        if k < 1 or k >= idx.size:
            raise ValueError(
                f"heldout split leaves no {'members' if cls else 'non-members'} on one side "
                f"({idx.size} in all, select_fraction {select_fraction})"
            )
        codes[idx[:k]] = cls + 2
    return codes


#: SplitMix64 (Steele, Lea, Flood 2014, "Fast splittable pseudorandom number generators",
#: OOPSLA; the mixing function of its Java 8 version): the stream increment and the two
#: multipliers of the mix.
_GOLDEN_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_MIX = (np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB))


def _mix64(z: np.ndarray) -> np.ndarray:
    """SplitMix64's mixing function (a bijection of uint64), elementwise."""
    z = (z ^ (z >> np.uint64(30))) * _MIX[0]
    z = (z ^ (z >> np.uint64(27))) * _MIX[1]
    return z ^ (z >> np.uint64(31))


def _content_order(score: np.ndarray) -> np.ndarray:
    """The order of the runs of one class that depends on their scores alone, not on their
    positions: ascending in a pseudo-random 64-bit key of each run's content, its score's
    bits ``b`` and its copy number ``j`` among the runs of the same score (0, 1, ... in file
    order; the copies are interchangeable): the (j + 1)-th output of a SplitMix64 stream
    started at ``mix(b)``. Keys unrelated to the scores' sizes make the order a pseudo-random
    permutation of the runs, so the seeded split of it stays a uniformly random split
    independent of the scores, which the held-out bound's validity needs (ordering by score
    itself would not: fixed ranks held out interleave with the chosen ones and bring the
    selection bias back). Equal keys of different scores keep the order of the bits."""
    with np.errstate(over="ignore"):  # uint64 arithmetic is modulo 2**64 by design
        by_bits = np.argsort(score.view(np.uint64), kind="stable")
        bits = score.view(np.uint64)[by_bits]
        first = np.ones(bits.size, dtype=bool)
        first[1:] = bits[1:] != bits[:-1]
        starts = np.flatnonzero(first)
        copy = np.arange(bits.size) - np.repeat(starts, np.diff(np.append(starts, bits.size)))
        key = _mix64(_mix64(bits) + (copy.astype(np.uint64) + np.uint64(1)) * _GOLDEN_GAMMA)
    return by_bits[np.argsort(key, kind="stable")]


def threshold_rule(selection: str, select_fraction: float, split_seed: int) -> rules.Strategy:
    """The selection strategy (:mod:`.selection.rules`) behind a selection name: ``same_data``
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
    :func:`_split_codes`, of the scores in the selection part), by :func:`binned_argmax` where
    it decides and by the full sweep otherwise (the same threshold either way). Returns
    ((threshold, false_pos, false_neg, counts of the others at the threshold or None),
    (value, a, b))."""

    def maximise(grid, level: float):
        found = binned_argmax(score, member, level, objective, eval_n0, eval_n1, codes, score_range)
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
    score, membership, score_range = check_scores_range(score, membership)
    level = rate_level(confidence)
    rule = threshold_rule(selection, select_fraction, split_seed)
    if isinstance(rule, rules.Uncorrected):
        maximise = _score_maximiser(score, membership, objective, score_range=score_range)
        picked = rules.select(rule, level, bound_at=None, maximise=maximise)
        (tau, fp, fn, _), (value, a, b) = picked.candidate, picked.result
        n1 = int(np.count_nonzero(membership))
        return (value, rule.valid, tau, a, b, fp, fn, n1, membership.size - n1, 0, level)
    codes = _split_codes(membership, rule.fraction, rule.seed, score)
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
