"""Applies the f-DP audit in one run with abstention (:mod:`.bound`; Mahloujifar,
Melis and Chaudhuri 2025, arXiv:2410.22235) to single-model score files.

Per trial, the auditor guesses on r canaries and abstains on the rest (rule ``guess``, as the
tight one-run audit: ``balanced``, ``top_in`` or ``centered``); the recursion bounds the number
of correct guesses under the null family. r is chosen by the same selection rules as the tight
one-run audit (:mod:`.fdp_one_run.audit`: ``fixed``, ``grid_max_uncorrected`` (NOT valid),
``bonferroni``, ``sample_split``, ``multi_split``), which this runner shares.

Family ``subsampled_gaussian`` (the paper's DP-SGD curves, Sec. 3.1: fixed sampling rate q and
number of steps, varying noise) takes q and the steps from the estimator block, or, where the
block leaves them null, from the score file's metadata (:data:`META_Q`, :data:`META_STEPS`: the
Poisson rate and the steps of the run's nominal schedule, which the training job records,
:meth:`dpaudit.training.spec.RunSpec.schedule`). A value the block gives wins over the file's:
the null family is the auditor's hypothesis, and the bound is valid for whichever curve is
named; the q and steps used are reported in each row's ``q`` and ``steps`` columns.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from dpaudit.estimators.fdp_abstention import bound as fdp_abstention
from dpaudit.estimators.fdp_one_run.audit import run_released_guess_audit
from dpaudit.scores import ScoreFile, ScoreFileError

#: Score-file metadata key of DP-SGD's Poisson sampling rate q (the training job's schedule).
META_Q = "sample_rate"
#: Score-file metadata key of the number of DP-SGD steps.
META_STEPS = "steps"


def sgm_schedule(sf: ScoreFile, q: float | None, steps: int | None) -> tuple[float, int]:
    """(q, steps) of the ``subsampled_gaussian`` null on score file ``sf``: each from the
    estimator block where given, else from the file's metadata (:data:`META_Q`,
    :data:`META_STEPS`); a value neither gives is an error naming the file and the keys."""
    found = {}
    for key, given, meta_key in (("q", q, META_Q), ("steps", steps, META_STEPS)):
        value = given if given is not None else sf.meta.get(meta_key)
        if value is None:
            raise ScoreFileError(
                f"{sf.source}: fdp_abstention family subsampled_gaussian needs {key}, but the "
                f"estimator block leaves it null and the score file's metadata has no "
                f"{meta_key!r}; give estimators.<name>.{key} in the config"
            )
        found[key] = value
    q_used, steps_used = found["q"], found["steps"]
    if isinstance(steps_used, bool) or not float(steps_used).is_integer() or steps_used < 1:
        raise ScoreFileError(f"{sf.source}: steps must be an integer >= 1, got {steps_used!r}")
    if isinstance(q_used, bool) or not 0.0 < float(q_used) <= 1.0:
        raise ScoreFileError(f"{sf.source}: q must be a sampling rate in (0, 1], got {q_used!r}")
    return float(q_used), int(steps_used)


def run_fdp_abstention(sf: ScoreFile, params: dict[str, Any]) -> list[dict[str, Any]]:
    """f-DP audit in one run with abstention (Mahloujifar, Melis, Chaudhuri 2025: the recursion
    of their Algorithm 3), per trial, per selection rule of the number of guesses. Family
    ``subsampled_gaussian`` (DP-SGD curves, the paper's Sec. 3.1) takes the sampling rate ``q``
    and the number of ``steps`` from ``params``, or from the score file where they are null
    (:func:`sgm_schedule`), and reports them in the rows' ``q`` and ``steps``."""
    bound = fdp_abstention.epsilon_lower_bound
    if params.get("family") is None:
        return run_released_guess_audit(sf, params, "fdp_abstention", bound)
    family = fdp_abstention.check_family(params["family"])
    if family != "subsampled_gaussian":
        if params.get("steps") is not None:
            raise ValueError("fdp_abstention: steps belongs to family subsampled_gaussian only")
        return run_released_guess_audit(sf, params, "fdp_abstention", bound)
    q, steps = sgm_schedule(sf, params.get("q"), params.get("steps"))
    bound = partial(bound, steps=steps)
    rows = run_released_guess_audit(sf, {**params, "q": q}, "fdp_abstention", bound)
    return [{**row, "q": q, "steps": steps} for row in rows]
