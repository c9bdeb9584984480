"""dpaudit.mechanisms.dpsgd_ideal: the summed update in closed form against the per-step law."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from dpaudit.mechanisms.dpsgd_ideal import per_step_updates, summed_update_parts


def test_summed_update_parts_follow_the_per_step_law() -> None:
    """issue 37, item 3: the closed form the power uses (hits + sigma * noise) has the law of
    the per-step updates summed over the steps, IN and OUT (two-sample KS tests)."""
    m, sigma, q, steps = 4000, 0.7, 0.3, 12
    x, member = per_step_updates(m, sigma, q, steps, np.random.default_rng(0))
    summed = x.sum(axis=0)
    mem, hits, noise = summed_update_parts(m, q, steps, np.random.default_rng(1))
    closed = (hits + sigma * noise)[0]
    for side in (0, 1):
        p = stats.ks_2samp(summed[member == side], closed[mem[0] == side]).pvalue
        assert p > 1e-3
    # a wrong scale of the noise is seen
    wrong = (hits + 1.5 * sigma * noise)[0]
    assert stats.ks_2samp(summed[member == 0], wrong[mem[0] == 0]).pvalue < 1e-6


def test_summed_update_parts_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="q in"):
        summed_update_parts(10, 0.0, 5, np.random.default_rng(0))
