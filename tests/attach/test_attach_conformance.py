"""The conformance report (issue 37, item 1): sampling, steps and accounting measured from the
user's own loader and optimizer against the claim, each check at its stated error probability.

Unit tests drive :class:`SamplingRecord` with simulated samplers (Poisson, shuffled, weighted,
accumulated); the validity tests check the stated levels by simulation; the Opacus tests run
real Opacus trainings on the bundled digits (Poisson on and off, with and without
BatchMemoryManager, a WeightedRandomSampler, a claim at half the sample rate)."""

from __future__ import annotations

import math
import types
import warnings

import numpy as np
import pytest
import torch
from scipy import stats
from torch import nn
from torch.utils.data import DataLoader, TensorDataset, WeightedRandomSampler

import dpaudit.attach
from dpaudit import scores
from dpaudit.accounting.dpsgd import epsilon
from dpaudit.attach import GradientCanaries
from dpaudit.attach.conformance import STAGES, ConformanceError
from dpaudit.attach.sampling_checks import (
    _batch_sizes,
    _regularity,
    largest_rate_lower_bound,
    sampling_checks,
)
from dpaudit.attach.sampling_record import SamplingRecord
from dpaudit.data.bundled import load_digits
from dpaudit.opacus_import import import_opacus

import_opacus()
from opacus import PrivacyEngine  # noqa: E402
from opacus.utils.batch_memory_manager import BatchMemoryManager  # noqa: E402

warnings.filterwarnings("ignore", message=".*[Ss]ecure RNG.*")


