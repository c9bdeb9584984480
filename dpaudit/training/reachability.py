"""Which target epsilons an accountant can calibrate a training job's noise to.

Opacus' ``get_noise_multiplier`` doubles the noise multiplier from 20 and gives up ("The
privacy budget is too low.") above ``MAX_SIGMA = 1e6``: a target below the epsilon it claims at
the largest noise it tries is unreachable, and the training job would fail on it. The config
check (:func:`dpaudit.config.validate_config`) asks :func:`reachable_epsilon_problem` for every
target epsilon of a train experiment, at the schedule of :meth:`RunSpec.nominal_schedule
<dpaudit.training.spec.RunSpec.nominal_schedule>`.
"""

from __future__ import annotations

import functools
import math

from dpaudit.accounting.dpsgd import calibrate_noise, poisson_epsilon

#: Largest noise multiplier Opacus' get_noise_multiplier tries before it gives up with "The
#: privacy budget is too low." (it doubles sigma from 20 and stops above MAX_SIGMA = 1e6).
OPACUS_LARGEST_SIGMA = 20.0 * 2**15


#: Largest Renyi order of Opacus' RDP accountant (DEFAULT_ALPHAS end at 63).
OPACUS_MAX_ORDER = 63


def rdp_floor_bound(delta: float, steps: int) -> float:
    """An upper bound on the epsilon the RDP accountant claims at Opacus' largest noise: the
    conversion at order a = 63 is eps(a) - (log delta + log a) / (a - 1) + log((a - 1) / a)
    <= eps(a) + log(1 / delta) / (a - 1), and eps(a) <= steps * a / (2 sigma^2) (Gaussian RDP at
    q = 1). PRV, tighter, claims no more (tested). A target above it is always reachable."""
    a = OPACUS_MAX_ORDER
    return steps * a / (2 * OPACUS_LARGEST_SIGMA**2) + math.log(1 / delta) / (a - 1)


@functools.lru_cache(maxsize=512)
def reachable_epsilon_problem(
    target: float, delta: float, q: float, steps: int, accountant: str
) -> str | None:
    """Why the accountant cannot calibrate noise to ``target`` (None: it can). rdp and prv
    evaluate epsilon at the largest noise Opacus tries (one accountant call, the exact
    condition of its "privacy budget is too low"); gdp calibrates with the training job's own
    function (fast for gdp). Cached."""
    if accountant in ("rdp", "prv") and target > rdp_floor_bound(delta, steps):
        return None  # reachable for sure: no need to import Opacus (and torch) here
    try:
        if accountant == "gdp":
            calibrate_noise(target, delta, q, steps, accountant)
            return None
        floor = poisson_epsilon(OPACUS_LARGEST_SIGMA, q, steps, delta, accountant)
    except (ValueError, RuntimeError) as err:
        return f"the accountant fails: {err}"
    if floor is not None and floor > target:
        return (
            f"the smallest epsilon it can claim is {floor:.4g} (Opacus: 'The privacy budget "
            "is too low.')"
        )
    return None
