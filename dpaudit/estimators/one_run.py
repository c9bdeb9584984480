"""One-run audit of Steinke, Nasr and Jagielski (NeurIPS 2023), "Privacy Auditing with One (1)
Training Run".

m canaries are included by independent fair coins (their Algorithm 1); the auditor guesses IN
for the k+ highest scores, OUT for the k- lowest, and abstains on the rest. Theorem 3.1: if the
algorithm is (epsilon, delta)-DP, the number W of correct guesses out of r = k+ + k- obeys

    P[W >= v] <= f(v) + delta * m * alpha,          f(v) = P[Binom(r, q) >= v],
    alpha = max_{i in 1..v} (2/i) P[v > Binom(r, q) >= v - i],   q = e^eps / (1 + e^eps)

(Eqs. 2-3). Inverting this test gives a lower bound on epsilon at the chosen confidence. The
computation follows the full version's Appendix D (bisection on epsilon, returning the lower,
conservative end of the bracket); full version: arXiv:2305.08846.

Choosing (k+, k-) after looking at the guesses is multiple testing. :func:`audit_scores`
offers these choices and labels each: ``fixed`` (from config),
``grid_max_uncorrected`` (the paper's practice, not a valid 1-confidence bound), ``bonferroni``
(every grid point tested at level (1 - confidence) / |grid|) and ``sample_split`` (choose on one
half of the canaries, bound on the other half).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

import numpy as np
from scipy import special, stats

from dpaudit.estimators import selection_rules as rules

#: Bisection steps after bracketing, as in the paper's Appendix D code.
BISECTION_STEPS = 30


def _check_counts(m: int, r: int, v: int) -> None:
    if not (isinstance(m, int | np.integer) and isinstance(r, int | np.integer)):
        raise TypeError("m and r must be integers")
    if not 0 <= v <= r <= m:
        raise ValueError(f"need 0 <= correct <= r <= m, got correct={v}, r={r}, m={m}")


def _check_level(confidence: float, delta: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    if not 0.0 <= delta <= 1.0:
        raise ValueError(f"delta must lie in [0, 1], got {delta}")


def p_value(m: int, r: int, v: int, epsilon: float, delta: float) -> float:
    """P[at least ``v`` of ``r`` guesses correct] under the null "(epsilon, delta)-DP".

    The right-hand side of Theorem 3.1 (Eq. 2), capped at 1. ``alpha`` is computed from the
    binomial pmf in one vectorised pass: s_i = P[v - i <= Binom < v] is a cumulative sum of
    pmf values from v - 1 downwards.
    """
    _check_counts(m, r, v)
    if epsilon < 0:
        raise ValueError(f"epsilon must be >= 0, got {epsilon}")
    q = float(special.expit(epsilon))
    beta = float(stats.binom.sf(v - 1, r, q))
    if delta == 0 or v == 0:
        return min(1.0, beta)
    ks = np.arange(v - 1, -1, -1)  # v-1, v-2, ..., 0
    s = np.cumsum(stats.binom.pmf(ks, r, q))
    alpha = float(np.max(s / np.arange(1, v + 1)))
    return min(1.0, beta + alpha * delta * 2 * m)


def epsilon_lower_bound(m: int, r: int, v: int, delta: float, confidence: float = 0.95) -> float:
    """The largest epsilon rejected at level ``1 - confidence`` (0 if none is).

    Bisection as in the full version's Appendix D: grow the upper end in steps of 1 until the
    test no longer rejects, then 30 halvings; the lower end (a rejected epsilon) is returned.
    """
    _check_counts(m, r, v)
    _check_level(confidence, delta)
    p = 1.0 - confidence
    if r == 0 or p_value(m, r, v, 0.0, delta) >= p:
        return 0.0
    lo, hi = 0.0, 1.0
    while p_value(m, r, v, hi, delta) < p:
        lo, hi = hi, hi + 1.0
    for _ in range(BISECTION_STEPS):
        mid = 0.5 * (lo + hi)
        if p_value(m, r, v, mid, delta) < p:
            lo = mid
        else:
            hi = mid
    return lo


def guess_counts(
    score: np.ndarray, membership: np.ndarray, k_plus: int, k_minus: int
) -> tuple[int, int]:
    """(r, correct) when guessing IN for the ``k_plus`` highest scores and OUT for the
    ``k_minus`` lowest (Algorithm 1, step 7). Ties are broken by position (stable sort)."""
    n = len(score)
    if k_plus < 0 or k_minus < 0 or k_plus + k_minus > n:
        raise ValueError(f"need k+ + k- <= m = {n}, got k+={k_plus}, k-={k_minus}")
    order = np.argsort(-np.asarray(score), kind="stable")
    member = np.asarray(membership)[order]
    correct = int(member[:k_plus].sum()) + int((1 - member[n - k_minus :]).sum())
    return k_plus + k_minus, correct


def _guess_table(
    score: np.ndarray, membership: np.ndarray, grid: Sequence[tuple[int, int]]
) -> list[tuple[int, int, int, int]]:
    """(k+, k-, r, correct) for every grid point, from one sort."""
    n = len(score)
    order = np.argsort(-np.asarray(score), kind="stable")
    member = np.asarray(membership, dtype=np.int64)[order]
    top_in = np.concatenate([[0], np.cumsum(member)])  # members among the k highest
    bottom_out = np.concatenate([[0], np.cumsum(1 - member[::-1])])  # non-members among k lowest
    rows = []
    for kp, km in grid:
        if kp + km > n or kp + km == 0:
            continue
        rows.append((kp, km, kp + km, int(top_in[kp] + bottom_out[km])))
    return rows


def default_grid(m: int, ks: Iterable[int] | None = None) -> list[tuple[int, int]]:
    """(k+, k-) pairs: one-sided (k, 0) and (0, k) and balanced (k, k) for k in ``ks``.

    Without ``ks``: 1, 2, 5 times powers of ten up to m (our default; the paper gives no grid).
    """
    if ks is None:
        ks = [c * 10**e for e in range(7) for c in (1, 2, 5) if c * 10**e <= m]
    ks = sorted({int(k) for k in ks if 0 < int(k) <= m})
    grid = {(k, 0) for k in ks} | {(0, k) for k in ks} | {(k, k) for k in ks if 2 * k <= m}
    return sorted(grid)


@dataclass
class OneRunResult:
    """One row of the audit table for the one-run estimator."""

    selection: str
    epsilon: float
    k_plus: int
    k_minus: int
    r: int
    correct: int
    m: int
    confidence: float
    level_per_test: float
    grid_size: int
    valid: bool

    def as_row(self) -> dict:
        return asdict(self)


def audit_scores(
    score: np.ndarray,
    membership: np.ndarray,
    delta: float,
    confidence: float = 0.95,
    grid: Sequence[tuple[int, int]] | None = None,
    selections: Sequence[str] = ("grid_max_uncorrected", "bonferroni"),
    fixed: tuple[int, int] | None = None,
    split_seed: int = 0,
) -> list[OneRunResult]:
    """One-run lower bounds for one model's canary scores, one result per selection rule
    (strategies of :mod:`.selection_rules`).

    ``score`` and ``membership`` are 1-D over the m randomized canaries (higher score = IN).
    """
    score = np.asarray(score, dtype=float).ravel()
    membership = np.asarray(membership).ravel()
    m = len(score)
    _check_level(confidence, delta)
    grid = list(grid) if grid is not None else default_grid(m)
    out: list[OneRunResult] = []
    for sel in selections:
        rule = rules.strategy(sel, grid, fixed, split_seed, "fixed=(k_plus, k_minus)")
        if isinstance(rule, rules.Bonferroni | rules.Uncorrected):
            # candidates: the (k+, k-, r, correct) rows of the grid points that fit
            rule = type(rule)(_guess_table(score, membership, grid))
        bound_at, held_out = _bound_functions(rule, score, membership, grid, delta)
        picked = rules.select(rule, confidence, bound_at, key=_epsilon_of, held_out=held_out)
        kp, km = picked.candidate[:2]
        eps, r, v, mm = picked.result
        level = picked.level
        out.append(
            OneRunResult(
                sel, eps, kp, km, r, v, mm, confidence, level, picked.grid_size, picked.valid
            )
        )
    return out


def _epsilon_of(bound: tuple[float, int, int, int]) -> float:
    return bound[0]


def _bound_functions(
    rule: rules.Strategy,
    score: np.ndarray,
    membership: np.ndarray,
    grid: Sequence[tuple[int, int]],
    delta: float,
) -> tuple[rules.BoundAt, rules.HeldOut | None]:
    """(bound_at, held_out) for :func:`rules.select`; a bound is the tuple
    (epsilon, r, correct, m of the part bounded)."""
    m = len(score)

    def on_rows(mm: int) -> rules.BoundAt:
        def bound_at(row: tuple[int, int, int, int], level: float):
            _, _, r, v = row
            return epsilon_lower_bound(mm, r, v, delta, level), r, v, mm

        return bound_at

    if isinstance(rule, rules.Split):
        # Choose the guess *fractions* on half A, apply them to half B.
        a, b = rule.halves(m)
        ma, mb = len(a), len(b)
        rows_a = _guess_table(score[a], membership[a], default_grid(ma, _ks(grid, ma, m)))

        def transfer(row: tuple[int, int, int, int]) -> tuple[int, int]:
            return round(row[0] * mb / ma), round(row[1] * mb / ma)

        def bound_b(pair: tuple[int, int], level: float):
            r, v = guess_counts(score[b], membership[b], *pair)
            return (epsilon_lower_bound(mb, r, v, delta, level) if r else 0.0), r, v, mb

        return bound_b, rules.HeldOut(rows_a, on_rows(ma), transfer)
    if isinstance(rule, rules.Explicit):

        def bound_fixed(pair: tuple[int, int], level: float):
            r, v = guess_counts(score, membership, *pair)
            return epsilon_lower_bound(m, r, v, delta, level), r, v, m

        return bound_fixed, None
    return on_rows(m), None


def _ks(grid: Sequence[tuple[int, int]], m_half: int, m: int) -> list[int]:
    """The grid's k values rescaled to a half of the canaries."""
    ks = {max(1, round(k * m_half / m)) for pair in grid for k in pair if k}
    return sorted(ks)


def max_attainable(m: int, delta: float, confidence: float = 0.95) -> float:
    """The ceiling of the audit: all r = m guesses correct (Theorem 3.1 at v = r = m)."""
    return epsilon_lower_bound(m, m, m, delta, confidence)


def pure_dp_closed_form(r: int, confidence: float = 0.95) -> float:
    """delta = 0 and all r guesses correct: q^r = 1 - confidence, epsilon = logit(q)."""
    q = (1 - confidence) ** (1 / r)
    return math.log(q / (1 - q))
