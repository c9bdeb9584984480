"""One-run audit of Steinke, Nasr and Jagielski (NeurIPS 2023), "Privacy Auditing with One (1)
Training Run".

m canaries are included by independent fair coins (their Algorithm 1); the auditor guesses IN
for the k+ highest scores, OUT for the k- lowest, and abstains on the rest (and on a tied block
of scores that straddles a cut, so that the guesses depend on the scores only: :mod:`.common.ties`).
Theorem 3.1: if the algorithm is (epsilon, delta)-DP, the number W of correct guesses out of
the r (= k+ + k- without such a tie) guesses obeys

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
from functools import partial

import numpy as np
from scipy import special, stats

from dpaudit.estimators.common.checks import check_confidence
from dpaudit.estimators.common.ties import Cut
from dpaudit.estimators.selection import rules

# The Boost routines behind scipy.stats.binom.sf / .pmf, called directly: the distribution
# object's argument handling costs more than the evaluation (same values, bit for bit).
try:
    from scipy.special._ufuncs import _binom_pmf as _BINOM_PMF
    from scipy.special._ufuncs import _binom_sf as _BINOM_SF
except ImportError:  # a SciPy that moved them: the public (slower) route

    def _BINOM_SF(k, n, p):  # noqa: N802
        return stats.binom.sf(k, n, p)

    def _BINOM_PMF(k, n, p):  # noqa: N802
        return stats.binom.pmf(k, n, p)


#: Bisection steps after bracketing, as in the paper's Appendix D code.
BISECTION_STEPS = 30


def _check_counts(m: int, r: int, v: int) -> None:
    if not (isinstance(m, int | np.integer) and isinstance(r, int | np.integer)):
        raise TypeError("m and r must be integers")
    if not 0 <= v <= r <= m:
        raise ValueError(f"need 0 <= correct <= r <= m, got correct={v}, r={r}, m={m}")


def _check_level(confidence: float, delta: float) -> None:
    check_confidence(confidence)
    if not 0.0 <= delta <= 1.0:
        raise ValueError(f"delta must lie in [0, 1], got {delta}")


def p_value(m: int, r: int, v: int, epsilon: float, delta: float) -> float:
    """P[at least ``v`` of ``r`` guesses correct] under the null "(epsilon, delta)-DP".

    The right-hand side of Theorem 3.1 (Eq. 2), capped at 1. ``alpha`` is the largest running
    mean s_i / i of the binomial pmf from v - 1 downwards (s_i = P[v - i <= Binom < v]); see
    :func:`_alpha` for why only the pmf values down to just below the mode are needed.
    """
    _check_counts(m, r, v)
    if epsilon < 0:
        raise ValueError(f"epsilon must be >= 0, got {epsilon}")
    return _p_value(m, r, v, epsilon, delta)


def _binom_sf(k: float, n: float, p: float) -> float:
    """``scipy.stats.binom.sf(k, n, p)`` for k >= 0 without the distribution's per-call
    argument handling (the same Boost routine, bit for bit)."""
    return float(_BINOM_SF(k, n, p))


def _binom_pmf(ks: np.ndarray, n: float, p: float) -> np.ndarray:
    """``scipy.stats.binom.pmf(ks, n, p)``, the same Boost routine without the overhead."""
    return _BINOM_PMF(ks, n, p)


def _alpha(r: int, v: int, q: float) -> float:
    """alpha = max_{i in 1..v} (1/i) P[v - i <= Binom(r, q) < v] of Theorem 3.1 (Eq. 3).

    The running means of the pmf values x_i = P[Binom = v - i] are computed in chunks from
    k = v - 1 downwards, with the same sequential cumulative sum as one pass over all v values.
    Below the mode floor((r + 1) q) the pmf decreases as k decreases, so once a chunk reaches
    the mode and its last value is at most the running mean there, no later mean can be larger:
    the mean of a prefix followed by values that are each at most it cannot grow.
    """
    mode = math.floor((r + 1) * q)
    best = -math.inf
    total = 0.0
    done = 0  # pmf values summed so far (k = v - 1 ... v - done)
    top = _last_representable(r, q, v - 1)
    if top < v - 1:  # pmf(k) = 0.0 in floating point for top < k <= v - 1: s_i = 0 there
        done, best = v - 1 - top, 0.0
    size = max(64, v - 1 - done - mode + 64)
    while done < v:
        hi = v - 1 - done
        lo = max(0, hi - size + 1)
        pm = _binom_pmf(np.arange(hi, lo - 1, -1, dtype=np.float64), r, q)
        s = np.cumsum(np.concatenate(([total], pm)))[1:]
        means = s / np.arange(done + 1, done + pm.size + 1)
        best = max(best, float(means.max()))
        total = float(s[-1])
        done += pm.size
        if lo <= mode and pm[-1] <= means[-1]:
            break
        size *= 2
    return best


#: -log of a number below the smallest positive double (4.9e-324 = e^-744.4), with a margin.
_UNDERFLOW = 760.0


def _last_representable(r: int, q: float, k_max: int) -> int:
    """The largest k <= ``k_max`` whose binomial pmf may be nonzero in floating point.

    Above the mean, P[Binom(r, q) = k] <= P[Binom >= k] <= exp(-r KL(k/r || q)) (the Chernoff
    bound), so every k with r KL(k/r || q) > 760 has a pmf below e^-760, which rounds to 0.0.
    KL grows with k above r q: a bisection on integers finds the boundary.
    """
    if k_max <= r * q or q <= 0.0 or q >= 1.0:
        return k_max

    def exponent(k: int) -> float:
        a = k / r
        left = a * math.log(a / q)
        right = (1 - a) * math.log((1 - a) / (1 - q)) if a < 1 else 0.0
        return r * (left + right)

    if exponent(k_max) <= _UNDERFLOW:
        return k_max
    lo, hi = math.ceil(r * q), k_max  # exponent(lo) <= 760 < exponent(hi)
    if exponent(lo) > _UNDERFLOW:
        return lo - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if exponent(mid) <= _UNDERFLOW:
            lo = mid
        else:
            hi = mid
    return lo


def _p_value(m: int, r: int, v: int, epsilon: float, delta: float) -> float:
    """:func:`p_value` without the argument checks (the bisection calls it ~35 times)."""
    q = float(special.expit(epsilon))
    beta = _binom_sf(v - 1, r, q) if v > 0 else 1.0
    if delta == 0 or v == 0:
        return min(1.0, beta)
    return min(1.0, beta + _alpha(r, v, q) * delta * 2 * m)


def epsilon_lower_bound(m: int, r: int, v: int, delta: float, confidence: float = 0.95) -> float:
    """The largest epsilon rejected at level ``1 - confidence`` (0 if none is).

    Bisection as in the full version's Appendix D: grow the upper end in steps of 1 until the
    test no longer rejects, then 30 halvings; the lower end (a rejected epsilon) is returned.
    """
    _check_counts(m, r, v)
    _check_level(confidence, delta)
    return _bisect(m, r, v, delta, 1.0 - confidence)


def _bisect(m: int, r: int, v: int, delta: float, p: float) -> float:
    """The bisection of :func:`epsilon_lower_bound` at test level ``p`` (checked inputs)."""
    if r == 0 or _p_value(m, r, v, 0.0, delta) >= p:
        return 0.0
    lo, hi = 0.0, 1.0
    while _p_value(m, r, v, hi, delta) < p:
        lo, hi = hi, hi + 1.0
    for _ in range(BISECTION_STEPS):
        mid = 0.5 * (lo + hi)
        if _p_value(m, r, v, mid, delta) < p:
            lo = mid
        else:
            hi = mid
    return lo


def _rejects(m: int, r: int, v: int, epsilon: float, delta: float, p: float) -> bool:
    """Whether the test rejects (epsilon, delta)-DP at level ``p``: first the cheap
    delta = 0 part (beta alone at least p means no rejection), then the full p-value."""
    q = float(special.expit(epsilon))
    if v == 0 or _binom_sf(v - 1, r, q) >= p:
        return False
    return _p_value(m, r, v, epsilon, delta) < p


def best_over_rows(
    rows: Sequence[tuple[int, int, int, int]], level: float, *, mm: int, delta: float
) -> tuple[tuple[int, int, int, int], tuple[float, int, int, int]]:
    """The row of largest :func:`epsilon_lower_bound` (the first in ``rows`` on ties), as
    :func:`selection.rules.best_of` over ``rows`` returns it, with fewer bisections.

    Rows are visited in decreasing order of a cheap score (the Clopper-Pearson lower bound of
    their precision v / r). A row is skipped when the test does not reject at the best epsilon
    found so far: its bisection only ever returns rejected epsilons, and the p-value grows with
    epsilon, so its bound is strictly smaller. While the best is 0, a row whose test does not
    reject even at 0 has bound exactly 0 (the bisection's first step) without a bisection.
    """
    if not rows:
        raise ValueError("the candidate grid is empty")
    p = 1.0 - level
    r = np.array([row[2] for row in rows], dtype=np.float64)
    v = np.array([row[3] for row in rows], dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        precision = np.where(v > 0, 1.0 - special.betaincinv(r - v + 1.0, v, 1.0 - p), 0.0)
    order = np.argsort(-np.nan_to_num(precision, nan=0.0), kind="stable")
    best_i, best_eps = -1, -1.0
    for i in order.tolist():
        _, _, ri, vi = rows[i]
        if best_i >= 0 and not _rejects(mm, ri, vi, best_eps, delta, p):
            if best_eps > 0.0 or i > best_i:
                continue  # bound < best, or a tie at 0 that comes later in the grid
            eps = 0.0  # no rejection at epsilon = 0: the bisection returns 0
        else:
            eps = _bisect(mm, ri, vi, delta, p) if ri else 0.0
        if eps > best_eps or (eps == best_eps and i < best_i):
            best_i, best_eps = i, eps
    row = rows[best_i]
    return row, (best_eps, row[2], row[3], mm)


def guess_counts(
    score: np.ndarray, membership: np.ndarray, k_plus: int, k_minus: int
) -> tuple[int, int]:
    """(r, correct) when guessing IN for the ``k_plus`` highest scores and OUT for the
    ``k_minus`` lowest (Algorithm 1, step 7), abstaining on a tied block that straddles either
    cut (:mod:`.common.ties`): r <= k_plus + k_minus, and the counts do not depend on the order of
    the canaries."""
    n = len(score)
    if k_plus < 0 or k_minus < 0 or k_plus + k_minus > n:
        raise ValueError(f"need k+ + k- <= m = {n}, got k+={k_plus}, k-={k_minus}")
    if k_plus + k_minus == 0:
        return 0, 0
    (_, _, r, correct), *_ = _guess_table(score, membership, [(k_plus, k_minus)])
    return r, correct


def _guess_table(
    score: np.ndarray, membership: np.ndarray, grid: Sequence[tuple[int, int]]
) -> list[tuple[int, int, int, int]]:
    """(k+, k-, r, correct) for every grid point that fits (0 < k+ + k- <= m), from one sort;
    r counts the guesses actually made (:mod:`.common.ties`: a tie straddling a cut is abstained
    on)."""
    n = len(score)
    member = np.asarray(membership, dtype=np.int64).ravel()
    cut = Cut(score, member)
    pairs = np.array([(kp, km) for kp, km in grid if 0 < kp + km <= n], dtype=np.int64)
    if not pairs.size:
        return []
    kp, km = cut.top(pairs[:, 0]), cut.bottom(pairs[:, 1])
    # members among the IN guesses + non-members among the OUT guesses
    correct = cut.sum_top(kp) + km - cut.sum_bottom(km)
    return [
        (int(a), int(b), int(c), int(d))
        for a, b, c, d in zip(pairs[:, 0], pairs[:, 1], kp + km, correct, strict=True)
    ]


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
    """One row of the audit table for the one-run estimator: ``k_plus``/``k_minus`` the chosen
    grid point, ``r`` the guesses made there (fewer than k_plus + k_minus when a tie straddles a
    cut, :mod:`.common.ties`), ``correct`` how many of them were right."""

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
    (strategies of :mod:`.selection.rules`).

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
        maximise = None
        if isinstance(rule, rules.Bonferroni | rules.Uncorrected):
            maximise = partial(best_over_rows, mm=m, delta=delta)
        picked = rules.select(
            rule, confidence, bound_at, key=_epsilon_of, maximise=maximise, held_out=held_out
        )
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

        return bound_b, rules.HeldOut(
            rows_a, on_rows(ma), transfer, maximise=partial(best_over_rows, mm=ma, delta=delta)
        )
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
