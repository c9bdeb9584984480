"""dpaudit.attach.opacus on real Opacus loops: canary injection against its definition,
BatchMemoryManager, Poisson on and off, the score law against the core, bad inputs."""

from __future__ import annotations

import copy
import functools
import types
import warnings

import numpy as np
import pytest
import torch
from scipy import stats
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from dpaudit.attach import GradientCanaries, opacus
from dpaudit.opacus_import import import_opacus

import_opacus()
from opacus import PrivacyEngine  # noqa: E402
from opacus.utils.batch_memory_manager import BatchMemoryManager  # noqa: E402

warnings.filterwarnings("ignore", message=".*[Ss]ecure RNG.*")


def _data(n: int = 64, d: int = 6, zero: int = 0, seed: int = 0) -> TensorDataset:
    """n records, d informative features then ``zero`` features that are always 0."""
    g = torch.Generator().manual_seed(seed)
    x = torch.cat([torch.randn(n, d, generator=g), torch.zeros(n, zero)], dim=1)
    return TensorDataset(x, torch.randint(0, 3, (n,), generator=g))


def _private(model, data, sigma, clip=1.0, batch=16, poisson=True, lr=0.5, seed=0):
    torch.manual_seed(seed)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    engine = PrivacyEngine(accountant="rdp")
    return engine, *engine.make_private(
        module=model,
        optimizer=opt,
        data_loader=DataLoader(data, batch_size=batch, shuffle=False),
        noise_multiplier=sigma,
        max_grad_norm=clip,
        poisson_sampling=poisson,
    )


def _step(model, opt, xb, yb) -> None:
    opt.zero_grad()
    nn.functional.cross_entropy(model(xb), yb).backward()
    opt.step()


def _flat_grad(model) -> torch.Tensor:
    return torch.cat([p.grad.reshape(-1) for p in model.parameters()])


@pytest.mark.parametrize("memory_manager", [False, True])
def test_injection_is_exactly_the_sampled_in_canaries(memory_manager) -> None:
    """Noise 0: the summed clipped gradient with canaries minus the one without (a twin model
    on the same batches; learning rate 0, so both stay equal) is clip_norm at the coordinate of
    every IN canary sampled that step."""
    data = _data()
    net = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    twin = copy.deepcopy(net)
    _, model, opt, loader = _private(net, data, 0.0, clip=0.7, poisson=False, lr=0.0)
    _, model2, opt2, loader2 = _private(twin, data, 0.0, clip=0.7, poisson=False, lr=0.0)
    aud = opacus(opt, m=40, seed=1, sample_rate=0.5, probes=False)  # probes replace a row
    hits = 0
    for _ in range(2):
        if memory_manager:
            with (
                BatchMemoryManager(
                    data_loader=loader, max_physical_batch_size=4, optimizer=opt
                ) as a,
                BatchMemoryManager(
                    data_loader=loader2, max_physical_batch_size=4, optimizer=opt2
                ) as b,
            ):
                for (xa, ya), (xb, yb) in zip(a, b, strict=True):
                    _step(model, opt, xa, ya)
                    _step(model2, opt2, xb, yb)
                    if not opt._is_last_step_skipped:
                        self_check(aud, model, model2, opt)
                        hits += int(aud.last_draw.sum())
        else:
            for (xa, ya), (xb, yb) in zip(loader, loader2, strict=True):
                _step(model, opt, xa, ya)
                _step(model2, opt2, xb, yb)
                self_check(aud, model, model2, opt)
                hits += int(aud.last_draw.sum())
    assert aud.steps == 8 == aud.draws  # 4 logical steps per epoch, with or without BMM
    assert hits > 0


def self_check(aud, model, model2, opt) -> None:
    diff = (_flat_grad(model) - _flat_grad(model2)).double() * opt.expected_batch_size
    want = torch.from_numpy(aud.canary_gradient(aud.last_draw))
    torch.testing.assert_close(diff, want, atol=1e-5, rtol=0)


