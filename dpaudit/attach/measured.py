"""Build the conformance report of an audited gradient-canary training from what it measured.

Gathers the step, sampling and accounting checks (:mod:`dpaudit.attach.step_checks`,
:mod:`dpaudit.attach.sampling_checks`, :mod:`dpaudit.attach.measured_accounting`) into a
:class:`~dpaudit.attach.conformance.ConformanceReport`. The claimed sampling is Poisson at the
rate the claim's settings name (``sample_rate=``) or, without one, the rate the canaries were
given (the Opacus adapter takes it from the loader as Opacus' accountant does).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dpaudit.attach.conformance import ConformanceReport, report
from dpaudit.attach.measured_accounting import accounting_check
from dpaudit.attach.sampling_checks import largest_rate_lower_bound, sampling_checks
from dpaudit.attach.sampling_record import SamplingRecord
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
) -> ConformanceReport:
    """The report: ``steps_taken`` noise calls, the loader's ``record`` (None: not observed),
    the claim (``claimed_rate``, ``claimed_epsilon`` at ``delta``, the settings ``given`` to
    the audit) and the noise multiplier used (None: unknown, accounting unseen); each stage's
    checks at error probability ``alpha``."""
    q = float(given["sample_rate"]) if given.get("sample_rate") is not None else claimed_rate
    steps = given.get("steps")
    checks = step_checks(steps_taken, None if steps is None else int(steps), record)
    sampled = record is not None and record.unobservable is None and record.steps > 0
    if sampled:
        checks += sampling_checks(record, q, alpha)  # type: ignore[arg-type]
    measured: dict[str, Any] = {}
    if record is not None and record.unobservable is not None:
        measured["sampling_unobservable"] = record.unobservable
    if noise_multiplier is not None and steps_taken > 0:
        if sampled:
            low, mean = largest_rate_lower_bound(record, alpha)  # type: ignore[arg-type]
            rate = (low, max(low, mean), "measured from the loader", alpha)
        else:
            rate = (q, q, "assumed: the claimed rate, not measured", 0.0)
        check, facts = accounting_check(
            float(noise_multiplier),
            steps_taken,
            rate[0],
            rate[1],
            rate[2],
            claimed_epsilon,
            delta,
            claim_accountant,
            rate[3],
        )
        checks.append(check)
        measured.update(facts)
    return report(checks, alpha, measured)