def _batches(kind: str, n: int, q: float, steps: int, rng: np.random.Generator):
    """The index batches of a simulated sampler: ``poisson``, ``shuffle`` (round(1/q) fixed
    batches per epoch), ``weighted`` (with replacement, the first tenth 10x as likely)."""
    k = round(1 / q)
    perm = None
    for t in range(steps):
        if kind == "poisson":
            yield np.flatnonzero(rng.random(n) < q)
        elif kind == "shuffle":
            if t % k == 0:
                perm = rng.permutation(n)
            size = n // k
            yield perm[(t % k) * size : (t % k + 1) * size]
        else:
            w = np.ones(n)
            w[: n // 10] = 10
            yield rng.choice(n, size=round(q * n), p=w / w.sum())


def _record(kind: str, n=300, q=0.25, steps=20, seed=0, per_step=1) -> SamplingRecord:
    rec = SamplingRecord(n)
    rng = np.random.default_rng(seed)
    for i, b in enumerate(_batches(kind, n, q, steps * per_step, rng)):
        rec.deliver(b)
        if (i + 1) % per_step == 0:
            rec.close_step()
    return rec


def _departing(checks) -> set[str]:
    return {c.name for c in checks if c.departs}


def test_poisson_conforms_and_its_false_alarm_rate_is_within_the_level() -> None:
    """Correct Poisson sampling over 20 seeds: the sampling family (alpha 0.01) departs in at
    most 1 (expected 0.2 at most)."""
    alarms = [bool(_departing(sampling_checks(_record("poisson", seed=s), 0.25, 0.01)))
              for s in range(20)]
    assert sum(alarms) <= 1


def test_shuffled_fixed_batches_depart_at_batch_sizes_and_regularity() -> None:
    names = _departing(sampling_checks(_record("shuffle", steps=8), 0.25, 0.01))
    assert {"batch-size law", "per-epoch regularity"} <= names
    assert "per-record inclusion rate" not in names  # every record at exactly q


def test_weighted_sampler_departs_at_per_record_rate_and_duplicates() -> None:
    rec = _record("weighted", steps=40)
    names = _departing(sampling_checks(rec, 0.25, 0.01))
    assert {"per-record inclusion rate", "record twice in one step"} <= names
    low, mean = largest_rate_lower_bound(rec, 0.01)
    assert low > 0.5 > 0.25 > mean  # the heavy records' rate, about 0.75, certified above 0.5


def test_accumulated_batches_depart_at_steps_and_rate() -> None:
    """Two logical batches per noisy step (gradient accumulation): each step samples at 2q."""
    rec = _record("poisson", steps=20, per_step=2)
    assert "mean rate" in _departing(sampling_checks(rec, 0.25, 0.01))
    c = GradientCanaries(10, 50, 0.25, 1.0)
    rng = np.random.default_rng(0)
    for _ in range(6):
        for b in _batches("poisson", 300, 0.25, 2, rng):
            c.record_batch(b, 300)
        c.draw_step()
        c.observe(rng.standard_normal(50))
    rep = c.audit(1.0, delta=1e-5, noise_multiplier=1.0, accountant="rdp").conformance
    bad = [x for x in rep.checks if x.departs and x.stage == "steps"]
    assert bad and "6 steps merged several batches" in bad[0].measured


def test_prefetching_loader_pairs_batches_with_steps_in_order() -> None:
    """With worker processes the loader fetches ahead: by_order pairs the k-th batch with the
    k-th noisy step however many were fetched before it; by_time would merge them."""
    batches = [np.array([0, 1]), np.array([2]), np.array([3, 4, 5])]
    ahead, now = SamplingRecord(6, "by_order"), SamplingRecord(6, "by_time")
    for rec in (ahead, now):
        for b in batches:
            rec.deliver(b)
        for _ in batches:
            rec.close_step()
    assert ahead.sizes == [2, 1, 3] and ahead.batches_per_step == [1, 1, 1]
    assert now.sizes == [6, 0, 0] and now.batches_per_step == [3, 0, 0]
    bad = SamplingRecord(6)
    bad.deliver(["a", "b"])  # not indices: the sampling stage becomes unseen, with the reason
    bad.close_step()
    assert "not integers" in bad.unobservable and sampling_checks(bad, 0.5, 0.01) == []


def test_stated_levels_hold_by_simulation() -> None:
    """The batch-size and regularity p-values are valid: under Poisson, P(p <= a) <= a."""
    rng = np.random.default_rng(1)
    n, q, steps = 40, 0.25, 6
    p_sizes, p_reg = [], []
    for _ in range(3000):
        rec = SamplingRecord(n)
        for b in _batches("poisson", n, q, steps, rng):
            rec.deliver(b)
            rec.close_step()
        p_sizes.append(_batch_sizes(rec, q, 0.01).p_value)
        p_reg.append(_regularity(rec, q, 0.01).p_value)
    for p in (np.array(p_sizes), np.array(p_reg)):
        for a in (0.05, 0.2, 0.5):
            assert (p <= a).mean() <= a + 3 * math.sqrt(a / 3000)


@pytest.mark.parametrize("divisor", [1.0, 1.1, 100.0])
def test_too_little_noise_departs_at_noise_and_accounting(divisor) -> None:
    """Noise for the mean added to the sum (TF Privacy #153): sigma C / B instead of sigma C,
    on coordinates the data move too; 10% too little noise is seen over 40 steps of m = 200
    (and its epsilon, 13.5 against 11.3); the correct noise conforms."""
    rng = np.random.default_rng(0)
    c = GradientCanaries(200, 400, 0.25, 2.0, seed=0)
    data = rng.normal(0, 0.5, 400)  # the data's summed clipped gradient, the same each step
    for _ in range(40):
        noise = 1.0 * 2.0 / divisor * rng.standard_normal(400)
        c.draw_step()
        c.observe(data + c.canary_gradient(c.last_draw) + noise)
    rep = c.audit(epsilon("rdp", 1.0, 0.25, 40, 1e-5), delta=1e-5, noise_multiplier=1.0,
                  accountant="rdp").conformance
    noise = [x for x in rep.checks if x.stage == "noise"][0]
    assert noise.departs == (divisor > 1)
    # the measured mechanism takes the noise's upper bound: epsilon above the claim
    assert ("accounting" in rep.departing_stages) == (divisor > 1)
    if divisor == 100.0:
        # the measured mechanism's sigma: the data's gradient there (0.5 / C) masks the rest
        assert rep.measured["noise_multiplier"] < 0.3


def test_claim_for_fewer_steps_departs_at_steps() -> None:
    c, rng = GradientCanaries(10, 50, 0.25, 1.0), np.random.default_rng(0)
    for _ in range(4):
        c.draw_step()
        c.observe(rng.standard_normal(50))  # noise multiplier 1, C = 1
    rep = c.audit(delta=1e-5, noise_multiplier=1.0, sample_rate=0.25, steps=2,
                  accountant="rdp").conformance
    # the claim (2 steps) as the user computed it; the measured mechanism (4 steps) exceeds it
    assert rep.departing_stages == ["steps", "accounting"]
    assert "sampling" in rep.unseen  # no record_batch: the sampling stage is unseen


def test_hand_written_claim_at_half_the_rate_departs_at_accounting_without_a_loader() -> None:
    """Issue 37 ("Why"): the auditor's own accountant at the q and T it observed is printed
    beside a given claim, never dropped; here the rate is the canaries' (assumed)."""
    c, rng = GradientCanaries(10, 50, 0.25, 1.0), np.random.default_rng(0)
    for _ in range(40):
        c.draw_step()
        c.observe(rng.standard_normal(50))
    half = epsilon("rdp", 1.0, 0.125, 40, 1e-5)
    res = c.audit(half, delta=1e-5, noise_multiplier=1.0, accountant="rdp")
    acc = [x for x in res.conformance.checks if x.stage == "accounting"][0]
    assert acc.departs and "assumed" in acc.measured
    assert acc.level == 0.005  # the noise bound's alpha / 2 (the rate is assumed)
    mech = res.score_file.meta["measured_mechanism"]
    assert mech["epsilon_lower"] == pytest.approx(epsilon("rdp", 1.0, 0.25, 40, 1e-5))
    assert res.score_file.meta["claimed_epsilon"] == pytest.approx(half)
    assert "DEPARTS from the claim at accounting" in str(res)


# --- real Opacus trainings on the bundled digits --------------------------------------------


def _digits() -> TensorDataset:
    d = load_digits()
    x = torch.tensor(d["x"], dtype=torch.float32).reshape(-1, 64) / 16.0
    return TensorDataset(x, torch.tensor(d["y"]))


def _epoch(model, opt, loader) -> None:
    for xb, yb in loader:
        opt.zero_grad()
        nn.functional.cross_entropy(model(xb), yb).backward()
        opt.step()


def _opacus_run(poisson=True, memory_manager=False, weighted=False, epochs=3, claim_rate=None,
                seed=0, clip_at=None, pairs=False):
    """A correct (or weighted) Opacus training, 4 logical steps per epoch, audited as the
    README says; the claim is Opacus' own (or the epsilon at ``claim_rate``). ``clip_at``: the
    user's clipping ignores ``max_grad_norm`` and clips at this norm (Opacus PR #664), the
    noise still at ``max_grad_norm``. ``pairs``: the user's clipping clips the mean gradient of
    each pair of adjacent records (microbatches of two, TF Privacy #620, in Opacus)."""
    torch.manual_seed(seed)
    data = _digits()
    model = nn.Linear(64, 10)
    if weighted:  # class 0 drawn 10x as often (Opacus #600 / #813)
        w = torch.where(data.tensors[1] == 0, 10.0, 1.0)
        loader = DataLoader(data, batch_size=450, sampler=WeightedRandomSampler(w, len(data)))
    else:
        loader = DataLoader(data, batch_size=450, shuffle=True)
    engine = PrivacyEngine(accountant="rdp")
    model, opt, loader = engine.make_private(
        module=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.5),
        data_loader=loader, noise_multiplier=1.0, max_grad_norm=1.0, poisson_sampling=poisson,
    )
    if clip_at is not None:

        def clip(self):  # the user's replacement of Opacus' clipping
            asked, self.max_grad_norm = self.max_grad_norm, clip_at
            type(self).clip_and_accumulate(self)
            self.max_grad_norm = asked

        opt.clip_and_accumulate = types.MethodType(clip, opt)
    if pairs:

        def clip_pairs(self):  # microbatches of two records: their mean gradient clipped
            for p in self.params:
                g = p.grad_sample
                odd = g[-1:] if len(g) % 2 else g[:0]
                p.grad_sample = torch.cat([(g[0 : len(g) - 1 : 2] + g[1::2]) / 2, odd])
            type(self).clip_and_accumulate(self)

        opt.clip_and_accumulate = types.MethodType(clip_pairs, opt)
    aud = dpaudit.attach.opacus(opt, data_loader=loader, m=50, seed=seed)
    for _ in range(epochs):
        if memory_manager:
            with BatchMemoryManager(
                data_loader=loader, max_physical_batch_size=128, optimizer=opt
            ) as physical:
                _epoch(model, opt, physical)
        else:
            _epoch(model, opt, loader)
    claim = engine.get_epsilon(1e-5)
    if claim_rate is not None:
        claim = epsilon("rdp", 1.0, claim_rate, aud.steps, 1e-5)
    return aud, aud.audit(claim, delta=1e-5, accountant="rdp")


