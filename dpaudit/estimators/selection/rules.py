"""How an estimator chooses its threshold or guess count: one set of strategies for all.

Every estimator that tunes something (a score threshold, the numbers k+ / k- of guesses, the
number r of released guesses) computes a lower bound for each candidate and must say how the
reported candidate was chosen, because choosing after looking at the data is multiple testing.
The strategies, in the manner of the threshold strategies of jax_privacy's auditing module:

* :class:`Explicit`: the candidate is fixed in advance (from the config); valid at the stated
  confidence.
* :class:`Bonferroni`: every candidate of a grid is tested at level ``(1 - confidence) / |grid|``
  and the best bound is reported; valid by the union bound.
* :class:`Uncorrected`: the best bound over a grid, each at the nominal level, on the same data
  (the practice of Steinke, Nasr, Jagielski 2023, arXiv:2305.08846, and of Annamalai et al.
  2024, Appendix B, Algorithm 5); NOT a valid bound at the stated confidence.
* :class:`Split`: the candidate is chosen on one part of the data (uncorrected maximum there)
  and the bound is computed on the other part only; valid.
* :class:`MultiSplit`: K independent random splits, each a :class:`Split` run at confidence
  1 - gamma (1 - confidence); the reported bound is the ceil(gamma K)-th largest of the K split
  bounds (:func:`combine_splits`); valid under any dependence between the splits (quantile
  aggregation of p-values, below). gamma = 1/2 is twice the median p-value, gamma = 1/K the
  Bonferroni correction over splits (the largest split bound at 1 - (1 - confidence) / K).

:func:`select` applies a strategy given a per-candidate bound function. The names that an
estimator writes into its output rows (``fixed``, ``bonferroni``, ``sample_split``,
``same_data``, ``heldout``, ...) stay the estimator's own; :func:`strategy` maps the names shared
by the one-run estimators to strategies.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import numpy as np

from dpaudit.estimators.common.checks import check_confidence

C = TypeVar("C")  # a candidate: a threshold, a (k+, k-) pair, a guess count r, ...
R = TypeVar("R")  # what the bound function returns for a candidate

#: (candidate, per-test confidence level) -> the bound at that candidate.
BoundAt = Callable[[Any, float], Any]
#: The bound's value to maximise (by default the result itself, a float epsilon).
Key = Callable[[Any], float]
#: A faster maximiser over a grid (e.g. a pruned sweep): (grid, level) -> (candidate, result).
Maximiser = Callable[[Sequence[Any], float], tuple[Any, Any]]


@dataclass(frozen=True)
class Explicit(Generic[C]):
    """A candidate fixed before seeing the data: one test at the nominal level; valid."""

    candidate: C
    valid: bool = True


@dataclass(frozen=True)
class Bonferroni(Generic[C]):
    """Best bound over ``grid``, each candidate tested at level (1 - confidence) / |grid|."""

    grid: Sequence[C]
    valid: bool = True

    def level(self, confidence: float) -> float:
        return 1 - (1 - confidence) / len(self.grid)


@dataclass(frozen=True)
class Uncorrected(Generic[C]):
    """Best bound over ``grid`` at the nominal level on the same data; NOT valid."""

    grid: Sequence[C]
    valid: bool = False

    def level(self, confidence: float) -> float:
        return confidence


@dataclass(frozen=True)
class Split:
    """Choose on a held-out part of the data, bound on the rest; valid.

    ``seed`` seeds the random split and ``fraction`` is the share used for choosing (how the
    split is drawn, e.g. stratified by membership, is the estimator's: see :meth:`halves` for
    the plain one).
    """

    seed: int = 0
    fraction: float = 0.5
    valid: bool = True

    def halves(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """(choose, evaluate) index arrays: a seeded permutation of ``n`` items cut at n // 2."""
        perm = np.random.default_rng(self.seed).permutation(n)
        return perm[: n // 2], perm[n // 2 :]


@dataclass(frozen=True)
class MultiSplit:
    """K random splits, each a :class:`Split` at :meth:`level`, combined by :func:`combine_splits`.

    Validity (quantile aggregation of p-values: Meinshausen, Meier and Buehlmann 2009, "P-values
    for high-dimensional regression", JASA 104, Sec. 2.2, Theorem 3.1, whose gamma = 1/2 is
    twice the median; Vovk and Wang 2020, "Combining p-values via averaging", Biometrika 107).
    Let eps be the true epsilon and eps_s the bound of split s at confidence 1 - gamma alpha
    (alpha = 1 - confidence). Each split is a valid :class:`Split`, so P[eps_s > eps] <= gamma
    alpha, whatever the other splits did. Let N = #{s : eps_s > eps} and k = ceil(gamma K). The
    k-th largest eps_s exceeds eps only if N >= k, and by Markov's inequality

        P[N >= k] <= E[N] / k <= K gamma alpha / k <= alpha,

    since k >= gamma K. No independence between splits is needed (they share the data).
    """

    splits: int = 10
    quantile: float = 0.5
    seed: int = 0
    fraction: float = 0.5
    valid: bool = True

    def __post_init__(self) -> None:
        if int(self.splits) < 1:
            raise ValueError(f"multi_split needs at least one split, got splits={self.splits}")
        if not 0 < self.quantile <= 1:
            raise ValueError(f"multi_split quantile must lie in (0, 1], got {self.quantile}")

    def level(self, confidence: float) -> float:
        """The confidence of each split's bound: 1 - quantile * (1 - confidence)."""
        return 1 - self.quantile * (1 - confidence)

    def rank(self) -> int:
        """k = ceil(quantile * splits): the reported bound is the k-th largest split bound."""
        return max(1, math.ceil(self.quantile * self.splits - 1e-12))

    def split(self, s: int) -> Split:
        """The s-th split: its seed derived from (seed, s), so splits are distinct and fixed."""
        state = np.random.SeedSequence([int(self.seed), int(s)]).generate_state(1)[0]
        return Split(int(state), self.fraction)


Strategy = Explicit | Bonferroni | Uncorrected | Split | MultiSplit


@dataclass
class HeldOut:
    """What :class:`Split` needs from the estimator: the grid and bound function on the
    choosing part, and how a candidate chosen there carries over to the evaluation part."""

    grid: Sequence[Any]
    bound_at: BoundAt | None
    transfer: Callable[[Any], Any]
    #: optional faster search over ``grid`` (see :func:`select`'s ``maximise``)
    maximise: Maximiser | None = None


@dataclass
class Selected(Generic[C, R]):
    """The chosen candidate, its bound, the per-test level, the grid size and validity."""

    candidate: C
    result: R
    level: float
    grid_size: int
    valid: bool


def _identity(result: Any) -> float:
    return result


def best_of(
    grid: Sequence[C], level: float, bound_at: BoundAt, key: Key = _identity
) -> tuple[C, Any]:
    """The candidate with the largest ``key(bound_at(candidate, level))``; the first on ties."""
    best: tuple[C, Any] | None = None
    for cand in grid:
        res = bound_at(cand, level)
        if best is None or key(res) > key(best[1]):
            best = (cand, res)
    if best is None:
        raise ValueError("the candidate grid is empty")
    return best


def select(
    rule: Strategy,
    confidence: float,
    bound_at: BoundAt,
    key: Key = _identity,
    maximise: Maximiser | None = None,
    held_out: HeldOut | None = None,
) -> Selected:
    """Apply a selection strategy.

    ``bound_at(candidate, level)`` is the bound at one candidate (for :class:`Split`, on the
    evaluation part); ``key`` its value to maximise; ``maximise`` optionally replaces the loop
    over a grid by a faster search with the same maximum; ``held_out`` is required by
    :class:`Split`: the choice is made there by the uncorrected maximum at ``confidence``,
    carried over by ``held_out.transfer`` and bounded once by ``bound_at``.
    """
    if isinstance(rule, Explicit):
        return Selected(rule.candidate, bound_at(rule.candidate, confidence), confidence, 1, True)
    if isinstance(rule, Bonferroni | Uncorrected):
        level = rule.level(confidence)
        if maximise is not None:
            cand, res = maximise(rule.grid, level)
        else:
            cand, res = best_of(rule.grid, level, bound_at, key)
        return Selected(cand, res, level, len(rule.grid), rule.valid)
    if isinstance(rule, Split):
        if held_out is None:
            raise ValueError("the Split strategy needs the held-out part (held_out=)")
        if held_out.maximise is not None:
            chosen, _ = held_out.maximise(held_out.grid, confidence)
        else:
            chosen, _ = best_of(held_out.grid, confidence, held_out.bound_at, key)
        cand = held_out.transfer(chosen)
        return Selected(cand, bound_at(cand, confidence), confidence, 1, True)
    raise TypeError(f"not a selection strategy: {rule!r}")


@dataclass
class Combined(Generic[R]):
    """What :func:`combine_splits` reports: the chosen split's result (the ``rank``-th
    largest), every split's result (in split order) and the per-split confidence."""

    result: R
    rank: int
    results: list[R]
    level: float


def combine_splits(
    rule: MultiSplit,
    confidence: float,
    run_split: Callable[[Split, float], R],
    key: Key = _identity,
) -> Combined[R]:
    """Run ``run_split(split, level)`` on each of ``rule``'s splits at ``rule.level(confidence)``
    and report the ``rule.rank()``-th largest ``key`` (see :class:`MultiSplit` for why this is a
    valid lower bound at ``confidence``)."""
    check_confidence(confidence)
    level = rule.level(confidence)
    results = [run_split(rule.split(s), level) for s in range(int(rule.splits))]
    order = sorted(range(len(results)), key=lambda i: key(results[i]), reverse=True)
    k = rule.rank()
    return Combined(results[order[k - 1]], k, results, level)


def combine_p_values(p_values: Sequence[float], quantile: float) -> float:
    """min(1, q / quantile), q the ceil(quantile K)-th smallest of the K p-values: the p-value
    of the quantile aggregation (Meinshausen, Meier and Buehlmann 2009, Theorem 3.1)."""
    ps = sorted(float(p) for p in p_values)
    if not ps:
        raise ValueError("no p-values to combine")
    k = max(1, math.ceil(quantile * len(ps) - 1e-12))
    return min(1.0, ps[k - 1] / quantile)


#: The selection names of the one-run estimators, in their output rows.
ONE_RUN_SELECTIONS = ("fixed", "grid_max_uncorrected", "bonferroni", "sample_split", "multi_split")


def strategy(name: str, grid: Sequence[C], fixed: C | None, split_seed: int, what: str) -> Strategy:
    """The strategy behind a one-run selection name; ``what`` names the fixed parameter in the
    error raised when ``fixed`` is needed but missing."""
    if name == "fixed":
        if fixed is None:
            raise ValueError(f"selection 'fixed' needs {what}")
        return Explicit(fixed)
    if name == "grid_max_uncorrected":
        return Uncorrected(grid)
    if name == "bonferroni":
        return Bonferroni(grid)
    if name == "sample_split":
        return Split(split_seed)
    if name == "multi_split":
        raise ValueError(
            "multi_split combines several sample splits: run it with combine_splits "
            "(dpaudit.estimators.selection.multi_split), not as a single strategy"
        )
    raise ValueError(f"unknown selection {name!r}; allowed: {', '.join(ONE_RUN_SELECTIONS)}")
