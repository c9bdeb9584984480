"""The conformance checks as a test in the user's own CI (issue 37, item 6).

:func:`check_conformance` audits an attached auditor (:func:`dpaudit.attach.opacus`, or a
hand-written loop's :class:`~dpaudit.attach.GradientCanaries`) after a few steps of the user's
training and raises :class:`~dpaudit.attach.ConformanceError` (an ``AssertionError``, so a
failing test) with the conformance report when a check departs: a change that breaks the
sampling, the steps, the noise or the accounting fails the build before any long run. The
statistical checks are anytime-valid (:mod:`dpaudit.attach.anytime`), so the few steps a test
trains are as valid a read as the whole training. The pytest fixture that wraps it lives in
:mod:`dpaudit.attach.testing`.
"""

from __future__ import annotations

from typing import Any

from dpaudit.attach.conformance import DEFAULT_ALPHA, ConformanceReport


def check_conformance(
    auditor: Any,
    claimed_epsilon: float | None = None,
    *,
    delta: float,
    alpha: float = DEFAULT_ALPHA,
    **audit_kwargs: Any,
) -> ConformanceReport:
    """The conformance report of ``auditor`` (its ``audit`` with ``claimed_epsilon``, ``delta``,
    ``conformance_alpha=alpha`` and ``audit_kwargs``, e.g. ``accountant=`` or, for a
    hand-written loop, ``noise_multiplier=``); raises ``ConformanceError`` with the report when
    a check departs, else returns it."""
    if not hasattr(auditor, "audit") or not hasattr(auditor, "steps"):
        raise TypeError(
            f"check_conformance needs an attached auditor (dpaudit.attach.opacus(...) or "
            f"GradientCanaries), got {type(auditor).__name__}"
        )
    if auditor.steps == 0:
        hint = getattr(auditor, "_no_step_hint", "train at least one step after attaching it")
        raise ValueError(f"check_conformance: the auditor saw no noisy step: {hint}")
    result = auditor.audit(claimed_epsilon, delta=delta, conformance_alpha=alpha, **audit_kwargs)
    result.conformance.raise_if_departs()
    return result.conformance