def test_poisson_off_samples_each_in_canary_once_per_epoch_and_on_draws_poisson() -> None:
    data = _data(n=64)
    _, model, opt, loader = _private(nn.Linear(6, 3), data, 1.0, poisson=False)
    aud = opacus(opt, m=20, seed=0, data_loader=loader)
    assert aud.sampling == "shuffle" and aud.sample_rate == 0.25
    for _ in range(3):
        for xb, yb in loader:
            _step(model, opt, xb, yb)
    np.testing.assert_array_equal(aud.sampled_counts, 3 * aud.membership)
    engine, model, opt, loader = _private(nn.Linear(6, 3), data, 1.0, poisson=True)
    aud = opacus(opt, m=20, seed=0, data_loader=loader)
    assert aud.sampling == "poisson" and aud.sample_rate == pytest.approx(0.25)
    for xb, yb in loader:
        _step(model, opt, xb, yb)
    assert aud.steps == 4 == engine.accountant.history[0][2]
    res = aud.audit(delta=1e-5, accountant="rdp")  # the claim of the settings it saw
    assert res.verdict["claimed_epsilon"].iloc[0] == pytest.approx(engine.get_epsilon(1e-5))
    assert res.score_file.meta["claim_settings"]["noise_multiplier"] == 1.0


def _law_run(seed: int, poisson: bool, memory_manager: bool):
    """An Opacus loop whose canaries sit on weights of always-zero inputs (no data gradient):
    the auditor's scores, and the same scores read off the parameters (SGD: theta_0 - theta_T
    = lr / B * sum_t noisy sum)."""
    clip, lr, batch = 2.0, 0.3, 16
    net = nn.Linear(56, 3, bias=False)  # weights of inputs 6..55 never get a data gradient
    coords = np.array([r * 56 + c for r in range(3) for c in range(6, 56)])
    _, model, opt, loader = _private(
        net, _data(zero=50, seed=seed), 0.8, clip, batch, poisson, lr, seed
    )
    aud = opacus(opt, m=len(coords), seed=seed, data_loader=loader, coordinates=coords)
    theta0 = next(model.parameters()).detach().clone().reshape(-1)
    for _ in range(5):
        if memory_manager:
            with BatchMemoryManager(
                data_loader=loader, max_physical_batch_size=5, optimizer=opt
            ) as mem:
                for xb, yb in mem:
                    _step(model, opt, xb, yb)
        else:
            for xb, yb in loader:
                _step(model, opt, xb, yb)
    theta = next(model.parameters()).detach().reshape(-1)
    from_params = ((theta0 - theta)[coords] * batch / (lr * clip)).double().numpy()
    return aud, from_params


@pytest.mark.parametrize(
    ("poisson", "memory_manager"), [(True, False), (True, True), (False, False)]
)
def test_score_law_matches_the_core(poisson, memory_manager) -> None:
    """The attached auditor's scores equal the model's own updates at the canary coordinates,
    and their law (IN and OUT) is the core's on the same setting (two-sample KS): a canary
    added at another scale, after the scaling, or not at all, fails."""
    ours_in, ours_out, core_in, core_out = [], [], [], []
    for seed in range(6):
        aud, from_params = _law_run(seed, poisson, memory_manager)
        np.testing.assert_allclose(aud.scores, from_params, atol=2e-4)
        inn = aud.membership == 1
        ours_in.append(aud.scores[inn])
        ours_out.append(aud.scores[~inn])
        core = GradientCanaries(
            aud.m, aud.n_params, aud.sample_rate, aud.clip_norm, 100 + seed, sampling=aud.sampling
        )
        rng = np.random.default_rng(seed)
        for _ in range(aud.steps):
            draw = core.draw_step()
            core.observe(core.canary_gradient(draw) + 0.8 * 2.0 * rng.standard_normal(aud.n_params))
        inn = core.membership == 1
        core_in.append(core.scores[inn])
        core_out.append(core.scores[~inn])
    a, b = np.concatenate(ours_in), np.concatenate(core_in)
    assert stats.ks_2samp(a, b).pvalue > 1e-3
    assert stats.ks_2samp(np.concatenate(ours_out), np.concatenate(core_out)).pvalue > 1e-3
    assert abs(a.mean() - 5) < 0.5  # 20 steps at q = 1/4: 5 canary gradients on average
    assert stats.ks_2samp(a / 16, b).pvalue < 1e-6  # the test sees a wrong scale