@pytest.mark.parametrize("memory_manager", [False, True])
def test_correct_opacus_poisson_conforms(memory_manager) -> None:
    aud, res = _opacus_run(memory_manager=memory_manager)
    rep = res.conformance
    assert not rep.departs, str(rep)
    rep.raise_if_departs()  # conforms: nothing raised
    assert rep.seen == ["sampling", "steps", "sensitivity", "noise", "normalisation", "accounting"]
    assert rep.unseen == []
    assert "clipping" not in res.unseen_stages  # the sensitivity probes covered it
    assert aud.sampling_record.steps == aud.steps == 12  # logical steps, also through BMM
    assert len(aud.probes.values) == 12  # one probe per logical step, also through BMM
    text = str(res)
    assert "no departure measured" in text and "not seen by this run" not in text
    assert rep.measured["noise_multiplier_upper_bound"] > 1.0  # the optimizer's sigma, bounded


@pytest.mark.parametrize("memory_manager", [False, True])
def test_shuffled_opacus_accounted_as_poisson_departs_at_sampling(memory_manager) -> None:
    """poisson_sampling=False: a shuffled loader that Opacus' accountant treats as Poisson
    (Opacus #80; Chua et al. 2024, arXiv:2403.17673) is named at the sampling stage."""
    _, res = _opacus_run(poisson=False, memory_manager=memory_manager)
    rep = res.conformance
    assert rep.departing_stages == ["sampling"]
    names = {c.name for c in rep.checks if c.departs}
    assert "per-epoch regularity" in names
    # issue 37, item 4: anytime-valid, flagged from the second noisy step (in the score file)
    first = res.score_file.meta["conformance"]["first_flagged_step"]
    assert first["sampling: per-epoch regularity"] == 2
    with pytest.raises(ConformanceError, match="DEPARTS from the claim at sampling"):
        rep.raise_if_departs()  # a test in the user's own CI fails with the report


