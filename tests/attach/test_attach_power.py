"""dpaudit.attach.power: the ceiling and the power of an own-training audit (issue 37, item 3)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpaudit.accounting import dpsgd
from dpaudit.attach import audit_scores
from dpaudit.attach.power import (
    UPSTREAM_STAGES,
    ceiling,
    correct_counts,
    flags,
    power,
    power_text,
)
from dpaudit.attach.power import _ranked_in_counts as ranked_in_counts
from dpaudit.estimators.fdp_one_run.guesses import guess_counter
from dpaudit.estimators.one_run import bound as one_run
from dpaudit.mechanisms.dpsgd_ideal import per_step_updates, summed_update_parts

#: A small known setting: m, q, T, claim, delta (the accountant rdp keeps the tests fast).
M, Q, T, CLAIM, DELTA = 200, 0.5, 10, 1.0, 1e-5


def _per_step_rate(sigma: float, runs: int, seed: int) -> tuple[float, float]:
    """The verdict's flag rate at noise multiplier sigma over ``runs`` runs drawn step by step
    (the per-step law, independent of the closed form the power uses), and its standard error."""
    rng = np.random.default_rng(seed)
    draws = [per_step_updates(M, sigma, Q, T, rng) for _ in range(runs)]
    score = np.stack([x.sum(axis=0) for x, _ in draws])
    member = np.stack([mem for _, mem in draws])
    rate = float(flags(score, member, CLAIM, DELTA).mean())
    return rate, math.sqrt(0.8 * 0.2 / runs)


@pytest.fixture(scope="module")
def known() -> object:
    return power(M, Q, T, CLAIM, DELTA, accountant="rdp")


def test_issue37_item3_power_flags_at_80_percent_and_not_at_half_the_epsilon(known) -> None:
    """issue 37, item 3: at the returned epsilon an independent Monte Carlo (another seed, the
    per-step law) flags at least 80% of the runs within its error; at half that epsilon
    clearly fewer."""
    assert math.isfinite(known.epsilon) and known.epsilon > CLAIM
    assert known.flag_rate >= 0.8
    rate, se = _per_step_rate(known.noise_multiplier, 400, seed=11)
    assert rate >= 0.8 - 3 * se
    half = dpsgd.noise_multiplier(known.epsilon / 2, DELTA, Q, T, accountant="rdp")
    assert half > known.noise_multiplier
    rate_half, _ = _per_step_rate(half, 400, seed=12)
    assert rate_half < 0.5


def test_issue37_item3_power_is_monotone_in_m() -> None:
    """More canaries see more: the epsilon flagged with 80% probability falls with m."""
    eps = [power(m, Q, T, CLAIM, DELTA, accountant="rdp").epsilon for m in (50, 200, 1000)]
    assert eps[0] > eps[1] > eps[2]


def test_power_of_a_claim_above_the_ceiling_is_none() -> None:
    p = power(50, Q, T, ceiling(50, DELTA) + 0.5, DELTA, accountant="rdp")
    assert math.isinf(p.epsilon) and p.flag_rate < 0.8
    assert "no true epsilon is flagged" in str(p)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"m": 1}, "m"),
        ({"m": 2.0}, "m"),
        ({"sample_rate": 0.0}, "sample_rate"),
        ({"sample_rate": 1.5}, "sample_rate"),
        ({"steps": 0}, "steps"),
        ({"claimed_epsilon": math.inf}, "claimed_epsilon"),
        ({"claimed_epsilon": -1.0}, "claimed_epsilon"),
        ({"delta": 0.0}, "delta"),
        ({"confidence": 1.0}, "confidence"),
        ({"level": 1.0}, "level"),
        ({"replicates": 5}, "replicates"),
        ({"tolerance": 0.0}, "tolerance"),
    ],
)
def test_power_rejects_bad_input_naming_it(kwargs: dict, name: str) -> None:
    args = {"m": M, "sample_rate": Q, "steps": T, "claimed_epsilon": CLAIM, "delta": DELTA}
    args.update({k: v for k, v in kwargs.items() if k in args})
    extra = {k: v for k, v in kwargs.items() if k not in args}
    with pytest.raises(ValueError, match=f"power: {name} must be"):
        power(**args, **extra)


def test_flags_are_the_verdicts_flags() -> None:
    """The thresholds decide each run as the verdict does (full audits, runs near the edge)."""
    member, hits, noise = summed_update_parts(M, Q, T, np.random.default_rng(5), 8)
    seen = []
    for sigma in (0.9, 1.3):
        score = hits + sigma * noise
        fast = flags(score, member, CLAIM, DELTA).tolist()
        slow = [
            audit_scores(s, mem, CLAIM, delta=DELTA).flagged
            for s, mem in zip(score, member, strict=True)
        ]
        assert fast == slow
        seen += slow
    assert any(seen) and not all(seen)  # both outcomes compared


def test_correct_counts_are_the_estimators_counts() -> None:
    rng = np.random.default_rng(2)
    score, member = rng.normal(size=(3, 60)), rng.integers(0, 2, size=(3, 60))
    pairs = np.array(one_run.default_grid(60))
    pairs = pairs[pairs.sum(axis=1) <= 60]
    got = correct_counts(ranked_in_counts(score, member), pairs)
    for i in range(3):
        want = [one_run.guess_counts(score[i], member[i], kp, km)[1] for kp, km in pairs]
        assert got[i].tolist() == want
        count = guess_counter(score[i], member[i], "balanced")
        r = 7
        kp, km, wrong = count(r)
        assert (
            correct_counts(
                ranked_in_counts(score[i : i + 1], member[i : i + 1]), np.array([[kp, km]])
            )[0, 0]
            == r - wrong
        )


def test_issue37_item3_ceiling_bounds_every_run_whatever_its_coins() -> None:
    """issue 37, item 3 ("largest valid lower bound 4.42 ... can certify at most 4.4"): with
    coins whose IN count lies on no guess count of the grids, perfectly ordered scores beat the
    old ceiling (perfect scores with ties, which abstain at every cut inside a tie); the
    ceiling now bounds them."""
    m = 100
    member = np.r_[np.ones(47, int), np.zeros(53, int)]
    ordered = audit_scores(member + np.linspace(0, 0.5, m), member, 50.0, delta=DELTA)
    tied = audit_scores(member * 1.0, member, 50.0, delta=DELTA)
    assert tied.lower_bound < ordered.lower_bound  # the old ceiling was below a real run
    assert ordered.lower_bound <= ceiling(m, DELTA) + 1e-9
    assert ordered.verdict["largest_detectable_epsilon"].iloc[0] >= ordered.lower_bound
    for n_in in (30, 44, 50, 61):  # any coins, ordered or tied perfect scores
        coins = (np.arange(m) < n_in).astype(int)
        for score in (coins + np.linspace(0, 0.5, m), coins * 1.0):
            bound = audit_scores(score, coins, 50.0, delta=DELTA).lower_bound
            if n_in == 30:  # 30 of 100 IN is no fair coin (p = 8e-5): no bound (issue 36, item 1)
                assert math.isnan(bound)
                continue
            assert bound <= ceiling(m, DELTA) + 1e-9


def test_power_text_names_the_unseen_stages() -> None:
    text = power_text(None, UPSTREAM_STAGES)
    assert "power unknown" in text
    assert "sampling, clipping, duplication, accumulation and normalisation" in text
    assert "cannot see clipping (" in power_text(None, ["clipping"])
    assert "cannot see" not in power_text(None, ())


def test_power_falls_back_to_rdp_where_the_accountant_fails(monkeypatch) -> None:
    """A PRV grid too large at a tiny noise multiplier: RDP (an upper bound on DP-SGD's
    epsilon) converts instead, and the result names it."""
    real = dpsgd.epsilon

    def prv_fails(accountant, *args):
        if accountant == "prv":
            raise dpsgd.GridTooLargeError("prv grid too large")
        return real(accountant, *args)

    monkeypatch.setattr(dpsgd, "epsilon", prv_fails)
    p = power(M, Q, T + 1, CLAIM, DELTA, accountant="prv")
    assert p.accountant == "rdp" and math.isfinite(p.epsilon)
    assert p.epsilon == pytest.approx(real("rdp", p.noise_multiplier, Q, T + 1, DELTA))
    assert "rdp accountant" in str(p)


def test_stages_a_conformance_check_measured_leave_the_unseen_list():
    """Issue 37, item 3: the verdict names only the stages no check covered: sampling once the
    loader was watched, accumulation once the steps were counted; duplication through two
    indices stays unseen (no check covers it)."""
    from dpaudit.attach.power import UPSTREAM_STAGES, unseen_after

    assert unseen_after([]) == UPSTREAM_STAGES
    assert unseen_after(["sampling", "steps", "noise", "accounting"]) == (
        "clipping",
        "duplication",
        "normalisation",
    )
    assert "normalisation" not in unseen_after(["normalisation"])
    assert "clipping" not in unseen_after(["sensitivity"])
    assert unseen_after(["steps"]) == UPSTREAM_STAGES  # batches per step need the loader
