"""Step checks: the noisy (logical) steps really taken against the claim's, and against the
logical batches the loader delivered (exact counts, error probability 0).

The noisy steps are the noise calls the auditor saw (one per logical step: Opacus' ``add_noise``,
which ``BatchMemoryManager``'s virtual steps skip; :meth:`GradientCanaries.observe` in a
hand-written loop). A claim computed for fewer steps than were taken departs. With the loader
observed (:mod:`dpaudit.attach.sampling_record`), a noisy step that merged several logical
batches (gradients accumulated across batches: each noisy step then samples at a multiple of the
loader's rate) or took none (a second step on the same batch) departs; logical batches delivered
after the last noisy step are shown, not counted.
"""

from __future__ import annotations

import numpy as np

from dpaudit.attach.conformance import Check
from dpaudit.attach.sampling_record import SamplingRecord


def step_checks(
    steps_taken: int, claimed_steps: int | None, rec: SamplingRecord | None
) -> list[Check]:
    """The step checks (see the module docstring); ``claimed_steps``: the steps the claim's
    settings name, None when the claim is an epsilon (the accounting check then uses the steps
    taken)."""
    if claimed_steps is None:
        claimed, departs, note = "not stated (the accounting check uses the steps taken)", False, ""
    else:
        claimed, departs, note = f"{claimed_steps} steps", claimed_steps < steps_taken, ""
        if departs:
            note = "the claim counts fewer steps than the training took"
        elif claimed_steps > steps_taken:
            note = "the claim counts more steps than were taken (conservative)"
    out = [
        Check(
            "steps",
            "noisy steps taken",
            f"{steps_taken} noise calls",
            claimed,
            departs,
            0.0,
            "exact count of the noise calls",
            None,
            note,
            True,
            claimed_steps + 1 if departs else None,  # type: ignore[operator]
        )
    ]
    if rec is not None and rec.unobservable is None and rec.association == "by_time":
        per = np.asarray(rec.batches_per_step)
        merged, empty = int((per > 1).sum()), int((per == 0).sum())
        off = np.flatnonzero(per != 1)
        out.append(
            Check(
                "steps",
                "logical batches per noisy step",
                f"{rec.batches_delivered} batches delivered for {steps_taken} noisy steps: "
                f"{merged} steps merged several batches, {empty} took none",
                "one logical batch per noisy step",
                merged + empty > 0,
                0.0,
                "exact count of the loader's batches between noise calls",
                None,
                f"{rec.pending_batches} batch(es) delivered after the last noisy step"
                if rec.pending_batches
                else "",
                True,
                int(off[0]) + 1 if off.size else None,
            )
        )
    return out