def test_weighted_sampler_departs_at_sampling_and_accounting() -> None:
    """A WeightedRandomSampler kept with poisson_sampling=False (Opacus #600 / #813): flagged
    from the loader alone, its measured epsilon far above the claim."""
    _, res = _opacus_run(poisson=False, weighted=True, epochs=10)
    rep = res.conformance
    assert rep.departing_stages == ["sampling", "accounting"]
    assert rep.measured["sample_rate_lower_bound"] > 0.5
    assert rep.measured["epsilon_lower"] > 2 * res.verdict["claimed_epsilon"].iloc[0]


@pytest.mark.parametrize("memory_manager", [False, True])
def test_opacus_clipping_that_ignores_max_grad_norm_departs_at_sensitivity(memory_manager) -> None:
    """Issue 37, item 1 (sensitivity): the user's clipping ignores ``max_grad_norm`` = 1 and
    clips at 10 (Opacus PR #664), the noise stays at sigma x 1; attached as documented, the
    probes in Opacus' per-example rows measure about 10 C and depart at sensitivity only."""
    aud, res = _opacus_run(memory_manager=memory_manager, clip_at=10.0)
    rep = res.conformance
    assert rep.departing_stages == ["sensitivity"], str(rep)
    check = [c for c in rep.checks if c.stage == "sensitivity"][0]
    assert check.p_value <= 0.01 and "C = 1 per record" in check.claimed
    assert np.median(aud.probes.contributions()) > 5  # about 10, plus the data's share
    with pytest.raises(ConformanceError, match="sensitivity"):
        rep.raise_if_departs()


