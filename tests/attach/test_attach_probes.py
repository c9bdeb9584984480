"""Sensitivity probes (dpaudit.attach.probes, dpaudit.attach.sensitivity_checks; issue 37, item 1
"sensitivity" and item 2): placed in the per-example gradients before the loop's clipping,
measured against C by an exact sign test whose level holds whatever the data do."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from dpaudit.attach import GradientCanaries
from dpaudit.attach.probes import (
    N_PROBE_COORDINATES,
    PARTNER_RATIO,
    PROBE_SCALE,
    PROBES_PER_STEP,
    TOLERANCE,
    SensitivityProbes,
    probe_coordinates,
    probe_layout,
)
from dpaudit.attach.sensitivity_checks import grouping_check, sensitivity_check


def _loop(
    seed: int,
    clip_at: float,
    steps: int = 20,
    data_scale: float = 3.0,
    sigma=1.0,
    records: int = 6,
    group: int = 1,
    strided: bool = False,
):
    """A hand-written DP-SGD loop on 40 parameters: ``records`` records a step whose gradients
    move every coordinate (norm about 3 x data_scale, so most rows are clipped), clipping at
    ``clip_at`` (the claim: C = 1) of each record or, with ``group`` > 1, of the mean of each
    group of ``group`` records (adjacent rows, or with ``strided`` rows ``records / group``
    apart: TF Privacy #620's microbatches), noise sigma C, the probes placed as documented."""
    rng = np.random.default_rng(seed)
    c = GradientCanaries(8, 40, 0.5, 1.0, seed=seed)
    for _ in range(steps):
        rows = c.probe_rows(data_scale * rng.standard_normal((records, 40)))
        if group > 1:
            shape = (group, -1, 40) if strided else (-1, group, 40)
            rows = rows.reshape(shape).mean(0 if strided else 1)
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        summed = (rows * np.minimum(1.0, clip_at / (norms + 1e-6))).sum(0)
        summed += c.canary_gradient(c.draw_step())
        c.observe(summed + sigma * rng.standard_normal(40))
    return c


def _grouping(c: GradientCanaries, level: float):
    return grouping_check(c.probes.small_by_step(), 1.0, level, "sim")


def test_probe_rows_write_oversized_values_into_a_few_rows_off_the_canaries() -> None:
    """Issue 37, item 1 (sensitivity): b // 4 rows (at least 2) take a value of 10^6 C (small)
    or 10^9 C (large) at distinct coordinates no canary uses; the rest of each row is the
    record's own gradient, every other row is untouched."""
    c = GradientCanaries(8, 40, 0.5, 2.0, seed=1)
    rows = np.ones((12, 40))
    out = c.probe_rows(rows)
    at, coords, signs, large = c.probes.pending
    assert at.tolist() == [0, 6, 7] and large.tolist() == [False, True, False]
    assert len(set(coords.tolist())) == 3
    assert not set(coords.tolist()) & set(c.coordinates.tolist())
    assert set(coords.tolist()) <= set(c.probes.coordinates.tolist())
    assert (rows == 1).all()  # a copy
    for r, j, s, big in zip(at, coords, signs, large, strict=True):
        size = PROBE_SCALE * (PARTNER_RATIO if big else 1.0) * 2.0
        assert abs(out[r, j]) == size and np.sign(out[r, j]) == s
        assert (np.delete(out[r], j) == 1).all()  # the record's own gradient elsewhere
    assert (np.delete(out, at, axis=0) == 1).all()
    with pytest.raises(ValueError, match="placed twice in one step"):
        c.probe_rows(rows)
    c.draw_step()
    with pytest.raises(ValueError, match="pass the whole noisy sum to observe"):
        c.observe_values(np.zeros(8))
    c.observe(np.zeros(40))
    assert c.probes.pending is None and len(c.probes.values) == 1
    assert c.probes.contributions().shape == (3,) and c.probes.small_by_step()[0].shape == (2,)
    torch = pytest.importorskip("torch")
    empty = c.probe_rows(torch.zeros((0, 40)))  # an empty Poisson batch: the probe alone
    assert tuple(empty.shape) == (1, 40) and float(empty.abs().sum()) == PROBE_SCALE * 2.0
    c.draw_step()
    c.observe(np.zeros(40))
    got = c.probe_rows(torch.ones((12, 40), dtype=torch.float64))
    np.testing.assert_array_equal(got.numpy(), out * 0 + got.numpy())  # torch path runs
    assert float(got[c.probes.pending[0]].abs().sum()) == float(np.abs(out[at]).sum())
    assert PROBE_SCALE == 1e6 and PARTNER_RATIO == 1000


def test_probe_layout_puts_a_large_probe_beside_and_half_a_batch_from_each_small_one() -> None:
    """Issue 37, item 1 (sensitivity): whichever pairs of rows a loop clips together, adjacent
    (2i, 2i + 1) or half a batch apart (i, i + b/2), most small probes share with a large one."""
    for b in (16, 40, 64, 360, 361, 1000):
        rows, large = probe_layout(b)
        assert len(rows) == min(PROBES_PER_STEP, b // 4) and len(set(rows.tolist())) == len(rows)
        assert abs(int(large.sum()) * 2 - len(rows)) <= 1
        kind = dict(zip(rows.tolist(), large.tolist(), strict=True))
        small = [r for r in rows.tolist() if not kind[r]]
        adjacent = sum(kind.get(r ^ 1, False) for r in small)
        half = sum(kind.get(r + b // 2, kind.get(r - b // 2, False)) for r in small)
        assert adjacent >= len(small) / 2 and half == len(small), (b, rows, large)
    assert probe_layout(8)[0].tolist() == [0, 4] and probe_layout(8)[1].tolist() == [False, True]
    assert probe_layout(0)[0].tolist() == [0] and probe_layout(1)[0].tolist() == [0]
    assert probe_layout(2)[1].tolist() == [False, True]


@pytest.mark.parametrize("record_norm", [1.0, 1e2, 1e4])
def test_a_probe_clipped_on_its_own_leaves_c_whatever_the_record_gradient_left_in_its_row(
    record_norm,
) -> None:
    """The probe row keeps its record's gradient ``g`` (only the probe's coordinate is written):
    clipped on its own at C it leaves C (B C) / |row| at the probe's coordinate, within
    TOLERANCE of C for |g| up to 10^4 C (deficit (|g|^2 - g_j^2) / (2 B^2 C^2) = 5e-5 for a
    small probe, B = 10^6); at |g| = 10^5 C a small probe would fall 5e-3 short, outside it,
    which the module docstring states as the limit."""
    clip = 0.5
    c = GradientCanaries(8, 400, 0.5, clip, seed=2)
    rng = np.random.default_rng(0)
    rows = rng.standard_normal((40, 400))
    rows *= record_norm * clip / np.linalg.norm(rows, axis=1, keepdims=True)
    out = c.probe_rows(rows)
    at, coords, signs, _ = c.probes.pending
    clipped = out * np.minimum(1.0, clip / np.linalg.norm(out, axis=1, keepdims=True))
    x = signs * clipped[at, coords]
    assert np.all(np.abs(x / clip - 1.0) <= TOLERANCE), x / clip
    far = rows[at].copy()  # a small probe in each row, records of norm 10^5 C
    far *= 1e5 * clip / np.linalg.norm(far, axis=1, keepdims=True)
    far[np.arange(len(at)), coords] = PROBE_SCALE * clip
    got = clip * far[np.arange(len(at)), coords] / np.linalg.norm(far, axis=1)
    assert np.all(1.0 - got / clip > TOLERANCE)  # 10^5 C: beyond the stated limit


def test_probe_coordinates_avoid_the_canaries_and_need_a_free_one() -> None:
    taken = np.arange(0, 100, 2)
    got = probe_coordinates(100, taken, seed=0, k=16)
    assert len(got) == 16 and not set(got.tolist()) & set(taken.tolist())
    assert len(np.unique(got)) == 16
    big = probe_coordinates(10**6, np.arange(10), seed=0)
    assert len(big) == N_PROBE_COORDINATES and big.min() >= 10
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
    assert not _grouping(c, 0.01).departs  # more than C, not a shared clip


def test_per_example_clipping_keeps_the_grouping_check_within_its_level() -> None:
    """Issue 37, item 1 (sensitivity): under per-example clipping at C each probe receives C
    (plus the data's and the noise's share, symmetric by the random signs), whatever the data
    do; 300 seeds at level 0.05 with data moving every coordinate by several C: departures are
    Binomial(300, <= 0.05), more than 25 with probability < 1%. Clipping at C / 2 (tighter than
    claimed, which is not a privacy bug) starves every probe alike and departs."""
    hits = sum(_grouping(_loop(s, 1.0, records=24), 0.05).departs for s in range(300))
    assert hits <= 25, hits
    assert _grouping(_loop(0, 0.5, records=24, steps=40), 0.01).departs


@pytest.mark.parametrize("strided", [False, True])
def test_rows_clipped_in_groups_depart_and_per_example_clipping_does_not(strided) -> None:
    """Issue 37, item 1 (sensitivity), TF Privacy #620: the mean gradient of each group of two
    records clipped to C (adjacent rows, or rows half a batch apart) lets each probe through
    with at most C, so the more-than-C check cannot see it; the small probes beside a large one
    receive about 0 instead of C and the grouping check departs, naming the measured value; the
    same loop clipping each record on its own does not depart."""
    grouped = _loop(0, 1.0, records=64, group=2, strided=strided, steps=20)
    check = _grouping(grouped, 0.01)
    assert check.departs and check.stage == "sensitivity" and check.anytime
    assert check.first_flagged_step is not None and check.first_flagged_step <= 20
    assert float(check.measured.split()[1]) < 0.5  # mean received, in units of C
    assert "not clipped one by one" in check.note and "TF Privacy #620" in check.note
    assert not sensitivity_check(grouped.probes.contributions(), 1.0, 0.01, "sim").departs
    rep = grouped.audit(delta=1e-5, noise_multiplier=1.0, accountant="rdp").conformance
    assert rep.departing_stages == ["sensitivity"], str(rep)
    assert [c.level for c in rep.checks if c.stage == "sensitivity"] == [0.005, 0.005]
    alone = _loop(0, 1.0, records=64, strided=strided, steps=20)
    assert not _grouping(alone, 0.01).departs
    rep = alone.audit(delta=1e-5, noise_multiplier=1.0, accountant="rdp").conformance
    assert not rep.departs, str(rep)


def test_no_probe_leaves_sensitivity_unseen() -> None:
    rng = np.random.default_rng(0)
    c = GradientCanaries(8, 40, 0.5, 1.0, seed=0)
    for _ in range(5):
        c.draw_step()
        c.observe(rng.standard_normal(40))
    rep = c.audit(delta=1e-5, noise_multiplier=1.0, accountant="rdp").conformance
    assert "sensitivity" in rep.unseen


def test_issue37_done_when_3_probe_coordinates_must_ascend() -> None:
    """issue 37, Done when 3: the Opacus hook groups each step's probes by parameter from the
    coordinates' order, so probes on coordinates that are not distinct and ascending are a
    clear error (probe_coordinates gives them sorted)."""
    for bad in ([5, 3], [2, 2]):
        with pytest.raises(ValueError, match="distinct and ascending"):
            SensitivityProbes(np.array(bad), 1.0, 0)
    assert SensitivityProbes(np.array([1, 4]), 1.0, 0).active


@pytest.mark.parametrize("rows_kind", ["contiguous", "strided", "float64"])
@pytest.mark.parametrize("b", [40, 200])
def test_issue37_done_when_3_probe_rows_placed_exactly_on_every_memory_layout(
    rows_kind, b
) -> None:
    """issue 37, Done when 3: the Opacus hook writes the probes with one flat indexed write per
    parameter where the rows are contiguous CPU memory in the parameters' dtype, and by indexing
    the parameter's own shape otherwise (strided rows, rows of another dtype), and lays out
    probes drawn ahead at once (b = 200: every step takes all 17 coordinates); either way,
    step after step, each probe row holds its probe's value at its coordinate and the record's
    own gradient elsewhere, and every other row is untouched."""
    import types

    import torch

    from dpaudit.attach.probes import DRAW_AHEAD, OpacusProbeHook

    params = [torch.nn.Parameter(torch.zeros(3, 4)), torch.nn.Parameter(torch.zeros(5))]
    opt = types.SimpleNamespace(params=params, clip_and_accumulate=lambda: None)
    probes = SensitivityProbes(np.arange(17), 2.0, seed=1)
    hook = OpacusProbeHook(opt, probes, np.array([0, 12, 17]))
    gen = torch.Generator().manual_seed(0)
    for _ in range(DRAW_AHEAD + 3):
        ref = [torch.randn(b, 3, 4, generator=gen), torch.randn(b, 5, generator=gen)]
        rows = [r.clone() for r in ref]
        if rows_kind == "strided":  # the same values, not contiguous
            rows[0] = rows[0].transpose(1, 2).contiguous().transpose(1, 2)
            assert not rows[0].is_contiguous()
        if rows_kind == "float64":
            rows = [r.double() for r in rows]
        hook._place(rows)
        at, coords, signs, large = probes.pending
        probes.pending = None
        scale = np.where(large, PROBE_SCALE * PARTNER_RATIO, PROBE_SCALE) * 2.0
        want = [r.clone().to(rows[0].dtype).reshape(b, -1) for r in ref]
        for row, coord, value in zip(at, coords, signs * scale, strict=True):
            k, local = (0, coord) if coord < 12 else (1, coord - 12)
            want[k][row, local] = value
        for got, w in zip(rows, want, strict=True):
            assert torch.equal(got.reshape(b, -1), w)
        assert at.size == (10 if b == 40 else 17) and len(set(coords.tolist())) == at.size


def test_issue37_done_when_3_probes_drawn_ahead_are_the_draws_of_each_step() -> None:
    """issue 37, Done when 3: steps that take the full number of probes have them drawn
    DRAW_AHEAD steps at once; a step of another size (a small batch, an empty one), or new
    coordinates, rewinds the generator. Over such a sequence every step's probes (rows,
    coordinates, signed values) equal those of a generator drawing each step on its own
    (the code before the speed-up)."""
    from dpaudit.attach.probes import DRAW_AHEAD
    from dpaudit.seeding import derive_seed

    coords = probe_coordinates(5000, np.arange(100), seed=4)
    probes = SensitivityProbes(coords, 0.5, seed=4)
    rng = np.random.default_rng(derive_seed(4, "attach", "probes"))
    sizes = [300] * 3 + [40, 300, 0] + [500] * (DRAW_AHEAD + 2) + [129, 128, 127, 300]
    for step, b in enumerate(sizes):
        if step == len(sizes) - 2:  # new coordinates (their number halved), drawn ahead before
            probes.coordinates = coords = coords[::2].copy()
        at, got, values = probes.draw(b)
        probes.pending = None
        k = min(PROBES_PER_STEP, coords.size)
        rows, large = probe_layout(b, k)
        want = rng.choice(coords, size=rows.size, replace=False)
        signs = np.where(rng.random(rows.size) < 0.5, 1.0, -1.0)
        scale = np.where(large, PROBE_SCALE * PARTNER_RATIO, PROBE_SCALE)
        assert (at == rows).all() and (got == want).all()
        assert (values == signs * scale * 0.5).all()
