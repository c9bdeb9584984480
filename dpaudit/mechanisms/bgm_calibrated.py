"""The Batched Gaussian Mechanism at a claimed (Poisson-accounted) epsilon: Figs. 6-7 settings.

Annamalai et al. ("To Shuffle or not to Shuffle", §6.3.2-6.3.3, Figs. 6-7) calibrate the noise
multiplier so that DP-SGD *with Poisson subsampling* (q = B/n = 1/T, T * E steps) would satisfy
(epsilon, 1e-5)-DP for epsilon = 1, 2, 4, then audit the shuffled mechanism at that noise. This
wrapper of :func:`dpaudit.mechanisms.batched_gaussian.bgm_score_file` takes that claimed epsilon
(``target_epsilon``) and either

* a ``sigma`` written in the config, which it *checks* against the Poisson PLD accountant
  (|epsilon(sigma) - target_epsilon| <= ``tolerance``, one accountant call, about a second), or
* ``sigma = None``, which calibrates it
  (:func:`dpaudit.accounting.shuffling.poisson_reference_sigma`, about 15 s).

The score file's ``claimed_epsilon`` is ``target_epsilon`` (accountant ``poisson_pld``); the meta
also carries the accountant's epsilon at the sigma used and Chua et al.'s single-epoch shuffle
lower bound (the best an audit of the shuffled mechanism can hope to reach on this pair).
"""

from __future__ import annotations

import math
from typing import Any

from dpaudit.accounting.shuffling import poisson_reference_epsilon, poisson_reference_sigma
from dpaudit.mechanisms import shuffle_reference as ref
from dpaudit.mechanisms.batched_gaussian import bgm_score_file
from dpaudit.scores import ScoreFile


def resolve_sigma(
    target_epsilon: float, steps_per_epoch: int, epochs: int, delta: float,
    sigma: float | None = None, tolerance: float = 0.01,
) -> tuple[float, float]:
    """(sigma, Poisson epsilon at sigma): ``sigma`` checked against ``target_epsilon``, or
    calibrated when None. Raises when a given sigma does not give the claimed epsilon."""
    if not (isinstance(target_epsilon, int | float) and target_epsilon > 0
            and math.isfinite(target_epsilon)):
        raise ValueError(f"target_epsilon must be a finite number > 0, got {target_epsilon!r}")
    if not tolerance > 0:
        raise ValueError(f"tolerance must be > 0, got {tolerance!r}")
    if sigma is None:
        sigma = poisson_reference_sigma(target_epsilon, steps_per_epoch, epochs, delta)
    eps = poisson_reference_epsilon(sigma, steps_per_epoch, epochs, delta)
    if abs(eps - target_epsilon) > tolerance:
        raise ValueError(
            f"sigma {sigma} gives Poisson epsilon {eps:.4f} (T = {steps_per_epoch}, "
            f"E = {epochs}, delta = {delta:g}), not the claimed {target_epsilon} within "
            f"{tolerance}; set sigma: null to calibrate it"
        )
    return float(sigma), float(eps)


def bgm_calibrated_score_file(
    target_epsilon: float,
    runs_per_hypothesis: int,
    steps_per_epoch: int,
    sigma: float | None = None,
    threat_model: str = "worst_case",
    epochs: int = 1,
    batch_size: int = 1,
    delta: float = 1e-5,
    tolerance: float = 0.01,
    seed: int = 0,
    experiment: str = "shuffle_bgm",
    setting: str = "default",
) -> ScoreFile:
    """A ``multi_run`` score file of the BGM at the noise of a Poisson-claimed epsilon."""
    sigma, poisson = resolve_sigma(target_epsilon, steps_per_epoch, epochs, delta, sigma,
                                   tolerance)
    lower = ref.shuffle_lower_bound(sigma, steps_per_epoch, delta) if epochs == 1 else None
    extra: dict[str, Any] = {
        "accountant": "poisson_pld",
        "target_epsilon": float(target_epsilon),
        "poisson_epsilon": poisson,
        "shuffle_lower_bound": lower,
        "references": {"shuffle_lower_bound": lower},  # drawn next to the audit in figures
    }
    return bgm_score_file(
        runs_per_hypothesis, steps_per_epoch, sigma, threat_model=threat_model, epochs=epochs,
        batch_size=batch_size, seed=seed, delta=delta, experiment=experiment, setting=setting,
        claimed_epsilon=float(target_epsilon), reference_lines=False, extra_meta=extra,
    )