@pytest.mark.parametrize("memory_manager", [False, True])
def test_opacus_microbatch_clipping_departs_at_sensitivity_within_a_few_steps(
    memory_manager,
) -> None:
    """Issue 37, item 1 (sensitivity): the user's clipping clips the mean gradient of each pair
    of adjacent records (microbatches of two, TF Privacy #620, in Opacus), so one record moves
    the update by up to 2C and no probe gets more than C. The probes in Opacus' per-example
    rows (a quarter of the rows, at most 32; with BatchMemoryManager in the first physical
    batch), read before the noise: the small probes beside a large one receive about 0, not C,
    and "records clipped one by one" departs within the first 6 of the 12 logical steps
    (anytime-valid), naming the stage; the correct training's probes (the conformance test
    above) do not."""
    aud, res = _opacus_run(memory_manager=memory_manager, pairs=True)
    assert min(len(v) for v in aud.probes.large) >= 25  # b // 4 of the first (physical) batch
    rep = res.conformance
    assert rep.departing_stages == ["sensitivity"], str(rep)
    check = [c for c in rep.checks if c.name == "records clipped one by one"][0]
    assert check.departs and check.first_flagged_step is not None
    assert check.first_flagged_step <= 6, check.first_flagged_step
    assert float(check.measured.split()[1]) < 0.1  # mean received, in units of C
    more = [c for c in rep.checks if c.name == "probe contribution after the clipping"][0]
    assert not more.departs  # no probe above C: only the grouping check can see it


def test_opacus_probes_off_leave_sensitivity_unseen_and_detach_restores() -> None:
    torch.manual_seed(0)
    model = nn.Linear(64, 10)
    engine = PrivacyEngine(accountant="rdp")
    model, opt, loader = engine.make_private(
        module=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.5),
        data_loader=DataLoader(_digits(), batch_size=450), noise_multiplier=1.0,
        max_grad_norm=1.0,
    )
    own = opt.clip_and_accumulate
    aud = dpaudit.attach.opacus(opt, data_loader=loader, m=50, seed=0, probes=False)
    assert opt.clip_and_accumulate == own
    _epoch(model, opt, loader)
    assert aud.probes.values == []
    assert "sensitivity" in aud.audit(delta=1e-5, accountant="rdp").conformance.unseen
    aud.detach()
    aud = dpaudit.attach.opacus(opt, data_loader=loader, m=50, seed=0)
    assert opt.clip_and_accumulate != own
    aud.detach()
    assert opt.clip_and_accumulate == own


def test_claim_at_half_the_sample_rate_departs_at_accounting(tmp_path) -> None:
    _, res = _opacus_run(claim_rate=0.125, epochs=10)
    rep = res.conformance
    assert rep.departing_stages == ["accounting"]
    claim = res.verdict["claimed_epsilon"].iloc[0]
    assert rep.measured["epsilon_lower"] > 1.5 * claim
    scores.write(tmp_path / "s.npz", res.score_file)  # the measured mechanism is kept
    back = scores.read(tmp_path / "s.npz")
    assert back.meta["measured_mechanism"]["epsilon_lower"] == rep.measured["epsilon_lower"]
    assert back.meta["conformance"]["departs"] == ["accounting"]
    # the accounting check is fixed-sample: read at the end, its step is not recorded
    assert list(back.meta["conformance"]["first_flagged_step"].values()) == [None]


def test_loader_probe_is_transparent_and_released() -> None:
    """The observed batch sampler keeps its type and yields the same batches; detach()
    restores its class; a loader that cannot be observed is a clear error."""
    data = TensorDataset(torch.randn(40, 3), torch.zeros(40, dtype=torch.long))
    engine, layer = PrivacyEngine(), nn.Linear(3, 2)
    model, opt, loader = engine.make_private(
        module=layer, optimizer=torch.optim.SGD(layer.parameters(), lr=0.1),
        data_loader=DataLoader(data, batch_size=10), noise_multiplier=1.0, max_grad_norm=1.0,
        poisson_sampling=False,
    )
    base = type(loader.batch_sampler)
    expected = list(loader.batch_sampler)
    aud = dpaudit.attach.opacus(opt, data_loader=loader, m=5)
    assert isinstance(loader.batch_sampler, base) and len(loader) == 4
    assert list(loader.batch_sampler) == expected
    assert aud.sampling_record.batches_delivered == 4
    aud.detach()
    assert type(loader.batch_sampler) is base
    with pytest.raises(RuntimeError, match="detach\\(\\) was called already"):
        aud.detach()
    with pytest.raises(ValueError, match="not a torch DataLoader.*sample_rate="):
        dpaudit.attach.opacus(opt, data_loader=[(1, 2)] * 4, m=5)
    with pytest.raises(ValueError, match="no batch sampler"):
        dpaudit.attach.opacus(opt, data_loader=DataLoader(data, batch_size=None), m=5)