def test_bad_inputs() -> None:
    data = _data()
    model = nn.Linear(6, 3)
    with pytest.raises(TypeError, match="needs the Opacus DPOptimizer.*torch.optim.sgd.SGD"):
        opacus(torch.optim.SGD(model.parameters(), lr=0.1), m=5, sample_rate=0.1)
    _, model, opt, loader = _private(model, data, 1.0)
    with pytest.raises(
        ValueError,
        match="m = 100 Dirac canaries need 100 distinct coordinates, "
        "but the optimizer's model has 21",
    ):
        opacus(opt, m=100, data_loader=loader)
    with pytest.raises(ValueError, match="exactly one"):
        opacus(opt, m=5)
    aud = opacus(opt, m=5, data_loader=loader)
    with pytest.raises(ValueError, match="already has an auditor"):
        opacus(opt, m=5, data_loader=loader)
    aud.detach()
    layer = nn.Linear(6, 3)
    _, per_layer, _ = PrivacyEngine().make_private(
        module=layer,
        optimizer=torch.optim.SGD(layer.parameters(), lr=0.1),
        data_loader=DataLoader(data, batch_size=16),
        noise_multiplier=1.0,
        max_grad_norm=[1.0, 1.0],
        clipping="per_layer",
    )
    with pytest.raises(TypeError, match="DPPerLayerOptimizer"):
        opacus(per_layer, m=5, sample_rate=0.1)


def test_issue36_item8_detaching_twice_is_a_clear_error() -> None:
    """Issue 36, item 8: a second ``detach()`` was a raw AttributeError; it is an error saying
    why, and it cannot unhook an auditor attached since."""
    _, _, opt, loader = _private(nn.Linear(6, 3), _data(), 1.0)
    aud = opacus(opt, m=5, data_loader=loader)
    aud.detach()
    with pytest.raises(RuntimeError, match=r"not attached .*detach\(\) was called already"):
        aud.detach()
    other = opacus(opt, m=5, data_loader=loader)
    with pytest.raises(RuntimeError, match="not attached"):
        aud.detach()
    assert opt._dpaudit_auditor is other and opt.add_noise == other._add_noise
    other.detach()


def test_diverged_training_is_a_clear_error() -> None:
    x = torch.full((32, 6), float("nan"))
    _, model, opt, loader = _private(
        nn.Linear(6, 3), TensorDataset(x, torch.zeros(32).long()), 1.0, poisson=False
    )
    aud = opacus(opt, m=5, data_loader=loader)
    for xb, yb in loader:
        _step(model, opt, xb, yb)
    with pytest.raises(ValueError, match="not finite at step 1 of 2"):
        aud.audit(1.0, delta=1e-5)


def test_low_gradient_placement_picks_coordinates_no_record_moves() -> None:
    from dpaudit.attach import low_gradient_coordinates

    data = _data(zero=50)
    net = nn.Linear(56, 3)
    batches = DataLoader(data, batch_size=16)
    coords = low_gradient_coordinates(net, batches, 100, clip_norm=1.0, seed=0)
    rows, cols = coords // 56, coords % 56
    assert len(set(coords)) == 100 and (rows < 3).all() and (cols >= 6).all()  # weights of 0s
    _, model, _, _ = _private(net, data, 1.0)
    with pytest.raises(ValueError, match="give the plain model, before PrivacyEngine"):
        low_gradient_coordinates(model, batches, 10, clip_norm=1.0)


@pytest.mark.parametrize("memory_manager", [False, True])
@pytest.mark.parametrize("clip_at", [None, 3.0])
def test_sensitivity_probe_reaches_the_clipped_sum_exactly(memory_manager, clip_at) -> None:
    """Issue 37, item 1 (sensitivity): noise 0 and probes on the weights of features that are
    always 0 (no record moves them): each logical step's probe, placed in Opacus' per-example
    rows before the clipping, reads back exactly the clipping norm it went through: C = 0.7
    under Opacus' clipping, 3 under a user's clipping that ignores ``max_grad_norm``."""
    net = nn.Sequential(nn.Linear(10, 8), nn.ReLU(), nn.Linear(8, 3))
    _, model, opt, loader = _private(net, _data(zero=4), 0.0, clip=0.7, lr=0.1)
    if clip_at is not None:

        def clip(self):  # the user's replacement of Opacus' clipping (Opacus PR #664)
            asked, self.max_grad_norm = self.max_grad_norm, clip_at
            type(self).clip_and_accumulate(self)
            self.max_grad_norm = asked

        opt.clip_and_accumulate = types.MethodType(clip, opt)
    aud = opacus(opt, m=20, seed=0, data_loader=loader)
    # the weights of the 4 zero features in each of the 8 rows of the first layer
    aud.probes.coordinates = np.array([r * 10 + k for r in range(8) for k in range(6, 10)])
    for _ in range(2):
        if memory_manager:
            with BatchMemoryManager(
                data_loader=loader, max_physical_batch_size=5, optimizer=opt
            ) as mem:
                for xb, yb in mem:
                    _step(model, opt, xb, yb)
        else:
            for xb, yb in loader:
                _step(model, opt, xb, yb)
    got = aud.probes.contributions()
    probed = len(aud.probes.values)
    empty = aud.steps - probed  # Poisson batches with no record carry no probe
    assert probed >= aud.steps - 1 and empty >= 0 and len(got) > probed
    # small probes (10^6 C) and large ones (10^9 C) alike, each clipped on its own
    np.testing.assert_allclose(got, 0.7 if clip_at is None else clip_at, rtol=1e-5)


