"""dpaudit.estimators.common.search: the doubling-and-bisection search for the largest rejected
parameter that the f-DP one-run bound (reference and fallback) and the abstention bound share
(issue 38: written once)."""

from __future__ import annotations

import pytest

from dpaudit.estimators.common.search import bisect_rejected, bracket


@pytest.mark.parametrize("end", [0.3, 1.0, 1.7, 5.0, 37.25])
def test_bracket_then_bisect_finds_the_rejected_end(end: float) -> None:
    asked: list[float] = []

    def rejected(theta: float) -> bool:
        asked.append(theta)
        return theta <= end

    lo, hi = bracket(rejected)
    assert rejected(lo) and not rejected(hi) and hi == (2 * lo if lo else 1.0)
    theta = bisect_rejected(rejected, lo, hi, 1e-6)
    assert rejected(theta) and end - 1e-6 <= theta <= end
    assert asked[0] == 1.0  # doubling starts at 1 (the caller has checked 0)


def test_bracket_stops_past_its_limit_without_asking_there() -> None:
    asked: list[float] = []

    def rejected(theta: float) -> bool:
        asked.append(theta)
        return True

    lo, hi = bracket(rejected, 10.0)
    assert (lo, hi) == (8.0, 16.0) and max(asked) == 8.0
    assert bracket(lambda t: t < 2.0**40) == (2.0**39, 2.0**40)  # no limit: doubles on


def test_bisect_keeps_a_bracket_already_narrower_than_tol() -> None:
    assert bisect_rejected(lambda t: False, 0.25, 0.25 + 1e-9, 1e-6) == 0.25
