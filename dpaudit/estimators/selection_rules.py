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

:func:`select` applies a strategy given a per-candidate bound function. The names that an
estimator writes into its output rows (``fixed``, ``bonferroni``, ``sample_split``,
``same_data``, ``heldout``, ...) stay the estimator's own; :func:`strategy` maps the names shared
by the one-run estimators to strategies.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import numpy as np

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


Strategy = Explicit | Bonferroni | Uncorrected | Split


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


#: The selection names of the one-run estimators, in their output rows.
ONE_RUN_SELECTIONS = ("fixed", "grid_max_uncorrected", "bonferroni", "sample_split")


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
    raise ValueError(f"unknown selection {name!r}; allowed: {', '.join(ONE_RUN_SELECTIONS)}")
