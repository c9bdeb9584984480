"""The anytime-valid tests of the conformance checks (issue 37, item 4): each e-process keeps
Ville's bound P(sup_t E_t >= 1 / a) <= a under the claim, checked by simulation (seeded)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpaudit.attach.anytime import (
    binomial_log_e,
    first_crossing,
    gaussian_scale_log_e,
    rate_grid,
)


def _bound(a: float, reps: int) -> float:
    return a + 3 * math.sqrt(a * (1 - a) / reps)


def test_issue37_item4_binomial_mixture_keeps_ville_bound_at_every_step() -> None:
    """Binomial(20, 0.1) per step over 200 steps, 2000 runs: the two-sided mixture reaches
    1 / 0.05 at some step in at most 5% of the runs (plus 3 standard errors)."""
    rng = np.random.default_rng(0)
    reps, a = 2000, 0.05
    x = rng.binomial(20, 0.1, size=(reps, 200))
    grid = rate_grid(0.1, "two-sided")
    hits = [first_crossing(binomial_log_e(row, np.full(200, 20), 0.1, grid), a)[0] for row in x]
    assert np.mean([h is not None for h in hits]) <= _bound(a, reps)


def test_issue37_item4_gaussian_scale_mixture_keeps_ville_bound_and_sees_less_noise() -> None:
    """Running sums of squared N(0, 1) noise (50 per step, 100 steps): the too-little-noise
    e-process crosses 1 / 0.05 in at most 5% of 2000 runs; with 10% less noise it crosses in
    every run, by step 30."""
    rng = np.random.default_rng(1)
    reps, a = 2000, 0.05
    k = np.arange(1, 101) * 50
    hits = []
    for _ in range(reps):
        y = np.cumsum(rng.chisquare(50, size=100))
        hits.append(first_crossing(gaussian_scale_log_e(y, k), a)[0])
    assert np.mean([h is not None for h in hits]) <= _bound(a, reps)
    for _ in range(20):
        y = np.cumsum(0.81 * rng.chisquare(50, size=100))
        first, p = first_crossing(gaussian_scale_log_e(y, k), a)
        assert first is not None and first <= 30 and p <= a


def test_rate_grid_lies_inside_the_unit_interval() -> None:
    for p in (1e-4, 0.25, 0.995):
        for side in ("greater", "less", "two-sided"):
            g = rate_grid(p, side)
            assert g.size and ((g > 0) & (g < 1)).all()
            if side == "greater":
                assert (g > p).all()
            if side == "less":
                assert (g < p).all()
    with pytest.raises(KeyError):
        rate_grid(0.5, "sideways")