def test_stages_and_unseen_text_cover_every_stage() -> None:
    from dpaudit.attach.conformance import UNSEEN_TEXT

    assert set(UNSEEN_TEXT) == set(STAGES)


# --- anytime-valid reading (issue 37, item 4) ------------------------------------------------


def test_issue37_item4_false_alarm_rate_read_at_every_step_within_the_level() -> None:
    """Correct Poisson sampling (n = 200, q = 0.1, 60 steps, 400 seeded record sets), each
    statistical check at level 0.05 (alpha 0.2): the rate at which a check departs at *some*
    step is within its level; reading the former fixed-sample mean-rate test at every step and
    stopping at the first rejection exceeds it (why the checks are anytime-valid)."""
    rng = np.random.default_rng(7)
    reps, n, q, steps, alpha = 400, 200, 0.1, 60, 0.2
    level = alpha / 4
    hits: dict[str, int] = {}
    peeking = 0
    for _ in range(reps):
        rec = SamplingRecord(n)
        for b in _batches("poisson", n, q, steps, rng):
            rec.deliver(b)
            rec.close_step()
        for c in sampling_checks(rec, q, alpha):
            hits[c.name] = hits.get(c.name, 0) + int(c.departs)
            assert c.departs == (c.first_flagged_step is not None)
        total = np.cumsum(rec.sizes)
        trials = n * np.arange(1, steps + 1)
        lo = stats.binom.cdf(total, trials, q)
        hi = stats.binom.sf(total - 1, trials, q)
        peeking += bool((2 * np.minimum(lo, hi) <= level).any())
    bound = level + 3 * math.sqrt(level * (1 - level) / reps)
    assert set(hits) >= {"mean rate", "per-record inclusion rate", "batch-size law",
                         "per-epoch regularity"}
    for name in ("mean rate", "per-record inclusion rate", "batch-size law",
                 "per-epoch regularity"):
        assert hits[name] / reps <= bound, (name, hits[name])
    assert hits["record twice in one step"] == 0
    assert peeking / reps > bound  # the fixed-sample test, peeked at, is not valid


def test_issue37_item4_first_flagged_step_of_shuffled_and_weighted_samplers() -> None:
    """A shuffled fixed-size loader accounted as Poisson departs at the regularity check from
    step 2 (two consecutive batches of one epoch are disjoint) and at the batch-size law within
    a few steps; a weighted sampler (the first tenth 10x as likely) departs at the per-record
    rate within its first epochs. report_at(step) reads the report as it stood then."""
    shuffled = sampling_checks(_record("shuffle", steps=40), 0.25, 0.01)
    first = {c.name: c.first_flagged_step for c in shuffled}
    assert first["per-epoch regularity"] == 2
    assert first["batch-size law"] is not None and first["batch-size law"] <= 5
    weighted = sampling_checks(_record("weighted", steps=40), 0.25, 0.01)
    first_w = {c.name: c.first_flagged_step for c in weighted}
    assert first_w["per-record inclusion rate"] is not None
    assert first_w["per-record inclusion rate"] <= 20
    assert first_w["record twice in one step"] == 1

    c = GradientCanaries(10, 50, 0.25, 1.0)
    rng = np.random.default_rng(0)
    live = []  # the report read mid-training, after each step (anytime-valid)
    for b in _batches("shuffle", 300, 0.25, 8, rng):
        c.record_batch(b, 300)
        c.draw_step()
        c.observe(rng.standard_normal(50))
        mid = c.audit(delta=1e-5, noise_multiplier=1.0, accountant="rdp").conformance
        live.append("sampling" in mid.departing_stages)
    assert live == [False] + [True] * 7  # stop the training at step 2
    rep = c.audit(delta=1e-5, noise_multiplier=1.0, accountant="rdp").conformance
    assert "DEPARTS from step 2] sampling: per-epoch regularity" in str(rep)
    assert not rep.report_at(1).departs
    at2 = rep.report_at(2)
    assert at2.departing_stages == ["sampling"] and "per-epoch regularity" in str(at2)
    assert all(x.anytime for x in at2.checks)  # the fixed-sample accounting check is left out
    assert "accounting" not in at2.seen and rep.table()["first_flagged_step"].notna().any()
    with pytest.raises(ValueError, match="step must be an integer"):
        rep.report_at(-1)


