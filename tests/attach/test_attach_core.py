"""dpaudit.attach core: canaries against their definition, the claim, the score file and the
verdict (pure NumPy; fast)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpaudit import scores
from dpaudit.accounting import dpsgd
from dpaudit.attach import (
    VERDICT_ESTIMATORS,
    GradientCanaries,
    InputCanaries,
    audit_file,
    audit_scores,
    largest_detectable_epsilon,
    make_score_file,
    resolve_claim,
)
from dpaudit.cli import main
from dpaudit.verdict import FLAGGED, OUTSIDE_VERDICT


def _simulate(c: GradientCanaries, steps: int, sigma: float, seed: int = 0) -> None:
    """DP-SGD on a model whose data gradients are 0 at the canary coordinates."""
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        draw = c.draw_step()
        c.observe(c.canary_gradient(draw) + sigma * c.clip_norm * rng.standard_normal(c.n_params))


def test_canary_gradient_is_clip_norm_at_each_sampled_in_canary() -> None:
    c = GradientCanaries(50, 400, sample_rate=0.5, clip_norm=2.5, seed=3)
    for _ in range(5):
        draw = c.draw_step()
        assert not (draw & (c.membership == 0)).any()  # only IN canaries are ever sampled
        vec = c.canary_gradient(draw)
        want = np.zeros(400)
        want[c.coordinates[draw]] = 2.5
        np.testing.assert_array_equal(vec, want)
        c.observe(vec)
    assert len(np.unique(c.coordinates)) == 50


def test_poisson_and_shuffle_sampling_of_in_canaries() -> None:
    c = GradientCanaries(400, 1000, sample_rate=0.1, clip_norm=1.0, seed=0)
    for _ in range(200):
        c.draw_step()
        c.observe_values(np.zeros(c.m))
    inn = c.membership == 1
    assert (c.sampled_counts[~inn] == 0).all()
    mean = c.sampled_counts[inn].mean()  # Binomial(200, 0.1): mean 20, sd of the mean ~0.3
    assert abs(mean - 20) < 1.5
    s = GradientCanaries(400, 1000, sample_rate=0.1, clip_norm=1.0, seed=0, sampling="shuffle")
    for _ in range(30):  # three epochs of 10 steps: each IN canary exactly once per epoch
        s.draw_step()
        s.observe_values(np.zeros(s.m))
    np.testing.assert_array_equal(s.sampled_counts, 3 * s.membership)


def test_observe_sums_the_noisy_update_at_the_coordinates_over_clip_norm() -> None:
    c = GradientCanaries(4, 10, sample_rate=1.0, clip_norm=2.0, seed=1, coordinates=[7, 0, 3, 5])
    a, b = np.arange(10.0), np.ones(10)
    c.draw_step()
    c.observe(a)
    c.draw_step()
    c.observe(b)
    np.testing.assert_allclose(c.scores, (a[[7, 0, 3, 5]] + 1) / 2.0)
    assert c.steps == 2


def test_score_law_without_data_gradient() -> None:
    """IN: Binomial(T, q) + sigma sqrt(T) Z; OUT: sigma sqrt(T) Z (module docstring)."""
    c = GradientCanaries(2000, 4000, sample_rate=0.2, clip_norm=3.0, seed=2)
    _simulate(c, 50, sigma=0.5)
    s, inn = c.scores, c.membership == 1
    assert abs(s[inn].mean() - 10) < 0.3 and abs(s[~inn].mean()) < 0.3
    assert abs(s[~inn].std() - 0.5 * math.sqrt(50)) < 0.3
    assert abs(s[inn].std() - math.sqrt(50 * 0.2 * 0.8 + 0.25 * 50)) < 0.3


def test_claim_from_settings_is_the_library_accountant() -> None:
    claim = resolve_claim(
        delta=1e-5, accountant="rdp", noise_multiplier=1.1, sample_rate=0.01, steps=500
    )
    assert claim.epsilon == pytest.approx(dpsgd.epsilon_rdp(1.1, 0.01, 500, 1e-5))
    assert claim.source == "accountant" and claim.accountant == "rdp"
    given = resolve_claim(2.0, delta=1e-5)
    assert (given.epsilon, given.source, given.accountant) == (2.0, "given", "user")
    assert resolve_claim(delta=1e-5, noise_multiplier=0, sample_rate=0.1, steps=3).epsilon is None


def test_score_file_round_trips_and_the_cli_audits_it(tmp_path, capsys) -> None:
    c = GradientCanaries(200, 1000, sample_rate=0.2, clip_norm=1.0, seed=0)
    _simulate(c, 20, sigma=1.0)
    sf = c.score_file(4.0, delta=1e-5, experiment="mine", setting="eps4")
    path = scores.write(tmp_path / "mine.npz", sf)
    back = scores.read(path)
    np.testing.assert_array_equal(back.score, sf.score)
    np.testing.assert_array_equal(back.membership[0], c.membership)
    assert back.meta["claimed_epsilon"] == 4.0 and back.meta["steps"] == 20
    assert back.meta["design"] == "one_run" and back.meta["claim_source"] == "given"
    assert main(["audit", str(path), "--csv"]) == 0
    assert "one_run" in capsys.readouterr().out
    assert audit_file(back).verdict.equals(
        c.audit(4.0, delta=1e-5, setting="eps4", experiment="mine").verdict
    )
    two = scores.concat(
        [
            back,
            scores.ScoreFile(
                **{k: getattr(back, k) for k in ("score", "membership", "canary_id")},
                meta={**back.meta, "seed": 1},
            ),
        ]
    )
    with pytest.raises(ValueError, match="design 'one_run' and 2 trial"):
        audit_file(two)


def test_verdict_flags_too_little_noise_and_not_the_honest_claim() -> None:
    # the training runs at sigma = 0.3 but claims the epsilon of sigma = 3
    c = GradientCanaries(1000, 5000, sample_rate=1.0, clip_norm=1.0, seed=0)
    _simulate(c, 5, sigma=0.3)
    claimed = dpsgd.epsilon_rdp(3.0, 1.0, 5, 1e-5)
    bad = c.audit(claimed, delta=1e-5)
    assert bad.flagged and bad.verdict["verdict"].iloc[0] == FLAGGED
    assert bad.lower_bound > claimed
    honest = c.audit(delta=1e-5, accountant="rdp", noise_multiplier=0.3)
    assert not honest.flagged and honest.verdict["verdict"].iloc[0] == (
        "not flagged: no evidence at 1,000 canaries"
    )
    assert honest.verdict["joint_confidence"].iloc[0] == pytest.approx(0.95)
    assert set(honest.table["estimator"]) == set(VERDICT_ESTIMATORS)
    assert (honest.table["confidence"] == 0.975).all()


def test_issue37_item3_not_flagged_is_no_clean_bill() -> None:
    """issue 37, item 3: an unflagged verdict of noise-call canaries states the run's power
    and the stages upstream of the noise call that it cannot see; a conformance check that
    covered some passes the rest; black-box canaries have no idealised law."""
    c = GradientCanaries(1000, 5000, sample_rate=1.0, clip_norm=1.0, seed=0)
    _simulate(c, 5, sigma=3.0)
    honest = c.audit(delta=1e-5, accountant="rdp", noise_multiplier=3.0)
    assert not honest.flagged
    assert honest.unseen_stages == (
        "sampling",
        "clipping",
        "duplication",
        "accumulation",
        "normalisation",
    )
    p = honest.power
    assert p is not None and p.m == 1000 and p.steps == 5 and p.sample_rate == 1.0
    assert p.claimed_epsilon == pytest.approx(honest.verdict["claimed_epsilon"].iloc[0])
    assert p.epsilon > p.claimed_epsilon and p.accountant == "rdp"
    text = str(honest)
    assert f"flags a true epsilon >= {p.epsilon:.3g} with 80% probability" in text
    assert "not a clean bill" in text
    assert "cannot see sampling, clipping, duplication, accumulation and normalisation" in text
    covered = audit_file(honest.score_file, unseen_stages=["sampling"])
    assert "cannot see sampling (" in str(covered)
    member = np.arange(20) % 2
    black = audit_scores(np.linspace(0, 1, 20), member, 1.0, delta=1e-5)
    assert black.power is None and black.unseen_stages == ()
    assert "power unknown" in str(black) and "cannot see" not in str(black)


def test_rows_outside_the_verdict_set_never_flag() -> None:
    c = GradientCanaries(1000, 5000, sample_rate=1.0, clip_norm=1.0, seed=0)
    _simulate(c, 5, sigma=0.3)
    extra = {"gdp": {"method": "fdp_one_run", "family": "gdp", "selections": ["bonferroni"]}}
    res = c.audit(0.01, delta=1e-5, extra_estimators=extra)
    row = res.table[res.table["estimator"] == "gdp"].iloc[0]
    assert row["epsilon"] > 0.01 and not row["in_verdict"]  # above the claim, yet
    assert row["exceeds_claim"] == 0 and row["verdict"] == OUTSIDE_VERDICT
    assert res.verdict["estimator"].iloc[0] in VERDICT_ESTIMATORS


def test_largest_detectable_epsilon_is_the_ceiling() -> None:
    member = np.arange(100) % 2
    ceiling = largest_detectable_epsilon(100, 1e-5)
    assert not audit_scores(member * 1.0, member, ceiling + 0.01, delta=1e-5).flagged
    res = audit_scores(member * 1.0, member, ceiling - 0.3, delta=1e-5)
    assert res.flagged and res.lower_bound == pytest.approx(ceiling)
    assert res.verdict["largest_detectable_epsilon"].iloc[0] == pytest.approx(ceiling)


def test_input_canaries_mislabeled_and_random() -> None:
    x = np.arange(300, dtype=np.float32).reshape(100, 3)
    y = np.arange(100) % 4
    c = InputCanaries(20, "mislabeled", seed=1, x_pool=x, y_pool=y)
    orig = {tuple(r): lab for r, lab in zip(x, y, strict=True)}
    assert all(orig[tuple(r)] != lab for r, lab in zip(c.x, c.y, strict=True))
    xi, _ = c.members
    assert len(xi) == int(c.membership.sum())
    r = InputCanaries(10, "random_input", input_shape=(2, 5), n_classes=3)
    assert r.x.shape == (10, 2, 5) and set(r.y) <= {0, 1, 2}
    sf = r.score_file(1.0, delta=1e-5, scores=np.linspace(0, 1, 10))
    assert sf.meta["threat_model"] == "black_box_loss" and sf.meta["canary_type"] == "random_input"


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: GradientCanaries(11, 10, 0.1, 1.0), "m = 11 Dirac canaries need 11 distinct"),
        (lambda: GradientCanaries(5, 10, 0.0, 1.0), "sample_rate must be"),
        (lambda: GradientCanaries(5, 10, 0.1, float("nan")), "clip_norm"),
        (lambda: GradientCanaries(3, 10, 0.1, 1.0, coordinates=[1, 1, 2]), "distinct"),
        (
            lambda: make_score_file([0.0, np.nan, 1.0], [0, 1, 1], 1.0, delta=1e-5),
            "score of canary 1 is nan",
        ),
        (lambda: make_score_file([0.0, 1.0], [0, 1, 1], 1.0, delta=1e-5), "2 scores for 3"),
        (lambda: make_score_file([0.0, 1.0], [0, 2], 1.0, delta=1e-5), "membership"),
        (lambda: resolve_claim(delta=1e-5, noise_multiplier=1.0), "missing: sample_rate, steps"),
        (lambda: resolve_claim(1.0, delta=0), "delta must"),
        (lambda: resolve_claim(-1.0, delta=1e-5), "claimed_epsilon must"),
        (lambda: InputCanaries(5, "mislabeled"), "need held-out records"),
        (
            lambda: InputCanaries(5, "mislabeled", x_pool=np.zeros((9, 2)), y_pool=np.zeros(9)),
            "integer class labels",
        ),
        (lambda: InputCanaries(5, "shuffled"), "canary kind must be one of"),
    ],
)
def test_bad_inputs_give_clear_errors(call, match) -> None:
    with pytest.raises(ValueError, match=match):
        call()


def test_non_finite_update_is_an_error_naming_the_step() -> None:
    c = GradientCanaries(3, 10, 1.0, 1.0, coordinates=[0, 1, 2])
    c.draw_step()
    c.observe(np.zeros(10))
    c.draw_step()
    c.observe(np.r_[0.0, np.inf, np.zeros(8)])
    with pytest.raises(ValueError, match="canary 1's coordinate 1 was not finite at step 2"):
        c.audit(1.0, delta=1e-5)
    with pytest.raises(ValueError, match="no noisy step was observed: observe\\(\\) was never"):
        GradientCanaries(3, 10, 1.0, 1.0).score_file(1.0, delta=1e-5)


def test_issue36_item10_draws_and_observations_must_pair() -> None:
    """Issue 36, item 10: observe() without draw_step(), or several draws per observed step,
    is a clear error naming what is wrong (it used to end "not flagged")."""
    c = GradientCanaries(4, 10, 0.5, 1.0, seed=0)
    with pytest.raises(ValueError, match="observe\\(\\) for step 1 without draw_step"):
        c.observe(np.zeros(10))
    c.draw_step()
    with pytest.raises(ValueError, match="drawn but never observed"):
        c.draw_step()  # a second draw for the same step
    c.observe(np.zeros(10))  # the first draw's step, observed: fine
    assert (c.steps, c.draws) == (1, 1)
    c.draw_step()
    with pytest.raises(ValueError, match="drawn for 2 steps but 1 noisy sums observed"):
        c.audit(1.0, delta=1e-5)
    c.observe(np.zeros(10))
    c.audit(1.0, delta=1e-5)  # paired: audits


def test_issue37_bad_use_a_claim_whose_steps_disagree_with_the_steps_observed() -> None:
    """issue 37, Done when: bad use (a claim whose steps disagree with the steps observed).
    Beside ``claimed_epsilon`` the stated ``steps`` reach only the conformance report, which
    read ``steps=2.5`` as 2 and ``steps=True`` as 1 step; they are checked as the claim's
    settings are. A claim counting fewer steps than the noisy steps observed departs at the
    steps stage naming both counts; more steps than observed is conservative, noted."""
    c = GradientCanaries(4, 10, 0.5, 1.0, seed=0)
    for _ in range(3):
        c.draw_step()
        c.observe(np.zeros(10))
    for bad in (2.5, True, "3"):
        with pytest.raises(ValueError, match="steps must be a whole number >= 1"):
            c.audit(1.0, delta=1e-5, steps=bad)
        with pytest.raises(ValueError, match="steps must be a whole number >= 1"):
            c.audit(delta=1e-5, noise_multiplier=1.0, sample_rate=0.5, steps=bad)
    fewer = c.audit(1.0, delta=1e-5, steps=2).conformance
    row = fewer.table().set_index("check").loc["noisy steps taken"]
    assert fewer.departing_stages == ["steps"] and bool(row["departs"])
    assert (row["measured"], row["claimed"]) == ("3 noise calls", "2 steps")
    assert "fewer steps than the training took" in row["note"]
    more = c.audit(1.0, delta=1e-5, steps=5).conformance
    row = more.table().set_index("check").loc["noisy steps taken"]
    assert not row["departs"] and "more steps than were taken" in row["note"]
    assert not c.audit(1.0, delta=1e-5, steps=3.0).conformance.departs  # a whole float: exact


def test_no_noise_claims_nothing_and_gets_no_verdict() -> None:
    from dpaudit.verdict import NO_CLAIM

    c = GradientCanaries(100, 1000, sample_rate=1.0, clip_norm=1.0, seed=0)
    _simulate(c, 3, sigma=0.0)
    res = c.audit(delta=1e-5, accountant="rdp", noise_multiplier=0.0)
    assert res.score_file.meta["claimed_epsilon"] is None
    assert res.verdict["verdict"].iloc[0] == NO_CLAIM and not res.flagged
    assert res.lower_bound > 0  # the noiseless run is still bounded from below


def test_verdict_estimators_are_family_free():
    # the verdict must hold for every mechanism meeting the claim: no block may assume a family
    from dpaudit.attach.claim import VERDICT_ESTIMATORS
    from dpaudit.estimators.registry import block_assumes

    assert {name: block_assumes(spec) for name, spec in VERDICT_ESTIMATORS.items()} == {
        name: "" for name in VERDICT_ESTIMATORS
    }


@pytest.mark.parametrize("n_in", [1000, 990, 900])
def test_issue36_item1_pure_noise_not_a_fair_coin_is_never_flagged(n_in: int) -> None:
    """Issue 36, item 1: pure N(0, 1) scores with 1000 / 990 / 900 of 1000 IN (b656a52: largest
    valid lower bound 4.11 / 3.57 / 1.86, flagged against claim 1) give no valid bound; the
    verdict names the count."""
    rng = np.random.default_rng(n_in)
    member = np.zeros(1000, dtype=np.int8)
    member[rng.permutation(1000)[:n_in]] = 1
    result = audit_scores(rng.standard_normal(1000), member, 1.0, delta=1e-5)
    assert not result.flagged
    valid = result.table[result.table["valid"].astype(bool)]
    assert valid.empty or valid["epsilon"].max() <= 0.3
    note = f"no verdict: membership is not a fair coin ({n_in} of 1000 IN)"
    assert result.verdict["verdict"].iloc[0] == note and note in str(result)
    assert (result.table["membership_pvalue"] < 1e-3).all()


def test_issue36_item1_fair_coin_run_keeps_its_bound_and_pvalue() -> None:
    """Issue 36, item 1: the same scores with the attached canaries' fair coins keep the bound
    (here a planted signal, flagged) and report the binomial test's p-value."""
    c = InputCanaries(1000, "random_input", seed=0, input_shape=(4,), n_classes=2)
    result = c.audit(1.0, delta=1e-5, scores=3.0 * c.membership)
    assert result.flagged and result.lower_bound > 1.0
    assert (result.table["membership_pvalue"] > 1e-3).all()
    assert result.score_file.meta["inclusion_probability"] == 0.5


@pytest.mark.parametrize("m", [1000, 20000, 200000])
def test_issue37_done_when_3_poisson_draws_made_ahead_are_each_steps_draws(m) -> None:
    """issue 37, Done when 3: Poisson canary draws take their uniforms from blocks of steps
    drawn at once (up to 16 steps, about 1 MB); over more steps than a block the draws and
    counts equal those of a generator drawing each step on its own (the code before)."""
    from dpaudit.seeding import derive_seed

    c = GradientCanaries(m, m + 5, 0.1, 1.0, seed=2)
    rng = np.random.default_rng(derive_seed(2, "attach", "sampling"))
    for _ in range(20):
        draw = c.draw_step()
        want = (rng.random(m) < 0.1) & (c.membership == 1)
        assert (draw == want).all()
        c.observe_values(np.zeros(m))
    assert c.sampled_counts.sum() > 0
