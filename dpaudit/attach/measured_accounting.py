"""Accounting check: the epsilon of the *measured* mechanism beside the claim, never dropped.

The measured mechanism is DP-SGD with the noise multiplier the training used (the optimizer's,
or the one the user states for a hand-written loop), the noisy steps really taken, and a lower
confidence bound on the largest per-record inclusion rate measured from the loader
(:func:`dpaudit.attach.sampling_checks.largest_rate_lower_bound`; without a loader, the rate the
canaries were told, marked as assumed). Its epsilon at the claim's delta comes from the
library's accountant (:func:`dpaudit.accounting.dpsgd.epsilon`: the claim's accountant when it
is one of them, else PRV, Opacus' default), under the Poisson analysis every accountant there
makes. The check departs when that epsilon exceeds the claimed one by more than the accountants'
numerical slack (:data:`RELATIVE_SLACK` of the claim plus :data:`ABSOLUTE_SLACK`, PRV's error
bracket): e.g. a claim computed at half the sample rate or for fewer steps than were taken.
Its error probability is the rate bound's ``alpha`` (0 when the rate is assumed).
"""

from __future__ import annotations

import math
from typing import Any

from dpaudit.accounting import dpsgd
from dpaudit.attach.conformance import Check

#: Relative and absolute slack between accountants' numbers that is not a departure.
RELATIVE_SLACK = 0.02
ABSOLUTE_SLACK = 0.02


def accountant_for(claim_accountant: str | None) -> str:
    """The accountant of the measured mechanism: the claim's when the library has it, else
    ``prv``."""
    if claim_accountant in dpsgd.EPSILON_ACCOUNTANTS:
        return str(claim_accountant)
    return "prv"


def _epsilon(accountant: str, sigma: float, q: float, steps: int, delta: float) -> float:
    if sigma == 0:
        return math.inf
    if q <= 0:
        return 0.0
    return float(dpsgd.epsilon(accountant, sigma, min(q, 1.0), steps, delta))


def accounting_check(
    noise_multiplier: float,
    steps: int,
    rate_lower: float,
    rate_estimate: float,
    rate_source: str,
    claimed_epsilon: float | None,
    delta: float,
    claim_accountant: str | None,
    level: float,
) -> tuple[Check, dict[str, Any]]:
    """The accounting check and the measured mechanism's facts (for the score file's
    metadata): epsilon at ``rate_lower`` (compared with the claim) and at ``rate_estimate``."""
    name = accountant_for(claim_accountant)
    try:
        eps_low = _epsilon(name, noise_multiplier, rate_lower, steps, delta)
        eps_hat = _epsilon(name, noise_multiplier, rate_estimate, steps, delta)
    except (ValueError, RuntimeError) as exc:  # e.g. a grid too large for PRV / PLD
        eps_low = eps_hat = math.nan
        error = str(exc)
    else:
        error = ""
    facts = {
        "noise_multiplier": float(noise_multiplier),
        "steps": int(steps),
        "sample_rate_lower_bound": float(rate_lower),
        "sample_rate_estimate": float(rate_estimate),
        "rate_source": rate_source,
        "accountant": name,
        "delta": float(delta),
        "epsilon_lower": None if not math.isfinite(eps_low) else eps_low,
        "epsilon_estimate": None if not math.isfinite(eps_hat) else eps_hat,
    }
    departs = (
        claimed_epsilon is not None
        and not math.isnan(eps_low)
        and eps_low > claimed_epsilon * (1 + RELATIVE_SLACK) + ABSOLUTE_SLACK
    )
    bound = "" if rate_lower == rate_estimate else " (its lower bound)"
    measured = (
        f"epsilon {eps_hat:.3g} at sigma {noise_multiplier:.4g}, {steps} noisy steps, largest "
        f"per-record rate {rate_estimate:.4g} ({rate_source}); {eps_low:.3g} at rate "
        f"{rate_lower:.4g}{bound}"
        if rate_lower != rate_estimate
        else f"epsilon {eps_low:.3g} at sigma {noise_multiplier:.4g}, {steps} noisy steps, "
        f"rate {rate_lower:.4g} ({rate_source})"
    )
    claim = "none (no guarantee)" if claimed_epsilon is None else f"epsilon {claimed_epsilon:.3g}"
    check = Check(
        "accounting",
        f"measured mechanism's epsilon at delta {delta:g} ({name})",
        measured,
        claim,
        bool(departs),
        level,
        "the rate's lower confidence bound through the library's accountant; departs above "
        f"the claim + {RELATIVE_SLACK:.0%} + {ABSOLUTE_SLACK:g}"
        + ("" if level else " (rate assumed, not measured: an exact comparison)"),
        None,
        error,
    )
    return check, facts