def test_issue37_item4_noise_first_flagged_step_in_a_hand_written_loop() -> None:
    """10% too little noise over 40 steps of m = 200: the noise check's e-process, kept after
    each observed step, departs before the end and the report says from which step."""
    rng = np.random.default_rng(0)
    c = GradientCanaries(200, 400, 0.25, 2.0, seed=0)
    for _ in range(40):
        c.draw_step()
        c.observe(c.canary_gradient(c.last_draw) + 2.0 / 1.1 * rng.standard_normal(400))
    rep = c.audit(delta=1e-5, noise_multiplier=1.0, accountant="rdp").conformance
    noise = [x for x in rep.checks if x.stage == "noise"][0]
    assert noise.departs and 1 < noise.first_flagged_step < 40
    assert "noise" not in rep.report_at(noise.first_flagged_step - 1).departing_stages
    assert "noise" in rep.report_at(noise.first_flagged_step).departing_stages


def test_issue37_item4_record_keeps_the_per_step_series_the_anytime_checks_read() -> None:
    """top_counts: the largest per-record count after each step; overlaps: the records a step
    shares with the previous one; first_out_of_range: the first step with a bad index."""
    rec = SamplingRecord(5)
    for b in ([0, 1], [1, 2], [3], [1, 3, 9]):
        rec.deliver(b)
        rec.close_step()
    assert rec.top_counts == [1, 2, 2, 3]
    assert rec.overlaps == [0, 1, 0, 1]
    assert rec.first_out_of_range == 4 and rec.out_of_range == 1
    bad = [c for c in sampling_checks(rec, 0.5, 0.01) if c.name == "indices outside the dataset"]
    assert bad[0].departs and bad[0].first_flagged_step == 4


def test_issue37_done_when_3_record_summaries_match_a_plain_reference() -> None:
    """issue 37, Done when 3 (the per-step cost): close_step counts each step's distinct records
    and multiplicities without np.unique; on random batches with repeats, negative and too-large
    indices and empty steps its series equal a plain np.unique reference."""
    rng = np.random.default_rng(3)
    n = 30
    rec = SamplingRecord(n)
    presence, sizes, mult, out = np.zeros(n, dtype=np.int64), [], [], 0
    for step in range(60):
        b = rng.integers(-2, n + 2, size=int(rng.integers(0, 12))) if step % 7 else []
        rec.deliver(b)
        rec.close_step()
        idx = np.asarray(b, dtype=np.int64)
        ok = idx[(idx >= 0) & (idx < n)]
        out += idx.size - ok.size
        uniq, counts = np.unique(ok, return_counts=True)
        presence[uniq] += 1
        sizes.append(uniq.size)
        mult.append(int(counts.max()) if counts.size else 0)
    assert rec.sizes == sizes and rec.max_multiplicity == mult and rec.out_of_range == out
    assert (rec.presence == presence).all() and out > 0 and max(mult) > 1


def _mixed_steps(n: int, steps: int, seed: int) -> list[list[np.ndarray]]:
    """Per step, the batches delivered: strictly increasing ones (some with indices below 0 or
    past ``n`` at either end; two batches every fifth step), unsorted ones with repeats every
    fourth step, no batch every ninth."""
    rng = np.random.default_rng(seed)
    out = []
    for step in range(steps):
        batches = []
        for _ in range(1 + (step % 5 == 0)):
            size = int(rng.integers(0, 15))
            batches.append(np.sort(rng.choice(np.arange(-3, n + 3), size=size, replace=False)))
            if step % 4 == 1:
                batches[-1] = rng.integers(0, n, size=6)
        out.append([] if step % 9 == 0 else batches)
    return out