class _Stream(torch.utils.data.IterableDataset):
    """An iterable-style dataset (no length, no indices)."""

    def __iter__(self):
        yield from _data()


def test_issue37_bad_use_a_loader_the_checks_cannot_observe() -> None:
    """issue 37, Done when: bad use (a loader the checks cannot observe). Each is a
    ``ValueError`` naming why and the way out, never a report a user reads as passed: a plain
    list or generator of batches, an iterable-style dataset, a batch sampler whose class cannot
    be wrapped (it left the optimizer hooked, so the retry with ``sample_rate=`` said "already
    has an auditor"), BatchMemoryManager's loader (its physical batches were taken as logical
    ones: canaries at the physical rate, steps and sampling departing) and the loader given to
    make_private rather than the DPDataLoader it returned (it delivers nothing: sampling and
    steps departed, the measured epsilon read 0). With ``sample_rate=`` the sampling stage is
    reported unseen, with the way to see it."""
    data = _data()
    _, model, opt, loader = _private(nn.Linear(6, 3), data, 1.0)
    for given, why in [
        ([(torch.zeros(2, 6), torch.zeros(2).long())], "is a list, not a torch DataLoader"),
        ((b for b in loader), "is a generator, not a torch DataLoader"),
        (DataLoader(_Stream(), batch_size=16), "no length \\(an iterable-style dataset\\)"),
        (DataLoader(data, batch_sampler=[[0, 1], [2, 3]]), "cannot observe the batch sampler"),
    ]:
        with pytest.raises(ValueError, match=f"{why}.*sample_rate="):
            opacus(opt, m=5, data_loader=given)
        assert not hasattr(opt, "_dpaudit_auditor") and opt.add_noise.__self__ is opt
        assert opt.scale_grad.__self__ is opt
    with BatchMemoryManager(data_loader=loader, max_physical_batch_size=4, optimizer=opt) as mem:
        with pytest.raises(ValueError, match="BatchSplittingSampler.*make_private returned"):
            opacus(opt, m=5, data_loader=mem)
    aud = opacus(opt, m=5, sample_rate=0.25)  # nothing stayed attached: the way out works
    for xb, yb in loader:
        _step(model, opt, xb, yb)
    rep = aud.audit(delta=1e-5, accountant="rdp").conformance
    assert "sampling" in rep.unseen and "give the training's DataLoader" in rep.summary()
    aud.detach()
    original = DataLoader(data, batch_size=16)
    _, model, opt, dp_loader = _private(nn.Linear(6, 3), data, 1.0)
    aud = opacus(opt, m=5, data_loader=original)  # the training iterates dp_loader
    for xb, yb in dp_loader:
        _step(model, opt, xb, yb)
    with pytest.raises(ValueError, match="delivered no batch during the 4 noisy steps.*new DPD"):
        aud.audit(1.0, delta=1e-5)


def test_issue37_bad_use_a_step_function_that_never_steps() -> None:
    """issue 37, Done when: bad use (a step function that never steps). A loop that never
    calls the DPOptimizer's step, or steps ``original_optimizer`` (no noise), leaves the
    auditor without a noisy step: the audit, the score file and the CI check raise naming the
    noise call that never ran and the way out (it said "attach the canaries before training")."""
    from dpaudit.attach import check_conformance

    for stepper in ("none", "original"):
        _, model, opt, loader = _private(nn.Linear(6, 3), _data(), 1.0)
        aud = opacus(opt, m=5, data_loader=loader)
        for xb, yb in loader:
            opt.zero_grad()
            nn.functional.cross_entropy(model(xb), yb).backward()
            if stepper == "original":
                opt.original_optimizer.step()
        for call, args in (
            (aud.audit, (1.0,)),
            (aud.score_file, ()),
            (functools.partial(check_conformance, aud), (1.0,)),
        ):
            with pytest.raises(ValueError, match="no noisy step.*add_noise never ran.*original"):
                call(*args, delta=1e-5)
        aud.detach()


