"""Reference lines of the shuffling paper's figures (Annamalai, Balle, Hayes, De Cristofaro).

Fig. 3 (§6.2.1) draws, next to the audited epsilon of the Batched Gaussian Mechanism, the
"Theoretical epsilon (Poisson)" (what DP-SGD would satisfy with Poisson subsampling at q = 1/T,
PRV accountant in the paper, PLD here, docs/accounting.md) and the "Theoretical epsilon (Shuffle,
lower bound)" of Chua et al. (ICML 2024), which the paper's converged audits match but do not
exceed. Both are flat in the number of observations; :func:`fig3_reference_lines` returns them
on the same x grid as the simulation so the two tables can be overlaid.

Figs. 6-7 (§6.3.2-6.3.3) fix the *claimed* (Poisson) epsilon and calibrate sigma;
:func:`calibrated_reference_lines` returns, per claimed epsilon, the calibrated (or given and
checked) sigma, the accountant's epsilon at that sigma and the Chua et al. lower bound (the
ceiling of an audit of the conjectured worst-case pair).

Each function returns a tidy table with columns ``x``, ``y``, ``series`` plus ``sigma``,
``steps_per_epoch``, ``reference`` (``poisson_epsilon`` / ``shuffle_lower_bound``) and ``delta``.

:func:`audit_bgm` audits a simulation of both hypotheses of the Batched Gaussian Mechanism with
Clopper-Pearson (the paper's Algorithm 5, for tests and quick checks).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from dpaudit.accounting.shuffling import poisson_reference_epsilon
from dpaudit.estimators.multi_run import bound as multi_run
from dpaudit.mechanisms import shuffle_reference as ref
from dpaudit.mechanisms.bgm_calibrated import resolve_sigma
from dpaudit.scores import ScoreFile

POISSON = "Theoretical eps (Poisson)"
SHUFFLE_LB = "Theoretical eps (Shuffle, lower bound)"


def _check_list(name: str, values: Sequence[float]) -> list[float]:
    values = list(values)
    if not values:
        raise ValueError(f"{name} must be a non-empty list")
    return values


def fig3_reference_lines(
    steps_per_epoch: int = 100,
    sigmas: Sequence[float] = (0.5, 1.0, 1.5),
    runs: Sequence[int] = (1000, 10000, 100000, 1000000, 10000000),
    delta: float = 1e-5,
) -> pd.DataFrame:
    """Fig. 3: Poisson epsilon and Chua et al.'s shuffle lower bound per sigma (one epoch),
    repeated at every number of runs ``runs`` (the x axis of the audit)."""
    sigmas = _check_list("sigmas", sigmas)
    runs = _check_list("runs", runs)
    rows = []
    for sigma in sigmas:
        lines = {
            "poisson_epsilon": (
                POISSON, poisson_reference_epsilon(sigma, steps_per_epoch, 1, delta)),
            "shuffle_lower_bound": (
                SHUFFLE_LB, ref.shuffle_lower_bound(sigma, steps_per_epoch, delta)),
        }
        for key, (label, value) in lines.items():
            for n in runs:
                rows.append({
                    "x": int(n), "y": float(value), "series": f"{label}, sigma={sigma:g}",
                    "reference": key, "sigma": float(sigma),
                    "steps_per_epoch": int(steps_per_epoch), "delta": float(delta),
                })
    return pd.DataFrame(rows)


def calibrated_reference_lines(
    steps_per_epoch: int = 100,
    target_epsilons: Sequence[float] = (1.0, 2.0, 4.0),
    sigmas: Sequence[float | None] | None = None,
    delta: float = 1e-5,
    tolerance: float = 0.01,
) -> pd.DataFrame:
    """Figs. 6-7: per claimed (Poisson) epsilon, one epoch at q = 1/T: the sigma (calibrated
    when ``sigmas`` is None or an entry is None, else checked), the accountant's epsilon at that
    sigma and Chua et al.'s lower bound. ``x`` is the claimed epsilon."""
    targets = _check_list("target_epsilons", target_epsilons)
    given = list(sigmas) if sigmas is not None else [None] * len(targets)
    if len(given) != len(targets):
        raise ValueError(
            f"sigmas has {len(given)} entries but target_epsilons has {len(targets)}"
        )
    rows = []
    for target, sigma in zip(targets, given, strict=True):
        sigma, eps = resolve_sigma(target, steps_per_epoch, 1, delta, sigma, tolerance)
        lower = ref.shuffle_lower_bound(sigma, steps_per_epoch, delta)
        for key, label, value in (("poisson_epsilon", POISSON, eps),
                                  ("shuffle_lower_bound", SHUFFLE_LB, lower)):
            rows.append({
                "x": float(target), "y": float(value), "series": label, "reference": key,
                "sigma": sigma, "steps_per_epoch": int(steps_per_epoch), "delta": float(delta),
            })
    return pd.DataFrame(rows)


def audit_bgm(
    sf: ScoreFile, confidence: float = 0.95, selection: str = "same_data"
) -> dict[str, Any]:
    """The Clopper-Pearson audit (Eq. 1) of a Batched Gaussian Mechanism score file
    (:func:`dpaudit.mechanisms.batched_gaussian.bgm_score_file`: both hypotheses simulated)
    at the file's delta, as a dict.

    ``selection`` ``same_data`` is the paper's practice (Algorithm 5, threshold on the same
    runs; ``valid`` False); ``heldout`` gives a valid bound on half the runs.
    """
    res = multi_run.threshold_audit(
        sf.score[:, 0], sf.membership[:, 0], sf.delta, confidence, selection
    )
    return res.as_row()
