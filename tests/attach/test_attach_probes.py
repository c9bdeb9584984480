"""Sensitivity probes (dpaudit.attach.probes, dpaudit.attach.sensitivity_checks; issue 37, item 1
"sensitivity" and item 2): placed in the per-example gradients before the loop's clipping,
measured against C by an exact sign test whose level holds whatever the data do."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from dpaudit.attach import GradientCanaries
from dpaudit.attach.probes import PROBE_SCALE, probe_coordinates
from dpaudit.attach.sensitivity_checks import sensitivity_check


def _loop(seed: int, clip_at: float, steps: int = 20, data_scale: float = 3.0, sigma=1.0):
    """A hand-written DP-SGD loop on 40 parameters: 6 records a step whose gradients move every
    coordinate (norm about 3 x data_scale, so most rows are clipped), per-example clipping at
    ``clip_at`` (the claim: C = 1), noise sigma C, the probe placed as documented."""
    rng = np.random.default_rng(seed)
    c = GradientCanaries(8, 40, 0.5, 1.0, seed=seed)
    for _ in range(steps):
        rows = c.probe_rows(data_scale * rng.standard_normal((6, 40)))
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        summed = (rows * np.minimum(1.0, clip_at / (norms + 1e-6))).sum(0)
        summed += c.canary_gradient(c.draw_step())
        c.observe(summed + sigma * rng.standard_normal(40))
    return c


def test_probe_rows_swaps_one_row_for_an_oversized_dirac_off_the_canaries() -> None:
    c = GradientCanaries(8, 40, 0.5, 2.0, seed=1)
    rows = np.ones((3, 40))
    out = c.probe_rows(rows)
    j, sign = c.probes.pending
    assert j not in set(c.coordinates.tolist()) and j in set(c.probes.coordinates.tolist())
    assert (rows == 1).all()  # a copy
    assert np.abs(out[0]).sum() == abs(out[0, j]) == PROBE_SCALE * 2.0
    assert np.sign(out[0, j]) == sign and (out[1:] == 1).all()
    with pytest.raises(ValueError, match="placed twice in one step"):
        c.probe_rows(rows)
    c.draw_step()
    with pytest.raises(ValueError, match="pass the whole noisy sum to observe"):
        c.observe_values(np.zeros(8))
    c.observe(np.zeros(40))
    assert c.probes.pending is None and len(c.probes.values) == 1
    torch = pytest.importorskip("torch")
    empty = c.probe_rows(torch.zeros((0, 40)))  # an empty Poisson batch: the probe alone
    assert tuple(empty.shape) == (1, 40) and float(empty.abs().sum()) == PROBE_SCALE * 2.0


def test_probe_coordinates_avoid_the_canaries_and_need_a_free_one() -> None:
    taken = np.arange(0, 100, 2)
    got = probe_coordinates(100, taken, seed=0)
    assert len(got) == 16 and not set(got.tolist()) & set(taken.tolist())
    assert len(np.unique(got)) == 16
    big = probe_coordinates(10**6, np.arange(10), seed=0)
    assert len(big) == 16 and big.min() >= 10
    c = GradientCanaries(40, 40, 0.5, 1.0, seed=0)  # every coordinate a canary's
    with pytest.raises(ValueError, match="none is left for a probe: lower m"):
        c.probe_rows(np.zeros((2, 40)))


def test_correct_clipping_false_alarm_rate_is_within_the_level() -> None:
    """The sign test's level by simulation: data whose clipped gradients move the probe
    coordinate by several C each step, noise included; 300 seeds at level 0.05: departures
    are Binomial(300, <= 0.05), so more than 25 happen with probability < 1%."""
    hits = sum(
        sensitivity_check(_loop(s, 1.0).probes.contributions(), 1.0, 0.05, "sim").departs
        for s in range(300)
    )
    assert hits <= 25, hits
    assert stats.binom.sf(25, 300, 0.05) < 0.01


def test_clipping_above_c_departs_and_names_the_measured_sensitivity() -> None:
    c = _loop(0, 10.0)  # the clipping ignores C = 1 and clips at 10
    check = sensitivity_check(c.probes.contributions(), 1.0, 0.01, "the noisy sum")
    assert check.departs and check.stage == "sensitivity"
    assert check.p_value <= 1e-3  # the data move the probe coordinate by several C here
    assert float(check.measured.split()[1]) > 5  # median contribution / C
    res = c.audit(delta=1e-5, noise_multiplier=1.0, accountant="rdp")
    assert res.conformance.departing_stages == ["sensitivity"], str(res.conformance)
    assert "sensitivity" in res.conformance.seen


def test_no_probe_leaves_sensitivity_unseen() -> None:
    rng = np.random.default_rng(0)
    c = GradientCanaries(8, 40, 0.5, 1.0, seed=0)
    for _ in range(5):
        c.draw_step()
        c.observe(rng.standard_normal(40))
    rep = c.audit(delta=1e-5, noise_multiplier=1.0, accountant="rdp").conformance
    assert "sensitivity" in rep.unseen