@pytest.mark.parametrize("every", [1, 3, 64])
def test_issue37_done_when_3_record_of_increasing_batches_matches_a_plain_reference(
    monkeypatch, every
) -> None:
    """issue 37, Done when 3 (the per-step cost): a strictly increasing batch (what Opacus'
    Poisson sampler yields) skips the sort, and closed steps are counted every ``DEFERRED``
    steps or when read; on increasing batches mixed with unsorted ones, out-of-range indices
    at either end, steps of two batches and empty steps, counted after every step, every third
    or in blocks of 64, with reads in between, every per-step series equals a plain np.unique
    reference, and a delivered array the caller changes afterwards changes nothing (the record
    keeps a copy)."""
    from dpaudit.attach import sampling_record

    monkeypatch.setattr(sampling_record, "DEFERRED", every)
    n = 40
    rec = SamplingRecord(n)
    for step, batches in enumerate(_mixed_steps(n, 80, 5)):
        for b in batches:
            rec.deliver(b)
            b[:] = 0  # the caller reuses its array
        rec.close_step()
        assert rec.steps == step + 1
        if step == 30:
            assert len(rec.sizes) == 31  # a read counts the steps set aside
    presence, prev = np.zeros(n, dtype=np.int64), np.zeros(0, dtype=np.int64)
    sizes, mult, tops, overlaps, out = [], [], [], [], 0
    for batches in _mixed_steps(n, 80, 5):
        idx = np.concatenate(batches) if batches else np.zeros(0, dtype=np.int64)
        ok = idx[(idx >= 0) & (idx < n)]
        out += idx.size - ok.size
        uniq, counts = np.unique(ok, return_counts=True)
        presence[uniq] += 1
        sizes.append(uniq.size)
        mult.append(int(counts.max()) if counts.size else 0)
        tops.append(int(presence.max()))
        overlaps.append(int(np.isin(uniq, prev).sum()))
        prev = uniq
    assert rec.sizes == sizes and rec.max_multiplicity == mult and rec.out_of_range == out
    assert rec.top_counts == tops and rec.overlaps == overlaps
    assert (rec.presence == presence).all() and out > 0 and max(mult) > 1


def test_issue37_the_conformance_table_carries_every_check_and_the_unseen_stages(tmp_path):
    """issue 37, Done when: the report shows the conformance table beside the bounds. The score
    file keeps every check (measured beside claimed) and the table built from it has one row
    per check and one "unseen" row per stage not measured, never a pass: a hand-written loop
    whose batches' indices could not be read has its sampling stage unseen, with the reason."""
    from dpaudit.attach.conformance import conformance_rows, conformance_table

    c = GradientCanaries(20, 60, 0.25, 1.0, seed=0)
    rng = np.random.default_rng(0)
    for t in range(8):
        c.record_batch(["a", "b"] if t == 0 else [t], 100)
        c.draw_step()
        c.observe(rng.standard_normal(60))
    res = c.audit(1.0, delta=1e-5, noise_multiplier=1.0, steps=4)
    scores.write(tmp_path / "s.npz", res.score_file)
    back = scores.read(tmp_path / "s.npz")
    rep = res.conformance
    rows = conformance_rows(back.meta)
    checks = [r for r in rows if r["status"] != "unseen"]
    assert [(r["stage"], r["check"]) for r in checks] == [(k.stage, k.name) for k in rep.checks]
    assert [r["measured"] for r in checks] == [k.measured for k in rep.checks]
    steps = next(r for r in checks if r["check"] == "noisy steps taken")
    assert (steps["status"], steps["measured"], steps["claimed"]) == (
        "departs", "8 noise calls", "4 steps"
    )
    unseen = {r["stage"]: r["measured"] for r in rows if r["status"] == "unseen"}
    assert set(unseen) == set(rep.unseen) >= {"sampling", "sensitivity"}
    assert "could not be read: batch 1 holds indices that are not integers" in unseen["sampling"]
    assert [r["stage"] for r in rows] == sorted(
        (r["stage"] for r in rows), key=list(STAGES).index
    )
    table = conformance_table([back])
    assert len(table) == len(rows) and set(table["setting"]) == {"default"}
    assert table["claimed_epsilon"].eq(1.0).all()
    assert conformance_rows({}) == [] and conformance_table([]).empty
