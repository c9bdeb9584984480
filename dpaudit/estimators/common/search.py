"""The search for the largest rejected parameter of a nested family of nulls, shared by the f-DP
one-run bound (its reference and its fallback) and the abstention bound.

In a nested family (f_theta-DP implies f_theta'-DP for theta' >= theta) the rejected
parameters form an interval from 0, so its end is found by doubling from 1 until a parameter
is not rejected (:func:`bracket`) and then by bisection on the rejection itself
(:func:`bisect_rejected`).
"""

from __future__ import annotations

import math
from collections.abc import Callable


def bracket(rejected: Callable[[float], bool], limit: float = math.inf) -> tuple[float, float]:
    """(lo, hi): lo = 0 or a rejected power of 2, hi = 2 lo (1 for lo = 0), the first
    doubling not rejected; or, where the doubling passes ``limit`` first, the pair at which it
    did (hi > limit, hi not asked). Assumes ``rejected(0.0)``, which the caller checks."""
    lo, hi = 0.0, 1.0
    while rejected(hi):
        lo, hi = hi, 2 * hi
        if hi > limit:
            break
    return lo, hi


def bisect_rejected(rejected: Callable[[float], bool], lo: float, hi: float, tol: float) -> float:
    """The rejected end of a bracket [lo (rejected), hi (not)] narrowed to width ``tol``."""
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if rejected(mid) else (lo, mid)
    return lo
