"""The Poisson reference of shuffled DP-SGD: the epsilon it would claim with Poisson batches.

Annamalai et al. ("To Shuffle or not to Shuffle", arXiv:2411.10614, §6.2.1, Fig. 3, and
§6.3.2-6.3.3, Figs. 6-7) compare the audited epsilon of the Batched Gaussian Mechanism (T
batches an epoch, E epochs, noise multiplier sigma) with the epsilon DP-SGD would have *if*
batches were Poisson-subsampled with rate q = 1/T, over T * E steps: what deployments that
shuffle report. The paper uses the PRV accountant; this is the PLD accountant of
``dp_accounting``, which matches the paper's Fig. 3 values to 0.01 (docs/accounting.md).
:func:`poisson_reference_sigma` inverts it: the noise at which the reference equals a claimed
epsilon. The shuffled mechanism's lower bound (Chua et al. 2024) is
:mod:`dpaudit.mechanisms.shuffle_reference`.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize


def check_bgm(sigma: float, steps: int, delta: float) -> None:
    """Raise ``ValueError`` unless sigma > 0, ``steps`` (per epoch) is an integer >= 1 and
    delta lies in (0, 1)."""
    if not sigma > 0:
        raise ValueError(f"sigma must be > 0, got {sigma}")
    if not (isinstance(steps, int | np.integer) and steps >= 1):
        raise ValueError(f"steps_per_epoch must be an integer >= 1, got {steps!r}")
    if not 0 < delta < 1:
        raise ValueError(f"delta must lie in (0, 1), got {delta}")


def poisson_reference_epsilon(
    sigma: float,
    steps_per_epoch: int,
    epochs: int,
    delta: float,
    value_discretization_interval: float = 1e-4,
) -> float:
    """epsilon(delta) of Poisson-subsampled Gaussian DP-SGD, q = 1/T, T * E steps (PLD).

    Add/remove adjacency, which zero-out adjacency reduces to for Poisson sampling (§2.1).
    """
    import dp_accounting
    from dp_accounting import pld

    check_bgm(sigma, steps_per_epoch, delta)
    if epochs < 1:
        raise ValueError(f"epochs must be >= 1, got {epochs}")
    acc = pld.PLDAccountant(
        neighboring_relation=dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE,
        value_discretization_interval=value_discretization_interval,
    )
    event = dp_accounting.PoissonSampledDpEvent(
        1.0 / steps_per_epoch, dp_accounting.GaussianDpEvent(sigma)
    )
    acc.compose(event, steps_per_epoch * epochs)
    return float(acc.get_epsilon(delta))


def poisson_reference_sigma(
    epsilon: float, steps_per_epoch: int, epochs: int, delta: float, xtol: float = 1e-4
) -> float:
    """The noise multiplier at which :func:`poisson_reference_epsilon` equals ``epsilon``."""
    if not epsilon > 0:
        raise ValueError(f"epsilon must be > 0, got {epsilon}")

    def gap(log_sigma: float) -> float:
        return (
            poisson_reference_epsilon(math.exp(log_sigma), steps_per_epoch, epochs, delta)
            - epsilon
        )

    lo, hi = math.log(0.2), math.log(5.0)
    while gap(lo) < 0:
        lo -= 1.0
    while gap(hi) > 0:
        hi += 1.0
    return float(math.exp(optimize.brentq(gap, lo, hi, xtol=xtol)))
