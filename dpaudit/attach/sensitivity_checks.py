"""Sensitivity checks: the probes' contributions to the update against the clipping norm C.

The probes (:mod:`dpaudit.attach.probes`) give, per probe, ``x``: the sign-corrected value at its
coordinate after the user's clipping; under per-example clipping at C, ``x - C`` is
conditionally symmetric given the past (up to the rounding :data:`TOLERANCE`), whatever the data
and the noise. Two checks, sharing the stage's error probability (Bonferroni):

- :func:`sensitivity_check` (more than C): the count of probes with ``x > C (1 + tol)`` is
  stochastically below Binomial(n, 1/2); it departs when the upper tail of that count is at most
  its level: an exact one-sided sign test, fixed-sample, read once at the end of the training.
- :func:`grouping_check` (clipped one by one): the small probes' deficits ``(C - x) / C`` have
  mean at most ``tol`` under the claim; rows clipped together starve a small probe beside a large
  one (about C less each). A one-sided mixture test of that mean
  (:func:`dpaudit.attach.anytime.symmetric_mean_log_e`), anytime-valid.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import stats

from dpaudit.attach.anytime import first_crossing, symmetric_mean_log_e
from dpaudit.attach.conformance import Check
from dpaudit.attach.probes import PARTNER_RATIO, PROBE_SCALE, TOLERANCE


def sensitivity_check(
    contributions: np.ndarray, clip_norm: float, level: float, where: str
) -> Check:
    """The more-than-C check of the probes' measured ``contributions`` (every probe) against
    ``clip_norm``, at error probability ``level``; ``where`` says what was read."""
    x = np.asarray(contributions, dtype=np.float64) / clip_norm
    t = int(x.size)
    above = int((x > 1.0 + TOLERANCE).sum())
    p = float(stats.binom.sf(above - 1, t, 0.5)) if t else 1.0
    departs = p <= level
    median = float(np.median(x)) if t else float("nan")
    return Check(
        "sensitivity",
        "probe contribution after the clipping",
        f"median {median:.4g} C (largest {float(x.max()) if t else float('nan'):.4g} C) of "
        f"probes of {PROBE_SCALE:,.0f} C or more; {above} of {t} probes above C ({where})",
        f"at most C = {clip_norm:.4g} per record (per-example clipping)",
        departs,
        level,
        "one-sided sign test of the probes above C against Binomial(n, 1/2) (random probe "
        "signs); exact, fixed-sample",
        p,
        f"the clipping lets one record contribute about {median:.3g} C, not C: the sensitivity "
        "is larger than the claim's"
        if departs
        else "",
    )


def grouping_check(
    small_by_step: Sequence[np.ndarray], clip_norm: float, level: float, where: str
) -> Check:
    """The clipped-one-by-one check of the small probes' measured contributions (one array per
    probed step) against ``clip_norm``, at error probability ``level``; anytime-valid, its first
    flagged step counted among the probed steps."""
    deficits = [1.0 - np.asarray(x, dtype=np.float64) / clip_norm for x in small_by_step]
    log_e = symmetric_mean_log_e(deficits, TOLERANCE)
    first, p = first_crossing(log_e, level)
    n = int(sum(d.size for d in deficits))
    mean = 1.0 - float(np.concatenate(deficits).mean()) if n else float("nan")
    departs = first is not None
    return Check(
        "sensitivity",
        "records clipped one by one",
        f"mean {mean:.3g} C received by the {n} probes of {PROBE_SCALE:,.0f} C that had a "
        f"probe {PARTNER_RATIO:,.0f} times larger in an adjacent row or half a batch away "
        f"({where})",
        f"C = {clip_norm:.4g} each (per-example clipping clips each record on its own)",
        departs,
        level,
        "one-sided test of the probes' mean deficit below C (random probe signs: symmetric under "
        "the claim), a mixture of test supermartingales; anytime-valid",
        p,
        f"records are not clipped one by one: a probe beside a larger one received {mean:.2g} C, "
        "not C, so rows share one clip (e.g. microbatches whose mean gradient is clipped, TF "
        "Privacy #620) and one record can move its group's clipped gradient, and the update, "
        "by up to 2C, not C"
        if departs
        else "",
        anytime=True,
        first_flagged_step=first,
    )


def sensitivity_checks(
    contributions: np.ndarray,
    small_by_step: Sequence[np.ndarray],
    clip_norm: float,
    alpha: float,
    where: str,
) -> list[Check]:
    """The sensitivity stage: :func:`sensitivity_check` on every probe and, when some probe was
    small, :func:`grouping_check` on the small ones, sharing ``alpha`` (Bonferroni)."""
    if not any(np.size(s) for s in small_by_step):
        return [sensitivity_check(contributions, clip_norm, alpha, where)]
    return [
        sensitivity_check(contributions, clip_norm, alpha / 2, where),
        grouping_check(small_by_step, clip_norm, alpha / 2, where),
    ]
