"""Registry of audit estimators: which score files each applies to, and how to run it.

:data:`METHODS` maps each estimator *method* to its runner (defined in the family's
``*_audit.py``) and the score-file designs it applies to; add one entry to add a method. The
audit rule runs every configured estimator on every score file whose design it applies to (the
score-file contract is in :mod:`dpaudit.scores`), and each run returns rows of one tidy table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dpaudit.estimators.attack_metrics_audit import run_attack_metrics
from dpaudit.estimators.fdp_abstention_audit import run_fdp_abstention
from dpaudit.estimators.fdp_one_run_audit import run_fdp_one_run
from dpaudit.estimators.lidp_audit import run_lidp
from dpaudit.estimators.multi_run_audit import run_gdp_fit, run_multi_run_cp
from dpaudit.estimators.one_run_audit import run_one_run
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


def _method(name: str, designs: tuple[str, ...], run: Runner) -> Method:
    return Method(name, designs, run, (run.__doc__ or "").strip())


METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        _method("attack_metrics", ("one_run", "multi_run", "lidp"), run_attack_metrics),
        _method("fdp_one_run", ("one_run",), run_fdp_one_run),
        _method("fdp_abstention", ("one_run",), run_fdp_abstention),
        _method("lidp", ("lidp",), run_lidp),
        _method("multi_run_cp", ("multi_run",), run_multi_run_cp),
        _method("gdp_fit", ("multi_run",), run_gdp_fit),
        _method("one_run", ("one_run",), run_one_run),
    )
}


def get(name: str) -> Method:
    """The method ``name`` (a clear error naming the allowed ones otherwise)."""
    try:
        return METHODS[name]
    except KeyError:
        raise KeyError(f"unknown estimator method {name!r}; allowed: {sorted(METHODS)}") from None
