"""What the user's loader really delivered, step by step: :class:`SamplingRecord` (pure NumPy).

The conformance checks of the sampling stage (:mod:`dpaudit.attach.sampling_checks`) read the
records (dataset indices) that each *noisy* step of the training really received, never a rate
the user states. A record is fed the logical batches the loader yields (:meth:`deliver`, e.g.
from the wrapped batch sampler of :mod:`dpaudit.attach.loader_probe`, or by hand from a
hand-written loop) and told when a noisy step is taken (:meth:`close_step`, from the noise call).
The batches delivered since the previous noisy step form that step's records (``by_time``); a
loader with worker processes fetches ahead, so there each noisy step takes the oldest delivered
batch (``by_order``, which cannot see two logical batches accumulated into one step).

Kept per record i: the number of noisy steps whose batch held it (``presence``, at most once
per step); per step: the number of distinct records and the largest multiplicity of one record
(a record twice in one step, e.g. a sampler drawing with replacement), the largest ``presence``
after it (``top_counts``) and how many of its records the previous step also held
(``overlaps``): the per-step series the anytime-valid checks read
(:mod:`dpaudit.attach.sampling_checks`). Memory O(n + steps).

:meth:`close_step` only sets a step's batches aside; they are counted every
:data:`DEFERRED` steps and before any of the counts above is read, step after step as they
came: the same counts, at a fraction of the cost of counting one step at a time between the
training's large tensor operations (issue 37, Done when 3).
"""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np

ASSOCIATIONS = ("by_time", "by_order")
#: Noisy steps set aside before their records are counted (see the module docstring).
DEFERRED = 64


