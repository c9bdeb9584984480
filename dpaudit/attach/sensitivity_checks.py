"""Sensitivity check: the probes' contribution to the update against the clipping norm C.

The probes (:mod:`dpaudit.attach.probes`) give, per probed step, ``x_t``: the sign-corrected value
at the probe coordinate after the user's clipping. Under per-example clipping at C the count of
steps with ``x_t > C (1 + tol)`` is stochastically below Binomial(T, 1/2) whatever the data and
the noise (see that module); the check departs when the upper tail of that count is at most its
level: an exact one-sided sign test, fixed-sample, read once at the end of the training.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from dpaudit.attach.conformance import Check
from dpaudit.attach.probes import PROBE_SCALE, TOLERANCE


def sensitivity_check(
    contributions: np.ndarray, clip_norm: float, level: float, where: str
) -> Check:
    """The sensitivity check of the probes' measured ``contributions`` (one per probed step)
    against ``clip_norm``, at error probability ``level``; ``where`` says what was read."""
    x = np.asarray(contributions, dtype=np.float64) / clip_norm
    t = int(x.size)
    above = int((x > 1.0 + TOLERANCE).sum())
    p = float(stats.binom.sf(above - 1, t, 0.5)) if t else 1.0
    departs = p <= level
    median = float(np.median(x)) if t else float("nan")
    return Check(
        "sensitivity",
        "probe contribution after the clipping",
        f"median {median:.4g} C (largest {float(x.max()) if t else float('nan'):.4g} C) of a "
        f"probe of norm {PROBE_SCALE:g} C; {above} of {t} probed steps above C ({where})",
        f"at most C = {clip_norm:.4g} per record (per-example clipping)",
        departs,
        level,
        "one-sided sign test of the steps above C against Binomial(T, 1/2) (random probe "
        "signs); exact, fixed-sample",
        p,
        f"the clipping lets one record contribute about {median:.3g} C, not C: the sensitivity "
        "is larger than the claim's"
        if departs
        else "",
    )
