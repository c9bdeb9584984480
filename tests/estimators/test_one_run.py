"""One-run bound (Steinke, Nasr, Jagielski 2023): paper numbers, validity, selection rules."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import special, stats

from dpaudit.estimators.one_run import bound as orb


@pytest.mark.parametrize(
    ("m", "r", "v", "delta", "expected", "tol"),
    [
        # Fig. 10 / Sec. 5.2: Gaussian example, 1439 of 1510 correct, m = 1e5: "2.675".
        (100_000, 1510, 1439, 1e-5, 2.6759, 1e-3),
        # Fig. 9: eps=4 randomized response, 10^4 guesses, 98.2% correct: "~3.87".
        (10_000, 10_000, 9820, 1e-5, 3.87, 5e-3),
    ],
)
def test_paper_numbers(m, r, v, delta, expected, tol):
    assert orb.epsilon_lower_bound(m, r, v, delta, 0.95) == pytest.approx(expected, abs=tol)


@pytest.mark.parametrize(
    ("v", "expected"),  # Fig. 1 (m = r = 100, delta = 0), our recomputation
    [(60, 0.05), (70, 0.47), (80, 0.96), (90, 1.63), (95, 2.17), (100, 3.49)],
)
def test_fig1_pure_dp(v, expected):
    assert orb.epsilon_lower_bound(100, 100, v, 0.0) == pytest.approx(expected, abs=0.006)


def test_delta_term_scales_with_m_and_reduces_bound():
    # Fig. 1: at delta = 1e-2 the bound for 100/100 correct drops to 0.81 (our recomputation).
    assert orb.epsilon_lower_bound(100, 100, 100, 1e-2) == pytest.approx(0.81, abs=0.006)
    # m = 1e5, delta = 1e-5: small r cannot reject anything (2 m delta alpha too large).
    assert orb.epsilon_lower_bound(100_000, 50, 50, 1e-5) == 0.0


def test_pure_dp_closed_form_all_correct():
    for r in (10, 100, 1000):
        closed = orb.pure_dp_closed_form(r, 0.95)
        assert orb.epsilon_lower_bound(r, r, r, 0.0) == pytest.approx(closed, abs=1e-6)


def test_max_attainable_ceiling():
    # Theorem 3.1: ceiling at delta = 1e-5 saturates near 8.2 for m >= 5e4.
    assert orb.max_attainable(1000, 1e-5) == pytest.approx(5.78, abs=0.01)
    assert orb.max_attainable(50_000, 1e-5) == pytest.approx(8.20, abs=0.01)


def test_p_value_monotone_and_pure_binomial():
    ps = [orb.p_value(1000, 500, 400, e, 1e-6) for e in np.linspace(0, 3, 13)]
    assert all(a <= b + 1e-15 for a, b in zip(ps, ps[1:], strict=False))
    q = special.expit(1.3)
    assert orb.p_value(1000, 500, 400, 1.3, 0.0) == pytest.approx(stats.binom.sf(399, 500, q))
    bounds = [orb.epsilon_lower_bound(1000, 500, v, 1e-6) for v in range(300, 501, 25)]
    assert all(a <= b for a, b in zip(bounds, bounds[1:], strict=False))


def _rr_rejection_rate(m: int, eps0: float, confidence: float) -> float:
    """Exact P[LB > eps0] when every guess is right with probability expit(eps0)."""
    q = special.expit(eps0)
    vs = np.arange(m + 1)
    over = np.array([orb.epsilon_lower_bound(m, m, int(v), 0.0, confidence) > eps0 for v in vs])
    return float(stats.binom.pmf(vs, m, q)[over].sum())


def test_monte_carlo_validity_randomized_response():
    """eps0-randomized response on m = r = 200 canaries, delta = 0: the bound is tight there,
    so the rate of bounds above eps0 must be at most 5% and match its exact value."""
    m, eps0, reps = 200, 1.0, 400
    rng = np.random.default_rng(1)
    exact = _rr_rejection_rate(m, eps0, 0.95)
    assert 0.01 < exact <= 0.05  # the test has power: the bound does reach eps0 sometimes
    s = rng.integers(0, 2, size=(reps, m))
    correct = rng.random((reps, m)) < special.expit(eps0)
    guesses_in = np.where(correct, s, 1 - s)  # RR output: the guess for each canary
    hits = 0
    for t in range(reps):
        score = guesses_in[t] + 1e-3 * rng.random(m)  # ties broken at random
        k_plus = int(guesses_in[t].sum())
        res = orb.audit_scores(
            score, s[t], 0.0, 0.95, selections=["fixed"], fixed=(k_plus, m - k_plus)
        )[0]
        assert res.r == m
        hits += res.epsilon > eps0
    rate = hits / reps
    se = np.sqrt(exact * (1 - exact) / reps)
    assert abs(rate - exact) <= 4 * se + 1e-9
    assert rate <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / reps)


def _gaussian_epsilon(mu: float, delta: float) -> float:
    """Exact epsilon(delta) of mu-GDP (Balle and Wang 2018, Thm 8), by root finding."""
    from scipy import optimize

    def gap(eps):
        return (
            stats.norm.cdf(-eps / mu + mu / 2)
            - np.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2)
            - delta
        )

    return optimize.brentq(gap, 0, 50)


def test_monte_carlo_validity_gaussian_with_selection():
    """Gaussian mechanism score_i = mu * S_i + N(0, 1): the Bonferroni and sample-split bounds
    stay below the true epsilon(delta) in at least 95% of 200 repetitions."""
    mu, m, delta, reps = 3.0, 400, 1e-5, 200
    true_eps = _gaussian_epsilon(mu, delta)
    rng = np.random.default_rng(2)
    over = {"bonferroni": 0, "sample_split": 0}
    positive = 0
    for t in range(reps):
        s = rng.integers(0, 2, size=m)
        score = mu * s + rng.normal(size=m)
        for res in orb.audit_scores(score, s, delta, 0.95, selections=list(over), split_seed=t):
            over[res.selection] += res.epsilon > true_eps
            positive += res.selection == "bonferroni" and res.epsilon > 0
    for sel, n in over.items():
        assert n / reps <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / reps), sel
    assert positive > 0.9 * reps  # the audit does detect this strong mechanism


def test_null_scores_give_zero():
    """Members and non-members with one score distribution: valid bounds are 0 in >= 95%."""
    rng = np.random.default_rng(3)
    reps, m = 200, 500
    zeros = {"bonferroni": 0, "sample_split": 0}
    for t in range(reps):
        s = rng.integers(0, 2, size=m)
        score = rng.normal(size=m)
        for res in orb.audit_scores(score, s, 1e-5, 0.95, selections=list(zeros), split_seed=t):
            zeros[res.selection] += res.epsilon == 0.0
    for sel, n in zeros.items():
        assert n / reps >= 0.95, (sel, n)


def test_selection_rules_are_labelled_and_ordered():
    rng = np.random.default_rng(4)
    s = rng.integers(0, 2, size=1000)
    score = 2.0 * s + rng.normal(size=1000)
    res = {
        r.selection: r
        for r in orb.audit_scores(
            score,
            s,
            1e-5,
            selections=["fixed", "grid_max_uncorrected", "bonferroni", "sample_split"],
            fixed=(100, 100),
        )
    }
    assert not res["grid_max_uncorrected"].valid
    assert res["bonferroni"].valid and res["sample_split"].valid and res["fixed"].valid
    assert res["bonferroni"].epsilon <= res["grid_max_uncorrected"].epsilon
    assert res["bonferroni"].level_per_test == pytest.approx(1 - 0.05 / res["bonferroni"].grid_size)
    assert res["sample_split"].m == 500
    assert res["fixed"].r == 200


def test_guess_counts():
    score = np.array([5.0, 4.0, 3.0, 2.0, 1.0])
    member = np.array([1, 0, 1, 0, 0])
    assert orb.guess_counts(score, member, 2, 2) == (4, 3)  # IN: 5,4 -> 1 right; OUT: 2,1 -> 2
    assert orb.guess_counts(score, member, 0, 5) == (5, 3)


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ((100, 10, 11, 1e-5, 0.95), "correct"),
        ((100, 200, 10, 1e-5, 0.95), "r <= m"),
        ((100, 10, 5, 1e-5, 1.0), "confidence"),
        ((100, 10, 5, 1e-5, 0.0), "confidence"),
        ((100, 10, 5, -1.0, 0.95), "delta"),
    ],
)
def test_bad_input(args, match):
    with pytest.raises(ValueError, match=match):
        orb.epsilon_lower_bound(*args)


def test_unknown_selection():
    with pytest.raises(ValueError, match="allowed"):
        orb.audit_scores(np.zeros(10), np.zeros(10), 0.0, selections=["best"])


def test_fixed_fraction_guesses_the_same_r_as_fdp_balanced():
    """fixed_fraction 0.5 on m canaries: r = m/2 guesses, the r/2 highest IN and the r/2 lowest
    OUT (Xiang et al., Fig. 6), the same guesses as fdp_one_run's balanced r_fraction 0.5."""
    from dpaudit.estimators.fdp_one_run.guesses import released_guesses
    from dpaudit.estimators.one_run.audit import run_one_run
    from dpaudit.scores import FORMAT_VERSION, ScoreFile

    rng = np.random.default_rng(5)
    m = 1002
    s = rng.integers(0, 2, size=m)
    score = 1.5 * s + rng.normal(size=m)
    meta = {
        "format_version": FORMAT_VERSION,
        "experiment": "x",
        "setting": "s",
        "seed": 0,
        "design": "one_run",
        "threat_model": "white_box_dot",
        "claimed_epsilon": 4.0,
        "delta": 1e-5,
        "accountant": "none",
    }
    sf = ScoreFile(score[None], s[None].astype(np.int8), np.arange(m)[None], meta)
    (row,) = run_one_run(sf, {"method": "one_run", "selections": ["fixed"], "fixed_fraction": 0.5})
    kp, km, wrong = released_guesses(score, s, round(0.5 * m), "balanced")
    assert (row["k_plus"], row["k_minus"]) == (kp, km) == (251, 250)
    assert row["r"] - row["correct"] == wrong
    (same,) = run_one_run(sf, {"method": "one_run", "selections": ["fixed"], "fixed": [251, 250]})
    assert same["epsilon"] == row["epsilon"]
    with pytest.raises(ValueError, match="fixed_fraction, not both"):
        run_one_run(sf, {"selections": ["fixed"], "fixed": [1, 1], "fixed_fraction": 0.5})