def test_issue37_bad_use_the_hand_written_calls_on_an_opacus_auditor() -> None:
    """issue 37, Done when: bad use (canaries drawn but never observed, or the reverse, on the
    Opacus path). The Opacus auditor draws and observes inside the optimizer's step; a loop
    that also calls the hand-written API (``draw_step``, ``observe``, ``probe_rows``) drew
    canaries the noise call never observed, and the next step failed deep inside Opacus with
    the hand-written loop's advice. Each call is a ``TypeError`` saying the auditor does it
    itself; the training and the audit then go on unharmed."""
    _, model, opt, loader = _private(nn.Linear(6, 3), _data(), 1.0)
    aud = opacus(opt, m=5, data_loader=loader)
    for call in (
        aud.draw_step,
        lambda: aud.observe(np.zeros(21)),
        lambda: aud.observe_values(np.zeros(5)),
        lambda: aud.probe_rows(np.zeros((2, 21))),
    ):
        with pytest.raises(TypeError, match="draws the canaries.*itself.*hand-written loop"):
            call()
    for xb, yb in loader:
        _step(model, opt, xb, yb)
    assert (aud.draws, aud.steps) == (4, 4)
    aud.audit(1.0, delta=1e-5)
    aud.detach()


#: SHA-256 of :func:`_pinned_run_parts` on the code before the per-step speed-ups (issue 37,
#: Done when 3: bc84935) with today's probe design applied to it (each probe's value written at
#: its coordinate, the row not zeroed; PROBE_SCALE 10^6; the sensitivity checks' texts, which the
#: score file's conformance report holds, as today); CPU, float32, this project's pinned torch
#: and Opacus.
PINNED_DIGEST = "53404bbdebd88a8830afaa00635f2e9fb2c2e1f433da6dcf2fdcf6cb7f08b2c1"


def _pinned_run_parts() -> list[bytes]:
    """A short audited Opacus run (5 logical steps) as bytes: its scores, score-file meta
    (conformance report included), probes' measured values and the normalisation divisor."""
    import json

    data = _data(n=64, d=6, seed=3)
    torch.manual_seed(0)  # the initial weights
    model = nn.Sequential(nn.Linear(6, 32), nn.ReLU(), nn.Linear(32, 3))
    _, model, opt, loader = _private(model, data, 1.0, batch=16, seed=1)
    aud = opacus(opt, m=60, seed=7, data_loader=loader)
    torch.manual_seed(2)
    steps = 0
    while steps < 5:
        for xb, yb in loader:
            if steps < 5:
                _step(model, opt, xb, yb)
                steps += 1
    sf = aud.audit(delta=1e-5, accountant="rdp").score_file
    assert "conformance" in sf.meta and aud.probes.values and aud._divisor_steps == 5
    return [
        *(np.ascontiguousarray(a).tobytes() for a in (sf.score, sf.membership, sf.canary_id)),
        json.dumps(sf.meta, sort_keys=True, default=str).encode(),
        np.ascontiguousarray(aud.probes.contributions()).tobytes(),
        np.concatenate(aud.probes.large).tobytes(),
        repr(aud._normalisation_measured()).encode(),
    ]


def test_issue37_done_when_3_speedups_leave_the_result_bit_identical() -> None:
    """issue 37, Done when 3: the per-step speed-ups of the canaries, probes and checks change
    no result: the SHA-256 of a short run's results was computed on the code before them."""
    import hashlib

    assert hashlib.sha256(b"".join(_pinned_run_parts())).hexdigest() == PINNED_DIGEST


@pytest.mark.parametrize("every", [1, 2, 3])
def test_issue37_done_when_3_deferred_sums_fold_to_the_same_result(monkeypatch, every) -> None:
    """issue 37, Done when 3: the Opacus auditor folds each step's gathered canary values and
    divisor into its running sums every ``_DEFERRED`` steps (and before any read); folding
    after every step (the per-step order of before), every second or third step (a fold in the
    middle of the run, steps left over for the read) gives the pinned run's digest."""
    import hashlib

    from dpaudit.attach import opacus_adapter

    monkeypatch.setattr(opacus_adapter, "_DEFERRED", every)
    assert hashlib.sha256(b"".join(_pinned_run_parts())).hexdigest() == PINNED_DIGEST
