"""Registry of audit estimators: which score files each applies to, and how to run it.

Every estimator family registers one *method* here with :func:`register`. The audit rule runs
every configured estimator on every score file whose design it applies to (the score-file
contract is in :mod:`dpaudit.scores`), and each run returns rows of one tidy table.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from dpaudit.scores import ScoreFile

#: A runner takes a score file and the estimator's parameters and returns table rows. Every
#: row must carry ``epsilon`` (the lower bound, or the estimate) and ``valid`` (True when the
#: number is a statistically valid lower bound at the stated confidence, False for an
#: uncorrected or point estimate), plus any diagnostics of the method.
Runner = Callable[[ScoreFile, dict[str, Any]], list[dict[str, Any]]]


@dataclass(frozen=True)
class Method:
    name: str
    designs: tuple[str, ...]
    run: Runner
    doc: str

    def applies(self, sf: ScoreFile) -> bool:
        return sf.meta["design"] in self.designs


METHODS: dict[str, Method] = {}


def register(name: str, designs: Sequence[str]) -> Callable[[Runner], Runner]:
    """Decorator: register ``func`` as the runner of estimator method ``name``."""

    def deco(func: Runner) -> Runner:
        if name in METHODS:
            raise ValueError(f"estimator method {name!r} registered twice")
        METHODS[name] = Method(name, tuple(designs), func, (func.__doc__ or "").strip())
        return func

    return deco


def get(name: str) -> Method:
    try:
        return METHODS[name]
    except KeyError:
        raise KeyError(f"unknown estimator method {name!r}; allowed: {sorted(METHODS)}") from None