def _unique_counts(idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(idx, return_counts=True)`` of a 1-d integer array, without its generic
    overhead (it runs once per noisy step: issue 37, Done when 3, the per-step cost)."""
    s = np.sort(idx)
    edge = np.empty(s.size + 1, dtype=bool)
    edge[0] = edge[-1] = True
    np.not_equal(s[1:], s[:-1], out=edge[1:-1])
    starts = np.flatnonzero(edge)
    return s[starts[:-1]], np.diff(starts)


class SamplingRecord:
    """The records each noisy step received from a dataset of ``n_records`` (see the module
    docstring); ``association``: ``by_time`` or ``by_order``; ``source`` names what was
    observed (shown in the report)."""

    def __init__(self, n_records: int, association: str = "by_time", source: str = "") -> None:
        if isinstance(n_records, bool) or not isinstance(n_records, int | np.integer):
            raise ValueError(f"n_records must be an integer >= 1, got {n_records!r}")
        if n_records < 1:
            raise ValueError(f"n_records must be an integer >= 1, got {n_records!r}")
        if association not in ASSOCIATIONS:
            raise ValueError(f"association must be one of {list(ASSOCIATIONS)}")
        self.n_records = int(n_records)
        self.association = association
        self.source = source
        self._presence = np.zeros(self.n_records, dtype=np.int64)
        self._sizes: list[int] = []  # distinct records per noisy step
        self._max_multiplicity: list[int] = []  # largest count of one record in a step
        self._batches_per_step: list[int] = []  # logical batches merged into each noisy step
        self.batches_delivered = 0
        self._top_counts: list[int] = []  # largest presence after each noisy step
        self._overlaps: list[int] = []  # records of each step also in the previous step
        self._out_of_range = 0  # indices outside 0..n_records - 1
        self._first_out_of_range: int | None = None  # the first step that delivered one
        self.unobservable: str | None = None  # why the indices could not be read, if so
        self._pending: deque[np.ndarray] = deque()
        # the closed steps not counted yet: their batches, or None (indices unreadable)
        self._closed: list[list[np.ndarray] | None] = []
        self._previous = np.zeros(self.n_records, dtype=bool)  # the previous step's records
        self._last = np.zeros(0, dtype=np.int64)
        self._top = 0

    def deliver(self, indices: Any) -> None:
        """One logical batch the loader yielded: its dataset indices (any integer sequence)."""
        self.batches_delivered += 1
        if self.unobservable is not None:
            return
        try:
            idx = np.array(indices, dtype=np.int64).reshape(-1)  # a copy: kept till next step
        except (TypeError, ValueError):
            self.unobservable = (
                f"batch {self.batches_delivered} holds indices that are not integers "
                f"({type(indices).__name__})"
            )
            self._pending.clear()
            return
        self._pending.append(idx)

    @property
    def steps(self) -> int:
        """Noisy steps closed so far."""
        return len(self._sizes) + len(self._closed)

    @property
    def pending_batches(self) -> int:
        """Logical batches delivered after the last noisy step (not trained on yet)."""
        return len(self._pending)

    def close_step(self) -> None:
        """A noisy step was taken: its records are the batches delivered since the previous
        one (``by_time``) or the oldest delivered batch (``by_order``); counted later
        (:meth:`_count`, see the module docstring)."""
        if self.unobservable is not None:
            self._closed.append(None)
        elif self.association == "by_order":
            self._closed.append([self._pending.popleft()] if self._pending else [])
        else:
            self._closed.append(list(self._pending))
            self._pending.clear()
        if len(self._closed) >= DEFERRED:
            self._count()

    def _count(self) -> None:
        """Count the steps set aside, in their order."""
        for batches in self._closed:
            self._count_step(batches)
        self._closed.clear()

    def _count_step(self, batches: list[np.ndarray] | None) -> None:
        """Count one closed step's records (None: its indices could not be read)."""
        if batches is None:
            self._sizes.append(0)
            self._max_multiplicity.append(0)
            self._batches_per_step.append(0)
            self._top_counts.append(self._top)
            self._overlaps.append(0)
            return
        if len(batches) == 1:
            idx = batches[0]
        else:
            idx = np.concatenate(batches) if batches else np.zeros(0, dtype=np.int64)
        # a strictly increasing batch (Opacus' Poisson sampler yields one) is its own distinct
        # records, each once, and its ends are its extremes: no sort (issue 37, Done when 3)
        increasing = idx.size < 2 or bool((idx[1:] > idx[:-1]).all())
        if idx.size and (
            (idx[0] < 0 or idx[-1] >= self.n_records)
            if increasing
            else (idx.min() < 0 or idx.max() >= self.n_records)
        ):
            bad = (idx < 0) | (idx >= self.n_records)
            self._out_of_range += int(bad.sum())
            if self._first_out_of_range is None:
                self._first_out_of_range = len(self._sizes) + 1
            idx = idx[~bad]
        if increasing:
            uniq, top_count = idx, 1 if idx.size else 0
        else:
            uniq, counts = _unique_counts(idx)
            top_count = int(counts.max()) if counts.size else 0
        if uniq.size:
            present = self._presence[uniq] + 1
            self._presence[uniq] = present
            self._top = max(self._top, int(present.max()))
        self._top_counts.append(self._top)
        self._overlaps.append(int(self._previous[uniq].sum()))
        self._previous[self._last] = False
        self._previous[uniq] = True
        self._last = uniq
        self._sizes.append(int(uniq.size))
        self._max_multiplicity.append(top_count)
        self._batches_per_step.append(len(batches))

    @property
    def presence(self) -> np.ndarray:
        """Per record, the noisy steps whose batch held it."""
        self._count()
        return self._presence

    @property
    def sizes(self) -> list[int]:
        """Per noisy step, its distinct records."""
        self._count()
        return self._sizes

    @property
    def max_multiplicity(self) -> list[int]:
        """Per noisy step, the largest count of one record in it."""
        self._count()
        return self._max_multiplicity

    @property
    def batches_per_step(self) -> list[int]:
        """Per noisy step, the logical batches merged into it."""
        self._count()
        return self._batches_per_step

    @property
    def top_counts(self) -> list[int]:
        """Per noisy step, the largest presence after it."""
        self._count()
        return self._top_counts

    @property
    def overlaps(self) -> list[int]:
        """Per noisy step, its records the previous step also held."""
        self._count()
        return self._overlaps

    @property
    def out_of_range(self) -> int:
        """Indices outside 0..n_records - 1 delivered so far."""
        self._count()
        return self._out_of_range

    @property
    def first_out_of_range(self) -> int | None:
        """The first noisy step that delivered such an index."""
        self._count()
        return self._first_out_of_range
