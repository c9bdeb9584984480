"""Build the conformance report of an audited gradient-canary training from what it measured.

Gathers the step, sampling, sensitivity, noise, normalisation and accounting checks
(:mod:`dpaudit.attach.step_checks`, :mod:`dpaudit.attach.sampling_checks`,
:mod:`dpaudit.attach.sensitivity_checks`, :mod:`dpaudit.attach.noise_checks`,
:mod:`dpaudit.attach.normalisation_checks`, :mod:`dpaudit.attach.measured_accounting`) into a
:class:`~dpaudit.attach.conformance.ConformanceReport`. The claimed sampling is Poisson at the
rate the claim's settings name (``sample_rate=``) or, without one, the rate the canaries were
given (the Opacus adapter takes it from the loader as Opacus' accountant does).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from dpaudit.attach.conformance import ConformanceReport, report
from dpaudit.attach.measured_accounting import accounting_check
from dpaudit.attach.noise_checks import noise_check, noise_upper_bound
from dpaudit.attach.normalisation_checks import Normalisation, normalisation_check
from dpaudit.attach.sampling_checks import largest_rate_lower_bound, sampling_checks
from dpaudit.attach.sampling_record import SamplingRecord
from dpaudit.attach.sensitivity_checks import sensitivity_checks
from dpaudit.attach.step_checks import step_checks


def measure(
    *,
    steps_taken: int,
    record: SamplingRecord | None,
    claimed_rate: float,
    noise_multiplier: float | None,
    claimed_epsilon: float | None,
    delta: float,
    claim_accountant: str | None,
    given: Mapping[str, Any],
    alpha: float,
    noise: tuple[float, int, float] | None = None,
    noise_path: Sequence[tuple[float, int]] | None = None,
    sensitivity: tuple[Any, Any, float, str] | None = None,
    normalisation: Normalisation | None = None,
) -> ConformanceReport:
    """The report: ``steps_taken`` noise calls, the loader's ``record`` (None: not observed),
    the claim (``claimed_rate``, ``claimed_epsilon`` at ``delta``, the settings ``given`` to
    the audit) and the noise multiplier used (None: unknown, accounting unseen); each stage's
    checks at error probability ``alpha``; ``noise``: the noise check's running sums (sum of
    squares, coordinate-steps, C) at the end, ``noise_path``: the same sums after each noisy
    step where the loop kept them (the noise check's first flagged step); ``sensitivity``: the
    sensitivity probes' (contributions, the small probes' per step, clipping norm, where read;
    None: unseen); ``normalisation``: the update's divisor as measured (None: unseen)."""
    q = float(given["sample_rate"]) if given.get("sample_rate") is not None else claimed_rate
    steps = given.get("steps")
    checks = step_checks(steps_taken, None if steps is None else int(steps), record)
    sampled = record is not None and record.unobservable is None and record.steps > 0
    if sampled:
        checks += sampling_checks(record, q, alpha)  # type: ignore[arg-type]
    if sensitivity is not None:
        contributions, small, clip_norm, where = sensitivity
        checks += sensitivity_checks(contributions, small, clip_norm, alpha, where)
    leaks_n = False
    if normalisation is not None:
        checks.append(normalisation_check(normalisation))
        leaks_n = checks[-1].departs
    measured: dict[str, Any] = {"steps_taken": int(steps_taken)}
    if record is not None and record.unobservable is not None:
        measured["sampling_unobservable"] = record.unobservable
    sigma = None if noise_multiplier is None else float(noise_multiplier)
    # the accounting family's alpha: half for the noise bound (when measured), the rest for the
    # rate bound (when measured); the measured mechanism takes the smaller noise multiplier
    sigma_used, noise_level = sigma, 0.0
    if sigma is not None and sigma > 0 and noise is not None and noise[1] > 0:
        checks.append(noise_check(noise[0], noise[1], sigma, noise[2], alpha, noise_path))
        noise_level = alpha / 2
        upper = noise_upper_bound(noise[0], noise[1], noise[2], noise_level)
        measured["noise_multiplier_upper_bound"] = upper
        sigma_used = min(sigma, upper)
    if sigma_used is not None and steps_taken > 0:
        if sampled:
            low, mean = largest_rate_lower_bound(record, alpha - noise_level)  # type: ignore
            rate = (low, max(low, mean), "measured from the loader", alpha)
        else:
            rate = (q, q, "assumed: the claimed rate, not measured", noise_level)
        check, facts = accounting_check(
            sigma_used,  # type: ignore[arg-type]
            steps_taken,
            rate[0],
            rate[1],
            rate[2],
            claimed_epsilon,
            delta,
            claim_accountant,
            rate[3],
        )
        if sigma is not None and sigma_used < sigma:
            check = replace(
                check,
                note=f"noise multiplier: the measured upper bound {sigma_used:.4g}, below the "
                f"{sigma:.4g} claimed (noise check)",
            )
        if leaks_n:  # the Poisson mechanism's epsilon omits the dataset size the scale reveals
            leak = (
                "a lower bound only: the update's divisor reveals the dataset size "
                "(normalisation check), a loss no accountant here models"
            )
            check = replace(check, note=f"{check.note}; {leak}" if check.note else leak)
        checks.append(check)
        measured.update(facts)
    return report(checks, alpha, measured)
