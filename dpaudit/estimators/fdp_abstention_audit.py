"""Applies the f-DP audit in one run with abstention (:mod:`.fdp_abstention`; Mahloujifar,
Melis and Chaudhuri 2025, arXiv:2410.22235) to single-model score files.

Per trial, the auditor guesses on r canaries and abstains on the rest (rule ``guess``, as the
tight one-run audit: ``balanced``, ``top_in`` or ``centered``); the recursion bounds the number
of correct guesses under the null family. r is chosen by the same selection rules as the tight
one-run audit (:mod:`.fdp_one_run_audit`: ``fixed``, ``grid_max_uncorrected`` (NOT valid),
``bonferroni``, ``sample_split``, ``multi_split``), which this runner shares.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from dpaudit.estimators import fdp_abstention
from dpaudit.estimators.fdp_one_run_audit import run_released_guess_audit
from dpaudit.scores import ScoreFile


def run_fdp_abstention(sf: ScoreFile, params: dict[str, Any]) -> list[dict[str, Any]]:
    """f-DP audit in one run with abstention (Mahloujifar, Melis, Chaudhuri 2025: the recursion
    of their Algorithm 3), per trial, per selection rule of the number of guesses. Family
    ``subsampled_gaussian`` (DP-SGD curves, the paper's Sec. 4) takes the sampling rate ``q``
    and the number of ``steps``."""
    bound = fdp_abstention.epsilon_lower_bound
    if params.get("family") is not None:
        family = fdp_abstention.check_family(params["family"])
        steps = params.get("steps")
        if steps is not None and family != "subsampled_gaussian":
            raise ValueError("fdp_abstention: steps belongs to family subsampled_gaussian only")
        if family == "subsampled_gaussian":
            bound = partial(bound, steps=1 if steps is None else int(steps))
    return run_released_guess_audit(sf, params, "fdp_abstention", bound)
