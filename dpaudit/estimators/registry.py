"""Registry of audit estimators: which score files each applies to, and how to run it.

:data:`METHODS` maps each estimator *method* to its runner (defined in the family's
``*_audit.py``) and the score-file designs it applies to; add one entry to add a method. The
audit rule runs every configured estimator on every score file whose design it applies to (the
score-file contract is in :mod:`dpaudit.scores`), and each run returns rows of one tidy table.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
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
    """One estimator method: its name, the score-file designs it applies to and where its
    runner lives (``"module:function"``). The runner's module is imported on first use of
    :attr:`run`, so that reading the names and designs (the workflow does, in every Snakemake
    process, each cluster job's included) imports no estimator family and none of SciPy."""

    name: str
    designs: tuple[str, ...]
    runner: str

    @property
    def run(self) -> Runner:
        module, _, function = self.runner.partition(":")
        return getattr(importlib.import_module(module), function)

    @property
    def doc(self) -> str:
        return (self.run.__doc__ or "").strip()

    def applies(self, sf: ScoreFile) -> bool:
        return sf.meta["design"] in self.designs


def _method(name: str, designs: tuple[str, ...], runner: str) -> Method:
    return Method(name, designs, f"dpaudit.estimators.{runner}")


METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        _method(
            "attack_metrics",
            ("one_run", "multi_run", "lidp"),
            "attack_metrics_audit:run_attack_metrics",
        ),
        _method("fdp_one_run", ("one_run",), "fdp_one_run_audit:run_fdp_one_run"),
        _method("fdp_abstention", ("one_run",), "fdp_abstention_audit:run_fdp_abstention"),
        _method("lidp", ("lidp",), "lidp_audit:run_lidp"),
        _method("multi_run_cp", ("multi_run",), "multi_run_audit:run_multi_run_cp"),
        _method("gdp_fit", ("multi_run",), "multi_run_audit:run_gdp_fit"),
        _method("one_run", ("one_run",), "one_run_audit:run_one_run"),
    )
}


def get(name: str) -> Method:
    """The method ``name`` (a clear error naming the allowed ones otherwise)."""
    try:
        return METHODS[name]
    except KeyError:
        raise KeyError(f"unknown estimator method {name!r}; allowed: {sorted(METHODS)}") from None
