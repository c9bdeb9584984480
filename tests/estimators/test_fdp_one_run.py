"""Tight one-run f-DP audit (Xiang, Wang, Xiao, Tian, Wang 2025): reference numbers, accuracy
of the order-statistic error probabilities, validity, null, the Theorem-1 counterexample, bad
input, registration and CLI.

Reference numbers: the paper prints its results only as figures; the numbers below are the ones
the text states (Section 6.4 / Fig. 10 claims) and the closed-form reference values of an
independent reimplementation, derived from the paper's formulas (not printed in the paper).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import special, stats

from dpaudit import cli
from dpaudit.accounting.gaussian import gdp_delta
from dpaudit.estimators.fdp_one_run import audit as A
from dpaudit.estimators.fdp_one_run import bound, definition, families, tails
from dpaudit.estimators.fdp_one_run import guesses as F
from dpaudit.estimators.one_run import bound as one_run
from dpaudit.estimators.registry import get
from dpaudit.mechanisms import fdp_one_run_sim as S
from dpaudit.mechanisms.fdp_pathological import Pathological
from dpaudit.scores import ScoreFile

# ------------------------------------------------------------------ reference numbers (Xiang 2025)


@pytest.mark.parametrize(
    ("mu", "delta", "eps"),
    # conversions with the paper's Algorithm 2 for mu-GDP
    [
        (0.5, 1e-5, 1.993),
        (0.8, 1e-5, 3.387),
        (1.0, 1e-5, 4.377),
        (2.0, 1e-5, 9.997),
        (1.0, 1e-7, 5.349),
    ],
)
def test_gdp_conversion_algorithm2(mu, delta, eps):
    assert families.to_epsilon("gdp", mu, delta) == pytest.approx(eps, abs=6e-4)
    assert families.from_epsilon(
        "gdp", families.to_epsilon("gdp", mu, delta), delta
    ) == pytest.approx(mu)


@pytest.mark.parametrize(("eps", "mu"), [(1, 0.268), (2, 0.502), (4, 0.925), (8, 1.666)])
def test_gdp_mu_for_epsilon(eps, mu):
    assert families.from_epsilon("gdp", eps, 1e-5) == pytest.approx(mu, abs=6e-4)


@pytest.mark.parametrize(("mu", "pmin"), [(0.5, 0.401), (0.8, 0.345), (1.0, 0.309), (2.0, 0.159)])
def test_p_min_gdp(mu, pmin):
    assert families.p_min("gdp", mu) == pytest.approx(pmin, abs=6e-4)


def test_rr_error_probability_and_laplace_conversion():
    # RR p0 = 1/(1+e^eps); Algorithm 2 for Laplace: eps = mu + 2 ln(1 - delta).
    assert tails.v_vector("approx_dp", 3.2, 10, 10, delta=0.0)[0] == pytest.approx(0.0392, abs=5e-5)
    assert tails.v_vector("approx_dp", 1.0, 10, 10, delta=0.0)[0] == pytest.approx(0.269, abs=5e-4)
    assert families.to_epsilon("laplace", 2.0, 0.0) == 2.0
    assert families.to_epsilon("laplace", 2.0, 0.1) == pytest.approx(2 + 2 * math.log(0.9))


@pytest.mark.parametrize(
    ("family", "theta", "kw"),
    [
        ("gdp", 0.5, {}),
        ("gdp", 1.0, {}),
        ("gdp", 2.0, {}),
        ("laplace", 1.0, {}),
        ("laplace", 2.0, {}),
        ("subsampled_gaussian", 1.0, {"q": 0.5}),
        ("approx_dp", 1.0, {"delta": 0.1}),
    ],
)
def test_sum_v_all_released_equals_n_p_min(family, theta, kw):
    # With r = n, sum_j v_j = n p_min (Lemma 2, Eq. 14); Laplace
    # p_min = e^{-mu/2}/2; subsampled Gaussian p_min = (1 - q TV(N(0,1), N(mu,1)))/2.
    n = 2000
    v = tails.v_vector(family, theta, n, n, **kw)
    assert np.all(np.diff(v) >= -1e-15)  # more confident guesses err less
    assert v.sum() / n == pytest.approx(families.p_min(family, theta, **kw), rel=5e-5)
    if family != "approx_dp":  # rounded down: never above the exact value
        assert v.sum() / n <= families.p_min(family, theta, **kw)


@pytest.mark.parametrize(
    ("delta", "wrong", "p_ref"),
    # independent reimplementation: Fig. 10 analogue (RR eps = 1, n = r = 100), Chernoff p-values
    [
        (0.01, 0, 3.5e-14),
        (0.01, 10, 1.8e-4),
        (0.01, 14, 9.5e-3),
        (0.01, 16, 4.0e-2),
        (0.1, 10, 1.2e-3),
        (0.1, 14, 3.8e-2),
    ],
)
def test_fig10_p_values(delta, wrong, p_ref):
    p = tails.p_value(100, 100, wrong, "approx_dp", 1.0, delta=delta)
    assert p == pytest.approx(p_ref, rel=0.05)


def test_p_value_log_is_the_log_of_the_p_value():
    """One p-value function: ``log=True`` returns ln p, for both tails, also where p underflows
    to 0 (the log stays finite, which the log-space callers rely on)."""
    for tail in ("chernoff", "exact"):
        for wrong in (0, 10, 30):
            p = tails.p_value(100, 100, wrong, "approx_dp", 1.0, delta=0.01, tail=tail)
            lp = tails.p_value(100, 100, wrong, "approx_dp", 1.0, delta=0.01, tail=tail, log=True)
            assert lp <= 0.0
            assert math.exp(lp) == p
    tiny = tails.p_value(10_000, 10_000, 0, "gdp", 1.0, log=True)
    assert np.isfinite(tiny) and tiny < -800
    assert tails.p_value(10_000, 10_000, 0, "gdp", 1.0) == 0.0


def test_fig10_expected_errors_and_exact_tail():
    # reimplemented: expected errors under the null 26.6 (delta 0.01), 24.2 (delta 0.1);
    # exact Poisson-binomial at 10 wrong: 3.4e-5.
    assert tails.v_vector("approx_dp", 1.0, 100, 100, delta=0.01).sum() == pytest.approx(
        26.6, abs=0.05
    )
    assert tails.v_vector("approx_dp", 1.0, 100, 100, delta=0.1).sum() == pytest.approx(
        24.2, abs=0.05
    )
    p = tails.p_value(100, 100, 10, "approx_dp", 1.0, delta=0.01, tail="exact")
    assert p == pytest.approx(3.4e-5, rel=0.05)


def test_fig10_claims_against_steinke():
    # Section 6.4: "when the number of wrong guesses is 10, our method will reject the null
    # hypothesis while Steinke et al.'s [27] method will not" (delta = 0.01), and at
    # delta = 0.1 [27] "can not reject the null hypothesis at any number of wrong guesses".
    assert tails.p_value(100, 100, 10, "approx_dp", 1.0, delta=0.01) < 0.05
    assert one_run.p_value(100, 100, 90, 1.0, 0.01) > 0.05
    assert one_run.p_value(100, 100, 100, 1.0, 0.1) > 0.05  # 0 wrong: best case
    assert tails.p_value(100, 100, 14, "approx_dp", 1.0, delta=0.1) < 0.05


def test_fig7_claim_steinke_trivial_at_large_delta():
    # Section 6.2 / Fig. 7: at delta = 1e-2, [27] gives no meaningful result for n > 10^2
    # (r = n/5), even with every guess right; ours rejects eps' well above 0.
    assert one_run.epsilon_lower_bound(1000, 200, 200, 0.01) == 0.0
    ours = bound.epsilon_lower_bound(1000, 200, 8, "approx_dp", delta=0.01)  # 4% wrong ~ eps 3.2
    assert ours.epsilon > 2.0


@pytest.mark.parametrize(
    ("wrong", "mu_ref", "eps_ref"),
    # independent reimplementation, single audit: mu = 1, n = 1e4, r = 2000
    [(262, 0.926, 4.00), (230, 0.992, 4.33)],
)
def test_single_audit_reference(wrong, mu_ref, eps_ref):
    b = bound.epsilon_lower_bound(10_000, 2000, wrong, "gdp", 1e-5)
    assert b.param == pytest.approx(mu_ref, abs=1e-3)
    assert b.epsilon == pytest.approx(eps_ref, abs=0.01)
    assert b.p_value <= 0.05
    # the conservative end: a slightly larger mu is no longer rejected
    assert tails.p_value(10_000, 2000, wrong, "gdp", b.param + 1e-5) > 0.05


def test_expected_errors_single_audit():
    # independent reimplementation: u = 262 is the expected count at mu = 1, n = 1e4, r = 2000.
    v = tails.v_vector("gdp", 1.0, 10_000, 2000)
    assert v.sum() == pytest.approx(262, abs=0.5)


# ------------------------------------------------------------------ numerical accuracy


@pytest.mark.parametrize("family", ["gdp", "subsampled_gaussian"])
@pytest.mark.parametrize("n", [100, 10_000])
@pytest.mark.parametrize("mu", [0.3, 1.0, 2.0])
def test_v_quadrature_is_accurate_and_rounded_down(family, n, mu):
    """The fast v_j (cached Beta nodes, 8-node panels, rounded down) against the definition of
    Eq. (25) on a converged rule (80 panels x 20 nodes, refined at both ends)."""
    q = 0.5 if family == "subsampled_gaussian" else None
    for j in sorted({1, 2, 10, n // 5, n}):
        ref = definition.v_vector(family, mu, n, [j], q=q)[0]
        v = tails.v_vector(family, mu, n, j, q=q)[-1]
        assert v <= ref  # conservative
        assert v == pytest.approx(ref, rel=5e-5)


@pytest.mark.parametrize("n", [100, 2000])
@pytest.mark.parametrize("theta", [0.3, 2.0])
def test_approx_dp_v_is_the_definition(n, theta):
    """f_{eps,delta}: the fast v_j (a Binomial cdf) is P[U_(j) > delta] / (1 + e^eps) of
    Eq. (25), with no rounding."""
    v = tails.v_vector("approx_dp", theta, n, n, delta=1e-3)
    ref = definition.v_vector("approx_dp", theta, n, np.arange(1, n + 1), delta=1e-3)
    np.testing.assert_allclose(v, ref, rtol=1e-12, atol=0)


@pytest.mark.parametrize(
    ("family", "n", "kw"),
    [
        ("gdp", 100, {}),
        ("gdp", 2000, {}),
        pytest.param("subsampled_gaussian", 100, {"q": 0.5}, marks=pytest.mark.slow),
        ("approx_dp", 100, {"delta": 1e-3}),
        ("approx_dp", 2000, {"delta": 1e-3}),
    ],
)
def test_tails_equal_the_definition(family, n, kw):
    """The fast tails against the definitions: the exact tail (fixed panels, m rounded down)
    is at least the definition of Eq. (19) (a larger p-value, still valid) and within 1e-3 of
    it on the log scale (relative where |log p| > 1); Eq. (26) equals the plain minimisation
    over lambda."""
    for theta in (0.3, 2.0):
        for r, u in ((50, 5), (min(n, 300), 30), (n, n // 10)):
            got = tails.exact_log_cdf(family, theta, n, r, u, **kw)
            want = definition.exact_log_cdf(family, theta, n, r, u, **kw)
            assert got >= want - 1e-12
            assert got - want <= 1e-3 * max(1.0, abs(want))
            v = tails.v_vector(family, theta, n, r, **kw)
            c = tails.chernoff_log_p(v, u)
            assert c == pytest.approx(definition.chernoff_log_p(v, u), rel=1e-9, abs=1e-9)


@pytest.mark.parametrize(
    ("args", "kw"),
    [
        ((200, 100, 10, "approx_dp"), {"delta": 1e-3}),
        ((200, 100, 10, "approx_dp"), {"delta": 1e-3, "tail": "exact"}),
        ((1000, 200, 5, "approx_dp"), {"delta": 1e-4}),
        ((500, 500, 60, "approx_dp"), {"delta": 0.0}),
        pytest.param((100, 50, 5, "gdp"), {"tail": "exact"}, marks=pytest.mark.slow),
    ],
)
def test_bound_equals_the_definition(args, kw):
    """The fast bound (Brent on a smooth statistic, then the conservative end) against the
    definition of Section 5.4 (bisection on the rejection, to 1e-5): never above it beyond
    that tolerance (the fast p-values are the larger), and within 2e-4 (relative) of it."""
    got, _ = bound.param_lower_bound(*args, **kw)
    want = definition.param_lower_bound(*args, **kw, tol=1e-5)
    assert got <= want + 1e-5
    assert got == pytest.approx(want, rel=2e-4, abs=1e-5)


def test_v_rank_interpolation(monkeypatch):
    n, r = 10_000, 3000
    approx = tails.v_vector("gdp", 1.0, n, r)
    monkeypatch.setattr(tails, "J_EXACT", 10**6)
    tails.clear_caches()
    full = tails.v_vector("gdp", 1.0, n, r)
    tails.clear_caches()
    assert np.max(np.abs(approx - full) / full) < 1e-5


def test_chernoff_matches_binomial_kl_and_bounds_exact_tail():
    # Constant v: Eq. (26) minimised is exp(-r KL(u/r || p)); the exact Poisson-binomial tail
    # is the binomial cdf; Chernoff >= exact.
    r, p = 200, 0.3
    v = np.full(r, p)
    for u in (0, 10, 40, 59):
        a = u / r
        kl = (a * math.log(a / p) if a else 0.0) + (1 - a) * math.log((1 - a) / (1 - p))
        assert tails.chernoff_log_p(v, u) == pytest.approx(-r * kl, rel=1e-9, abs=1e-12)
        exact = tails.poisson_binomial_log_cdf(v, u)
        assert exact == pytest.approx(stats.binom.logcdf(u, r, p), rel=1e-9)
        assert exact <= tails.chernoff_log_p(v, u)
    assert tails.chernoff_log_p(v, 60) == 0.0  # u >= sum v
    # the search statistic: signed root of the (two-sided) Chernoff exponent
    for u in (10, 59, 61, 100, 200):
        a = u / r
        kl = a * math.log(a / p) + ((1 - a) * math.log((1 - a) / (1 - p)) if a < 1 else 0.0)
        z = tails.chernoff_signed_root(v, u)
        assert z == pytest.approx(math.copysign(math.sqrt(2 * r * kl), 60 - u), rel=1e-8)
        if u < 60:
            assert math.exp(tails.chernoff_log_p(v, u)) == pytest.approx(math.exp(-z * z / 2))


def test_p_value_monotone_in_errors_and_parameter():
    ps_u = [tails.p_value(2000, 400, u, "gdp", 1.0) for u in range(0, 120, 10)]
    assert all(a <= b for a, b in zip(ps_u, ps_u[1:], strict=False))
    ps_mu = [tails.p_value(2000, 400, 40, "gdp", m) for m in np.linspace(0, 3, 13)]
    assert all(a <= b for a, b in zip(ps_mu, ps_mu[1:], strict=False))
    bounds = [bound.epsilon_lower_bound(2000, 400, u, "laplace", 1e-5).epsilon for u in (5, 20, 60)]
    assert bounds[0] > bounds[1] > bounds[2]


def test_sgm_profile_reduces_to_gdp_at_q1():
    for eps in (0.5, 2.0, 4.0):
        assert families.sgm_delta(eps, 1.0, 1.0) == pytest.approx(gdp_delta(eps, 1.0), rel=1e-9)
    # subsampling makes it more private at the same mu
    assert families.to_epsilon("subsampled_gaussian", 1.0, 1e-5, 0.5) < families.to_epsilon(
        "gdp", 1.0, 1e-5
    )


# ------------------------------------------------------------------ validity and null (MC)


def _exceed_rate(draw, n, r, family, true_param, reps, seed, **kw):
    """Fraction of repetitions whose parameter bound exceeds the true one (bounds cached per
    error count: for fixed n, r the bound depends on the data only through it)."""
    rng = np.random.default_rng(seed)
    us = []
    for _ in range(reps):
        score, member = draw(rng)
        us.append(F.released_guesses(score, member, r)[2])
    cache = {
        u: bound.param_lower_bound(n, r, u, family, 0.95, kw.get("delta"), kw.get("q"))[0]
        for u in set(us)
    }
    bounds = np.array([cache[u] for u in us])
    return float(np.mean(bounds > true_param + 1e-9)), bounds


@pytest.mark.slow
def test_validity_gaussian_mechanism():
    # mu = 1 GDP Gaussian mechanism, general case (balanced guesses), n = 1000, r = n/5.
    # A valid 95% bound exceeds the truth in at most 5% (+ 2.5 sd MC slack) of repetitions.
    reps = 300
    rate, bounds = _exceed_rate(
        lambda g: S.gaussian(1000, 1.0, g), 1000, 200, "gdp", 1.0, reps, seed=11
    )
    assert rate <= 0.05 + 2.5 * math.sqrt(0.05 * 0.95 / reps)
    # ... and is informative (reimplemented, general case): n = 1e3, mu = 1: eps ~ 3.41
    eps = np.array([families.to_epsilon("gdp", b, 1e-5) for b in bounds])
    assert 3.0 < eps.mean() < 3.8


def test_validity_randomized_response_pure_and_with_delta():
    reps = 300
    slack = 0.05 + 2.5 * math.sqrt(0.05 * 0.95 / reps)
    # pure eps = 2 randomized response, all n = 200 guesses released
    rate, _ = _exceed_rate(
        lambda g: S.randomized_response(200, 2.0, 0.0, g),
        200,
        200,
        "approx_dp",
        2.0,
        reps,
        seed=12,
        delta=0.0,
    )
    assert rate <= slack
    # the paper's 4-output RR at (eps, delta) = (3.2, 0.01), r = n/5 (Fig. 7 setting)
    rate, bounds = _exceed_rate(
        lambda g: S.randomized_response(1000, 3.2, 0.01, g),
        1000,
        200,
        "approx_dp",
        3.2,
        reps,
        seed=13,
        delta=0.01,
    )
    assert rate <= slack
    assert bounds.mean() > 1.5  # independent reimplementation (n = 1e3): 2.50


def test_null_bound_is_zero():
    # Scores independent of membership: bound 0 in >= 95% of repetitions, fixed r and with the
    # Bonferroni-corrected grid of r.
    rng = np.random.default_rng(14)
    zero_fixed, zero_bonf, reps = 0, 0, 200
    for _ in range(reps):
        score, member = rng.standard_normal(500), (rng.random(500) < 0.5).astype(int)
        rows = A.audit_scores(
            score,
            member,
            "gdp",
            1e-5,
            0.95,
            selections=("fixed", "bonferroni"),
            r_fixed=100,
            r_grid=[10, 50, 100, 200, 500],
        )
        zero_fixed += rows[0]["epsilon"] == 0.0
        zero_bonf += rows[1]["epsilon"] == 0.0
    assert zero_fixed >= 0.95 * reps
    assert zero_bonf >= 0.95 * reps


# ------------------------------------------------------------------ Theorem 1 counterexample


def test_pathological_mechanism_lives_with_the_mechanisms():
    # benchmark-only mechanism: not part of the estimator module (dependencies point one way)
    assert not hasattr(F, "Pathological")
    assert Pathological.__module__ == "dpaudit.mechanisms.fdp_pathological"


def test_pathological_mechanism_is_eps_delta_dp_per_bit():
    for mech in (
        Pathological(100, 100, 1.0, 0.1, 0.1),
        Pathological(10_000, 2000, 3.2, 0.01, 0.1),
    ):
        assert mech.hockey_stick() == pytest.approx(mech.delta, rel=1e-9)


def test_theorem1_counterexample_false_rejection_rate():
    # Our counterexample: (1, 0.1)-DP, m = r = 100, beta = 0.1: the paper's test rejects the
    # TRUE null with probability ~0.102 > 0.05; Steinke et al.'s never does.
    mech = Pathological(100, 100, 1.0, 0.1, 0.1)
    exact = F.pathological_rejection_rate(mech)
    assert exact > 0.05
    assert exact == pytest.approx(0.102, abs=0.005)
    # Monte Carlo of the mechanism agrees with the exact rate
    reps = 4000
    u = mech.sample_wrong(np.random.default_rng(15), reps)
    rej = F.rejection_table(100, 100, 1.0, 0.1)
    mc = float(np.mean(rej[u]))
    assert mc == pytest.approx(exact, abs=4 * math.sqrt(exact * (1 - exact) / reps))
    steinke_rejects = [one_run.p_value(100, 100, 100 - k, 1.0, 0.1) <= 0.05 for k in range(101)]
    assert float(np.sum(mech.wrong_pmf()[np.array(steinke_rejects)])) <= 0.05


def test_theorem1_counterexample_fig7_setting():
    # Our counterexample: eps = 3.2, delta = 0.01, n = 1e4, r = 2000, beta = 0.1: rejection
    # probability 0.117 (4000 simulated trials) and eps_l ~ 3.49 when X = 1; beta = 0.05 gives
    # eps_l ~ 6.45 when X = 1 (every released guess right). Our exact rate is 0.101 with the
    # paper's Chernoff p-value and 0.115 with the exact Poisson-binomial tail.
    mech = Pathological(10_000, 2000, 3.2, 0.01, 0.1)
    chernoff = F.pathological_rejection_rate(mech)
    exact = F.pathological_rejection_rate(mech, tail="exact")
    assert 0.05 < chernoff < exact
    assert exact == pytest.approx(0.117, abs=0.005)
    typical_x1 = round(mech.r * (1 - mech.accuracy[1]))  # 39 wrong
    eps_x1 = bound.epsilon_lower_bound(10_000, 2000, typical_x1, "approx_dp", 0.01).epsilon
    assert eps_x1 == pytest.approx(3.49, abs=0.01)
    assert Pathological(10_000, 2000, 3.2, 0.01, 0.05).accuracy[1] == 1.0
    assert bound.epsilon_lower_bound(10_000, 2000, 0, "approx_dp", 0.01).epsilon == pytest.approx(
        6.45, abs=0.01
    )


@pytest.mark.slow
def test_theorem1_counterexample_negligible_at_small_delta():
    # Our counterexample: at delta = 1e-5 (m = 1e5, r = 2e4, eps = 2) the rate is ~0.007 < 0.05.
    rate = F.pathological_rejection_rate(Pathological(100_000, 20_000, 2.0, 1e-5, 0.1))
    assert rate == pytest.approx(0.007, abs=0.001)


# ------------------------------------------------------------------ bad input


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ((100, 101, 0), "r <= n"),
        ((100, 10, 11), "wrong <= r"),
        ((100, 0, 0), "r <= n"),
        ((100, 10, -1), "wrong <= r"),
        ((0, 1, 0), "n >= 1"),
    ],
)
def test_bad_counts(args, match):
    with pytest.raises(ValueError, match=match):
        bound.epsilon_lower_bound(*args, family="gdp")


@pytest.mark.parametrize("conf", [0.0, 1.0, 1.5, -0.1])
def test_bad_confidence(conf):
    with pytest.raises(ValueError, match="confidence"):
        bound.epsilon_lower_bound(100, 10, 1, "gdp", confidence=conf)


def test_bad_family_and_family_args():
    with pytest.raises(ValueError, match="unknown null family 'rdp'"):
        bound.epsilon_lower_bound(100, 10, 1, "rdp")
    with pytest.raises(ValueError, match="needs q"):
        bound.epsilon_lower_bound(100, 10, 1, "subsampled_gaussian")
    with pytest.raises(ValueError, match="delta in"):
        bound.epsilon_lower_bound(100, 10, 1, "approx_dp", delta=1.0)
    with pytest.raises(ValueError, match="unknown tail"):
        tails.p_value(100, 10, 1, "gdp", 1.0, tail="hoeffding")
    with pytest.raises(TypeError, match="integer"):
        bound.epsilon_lower_bound(100, 10.5, 1, "gdp")


def test_cli_json_and_errors(capsys):
    assert (
        cli.main(
            [
                "fdp-one-run-bound",
                "--n",
                "10000",
                "--r",
                "2000",
                "--wrong",
                "262",
                "--family",
                "gdp",
                "--json",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["epsilon"] == pytest.approx(4.00, abs=0.01)
    assert out["mu"] == pytest.approx(0.926, abs=1e-3)
    assert (
        cli.main(
            [
                "fdp-one-run-bound",
                "--n",
                "100",
                "--r",
                "100",
                "--wrong",
                "10",
                "--family",
                "approx-dp",
                "--delta",
                "0.01",
                "--json",
            ]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out)["epsilon"] > 0
    assert (
        cli.main(
            ["fdp-one-run-bound", "--n", "100", "--r", "200", "--wrong", "1", "--family", "gdp"]
        )
        == 2
    )
    assert "r <= n" in capsys.readouterr().err
    assert (
        cli.main(
            [
                "fdp-one-run-bound",
                "--n",
                "100",
                "--r",
                "10",
                "--wrong",
                "1",
                "--family",
                "gdp",
                "--confidence",
                "1.2",
            ]
        )
        == 2
    )
    assert "confidence" in capsys.readouterr().err


# ------------------------------------------------------------------ registration


def _score_file(n=400, mu=2.0, trials=1, seed=0, claimed=8.0):
    rng = np.random.default_rng(seed)
    scores, members = zip(*(S.gaussian(n, mu, rng) for _ in range(trials)), strict=True)
    meta = {
        "experiment": "t",
        "setting": "s",
        "seed": seed,
        "design": "one_run",
        "threat_model": "simulation",
        "claimed_epsilon": claimed,
        "delta": 1e-5,
        "accountant": "gdp",
    }
    return ScoreFile(np.array(scores), np.array(members), np.tile(np.arange(n), (trials, 1)), meta)


@pytest.mark.slow
def test_registered_runner_rows():
    method = get("fdp_one_run")
    assert method.designs == ("one_run",)
    sf = _score_file(trials=2)
    rows = method.run(
        sf,
        {
            "family": "gdp",
            "r": 80,
            "r_grid": [20, 80, 200, 400],
            "selections": ["fixed", "grid_max_uncorrected", "bonferroni", "sample_split"],
        },
    )
    assert len(rows) == 8
    for row in rows:
        for key in (
            "epsilon",
            "valid",
            "r",
            "wrong",
            "n",
            "p_value",
            "family",
            "selection",
            "confidence",
            "mu",
            "trial",
        ):
            assert key in row
    by_sel = {row["selection"]: row for row in rows if row["trial"] == 0}
    assert by_sel["grid_max_uncorrected"]["valid"] is False
    assert by_sel["bonferroni"]["valid"] and by_sel["fixed"]["valid"]
    assert by_sel["sample_split"]["valid"] and by_sel["sample_split"]["n"] == 200
    assert by_sel["fixed"]["r"] == 80
    assert by_sel["grid_max_uncorrected"]["epsilon"] >= by_sel["bonferroni"]["epsilon"]
    assert by_sel["bonferroni"]["level_per_test"] == pytest.approx(1 - 0.05 / 4)
    # mu = 2 GDP: eps(delta=1e-5) = 9.997 is the truth; claimed 8 is refuted (p small) or not
    assert 0 <= by_sel["fixed"]["p_value"] <= 1
    b = bound.epsilon_lower_bound(400, 80, by_sel["fixed"]["wrong"], "gdp", 1e-5)
    assert by_sel["fixed"]["epsilon"] == pytest.approx(b.epsilon)


def test_registered_runner_null_params_mean_defaults():
    sf = _score_file()
    rows = get("fdp_one_run").run(
        sf,
        {
            "family": None,
            "delta": None,
            "q": None,
            "r": None,
            "r_fraction": 0.25,
            "r_grid": None,
            "selections": ["fixed"],
            "tail": None,
            "guess": None,
        },
    )
    assert rows[0]["r"] == 100 and rows[0]["family"] == "gdp" and rows[0]["delta_used"] == 1e-5


def test_registered_runner_bad_params():
    method = get("fdp_one_run")
    sf = _score_file()
    with pytest.raises(ValueError, match="unknown null family"):
        method.run(sf, {"family": "renyi"})
    with pytest.raises(ValueError, match="unknown parameter"):
        method.run(sf, {"familly": "gdp"})
    with pytest.raises(ValueError, match="needs params r"):
        method.run(sf, {"selections": ["fixed"]})
    with pytest.raises(ValueError, match="unknown selection"):
        method.run(sf, {"selections": ["best"], "r": 10})


def test_guess_rules():
    score = np.array([3.0, 2.0, 1.0, -1.0, -2.0, -3.0])
    member = np.array([1, 0, 1, 0, 0, 1])
    assert F.released_guesses(score, member, 4, "balanced") == (2, 2, 2)
    assert F.released_guesses(score, member, 2, "top_in") == (2, 0, 1)
    kp, km, wrong = F.released_guesses(score, member, 2, "centered")
    assert (kp, km, wrong) == (1, 1, 1)
    with pytest.raises(ValueError, match="unknown guess rule"):
        F.released_guesses(score, member, 2, "random")


def test_through_audit_table():
    from dpaudit.audit import run_estimator

    sf = _score_file(n=1000, mu=1.0, claimed=4.377)
    df = run_estimator(
        sf, "fdp", {"method": "fdp_one_run", "r_fraction": 0.2, "selections": ["fixed"]}
    )
    assert len(df) == 1
    row = df.iloc[0]
    assert row["method"] == "fdp_one_run" and row["delta"] == 1e-5 and row["r"] == 200
    assert 0 < row["epsilon"] < 4.377 + 1e-9
    # the true claim (mu = 1 GDP) is not refuted
    assert row["p_value"] > 0.05


# ------------------------------------------------------------ the exact tail (issue 9, item 11)


def _gdp_wrong_counts(n: int, r: int, mu: float, reps: int, seed: int) -> np.ndarray:
    """Wrong counts among the r most confident guesses of the mu-GDP Gaussian mechanism, simulated
    directly: fair-coin bits b, y = mu b + N(0, 1), confidence |y - mu/2|, guess by the side of
    mu/2. This is the dominating audit of Theorem 1 for mu-GDP (its channels are the base pair
    of Def. 5, with the MAP decoder), so a valid p-value must hold here with least slack."""
    rng = np.random.default_rng(seed)
    out = np.empty(reps, dtype=np.int64)
    for start in range(0, reps, 2000):
        k = min(2000, reps - start)
        b = rng.random((k, n)) < 0.5
        y = rng.standard_normal((k, n)) + mu * b
        top = np.argpartition(-np.abs(y - mu / 2), r - 1, axis=1)[:, :r]
        guess = np.take_along_axis(y, top, 1) > mu / 2
        out[start : start + k] = (guess != np.take_along_axis(b, top, 1)).sum(1)
    return out


def test_exact_tail_is_the_binomial_at_r_equals_n():
    # With every guess released the wrong count is exactly Binomial(n, p_min). Before the fix
    # the exact tail stopped at mu = 1.848 for n = r = 1000, 159 wrong: p = 0.050 there, but the
    # binomial tail is 0.064 (it rejected too often and its bound was too high).
    mu_old = 1.8479986633467305
    p = tails.p_value(1000, 1000, 159, "gdp", mu_old, tail="exact")
    ref = stats.binom.cdf(159, 1000, special.ndtr(-mu_old / 2))
    assert ref == pytest.approx(0.0641, abs=1e-4)
    assert p == pytest.approx(ref, rel=1e-9)
    mu_l, p_l = bound.param_lower_bound(1000, 1000, 159, "gdp", 0.95, tail="exact")
    assert stats.binom.cdf(159, 1000, special.ndtr(-mu_l / 2)) <= 0.05 * (1 + 1e-9)
    assert p_l <= 0.05 and mu_l < mu_old - 0.01
    # the Poisson binomial of Eq. (24) taken literally is narrower: too small a p-value
    v = tails.v_vector("gdp", mu_old, 1000, 1000)
    assert math.exp(tails.poisson_binomial_log_cdf(v, 159)) < 0.051
    for family, theta, kw in [
        ("laplace", 1.5, {}),
        ("approx_dp", 1.0, {"delta": 0.01}),
        ("subsampled_gaussian", 2.0, {"q": 0.5}),
    ]:
        pm = families.p_min(family, theta, kw.get("delta"), kw.get("q"))
        for u in (5, 20, 30):
            got = tails.p_value(100, 100, u, family, theta, tail="exact", log=True, **kw)
            assert got == pytest.approx(stats.binom.logcdf(u, 100, pm), rel=1e-9)


def test_chernoff_tail_conservative_against_binomial_at_r_equals_n():
    # The default tail against the true law, Binomial(n, p_min), at r = n: never below it.
    # The printed Eq. (26) alone (Chernoff on the Bernoulli(v_k) of Eq. 24) is below it when
    # few errors are expected (a finding, docs/estimators/fdp_one_run.md): at n = 50, mu = 3,
    # no wrong guess has probability 0.031 and Eq. (26) says 0.021; at n = 50, mu = 3.25 the
    # printed test rejects the true null at 95% on 0 errors, which happen with probability
    # 0.069. The default takes the larger of Eq. (26) and the exact tail.
    for n in (50, 200, 1000):
        for mu in (0.5, 1.0, 2.0, 3.0):
            pm = special.ndtr(-mu / 2)
            for u in np.unique(np.linspace(0, n * pm + 1, 12).astype(int)):
                b = stats.binom.logcdf(int(u), n, pm)
                assert tails.p_value(n, n, int(u), "gdp", mu, log=True) >= b - 1e-12
    v3 = tails.v_vector("gdp", 3.0, 50, 50)
    assert math.exp(tails.chernoff_log_p(v3, 0)) == pytest.approx(0.021, abs=0.001)
    assert stats.binom.cdf(0, 50, special.ndtr(-1.5)) == pytest.approx(0.031, abs=0.001)
    mu = 3.25
    assert math.exp(tails.chernoff_log_p(tails.v_vector("gdp", mu, 50, 50), 0)) < 0.05
    assert stats.binom.cdf(0, 50, special.ndtr(-mu / 2)) > 0.065
    assert bound.param_lower_bound(50, 50, 0, "gdp", 0.95)[0] < mu


def test_exact_tail_matches_the_simulated_law_with_abstention():
    # n = 400, r = 100: the law of the wrong count conditions on the selection threshold
    # (Binomial(r, m(T)) mixed over T ~ Beta(r+1, n-r)); the simulated counts must agree with it
    # at every u in the body of the law (4 sd), and their mean with sum_j v_j (Eq. 25).
    n, r, mu, reps = 400, 100, 1.0, 12_000
    w = _gdp_wrong_counts(n, r, mu, reps, seed=91)
    v = tails.v_vector("gdp", mu, n, r)
    assert w.mean() == pytest.approx(v.sum(), abs=4 * w.std() / math.sqrt(reps))
    for u in range(3, 20):
        p = tails.p_value(n, r, u, "gdp", mu, tail="exact")
        assert np.mean(w <= u) == pytest.approx(p, abs=4 * math.sqrt(p * (1 - p) / reps) + 1e-4)


@pytest.mark.slow
def test_exact_tail_valid_with_abstention_monte_carlo():
    # mu = 1.5 GDP, n = 600, r = 300 (half abstain). A valid p-value satisfies
    # P[W <= u] <= p(u) for every u, i.e. at every level. Checked for both tails on the
    # simulated counts (3 sd), then for the bound itself at 95%; the same check fails for two
    # anti-conservative variants (it can fail): the Poisson binomial of Eq. (24) and the exact
    # tail of a slightly more private null (mu * 0.95).
    n, r, mu, reps = 600, 300, 1.5, 24_000
    w = _gdp_wrong_counts(n, r, mu, reps, seed=92)
    freq = {u: float(np.mean(w <= u)) for u in range(0, 60)}
    v = tails.v_vector("gdp", mu, n, r)

    def worst_excess(log_p) -> float:
        """max over u with p(u) in [0.005, 0.3] of (frequency - p(u)) / sd."""
        out = -math.inf
        for u, f in freq.items():
            p = math.exp(log_p(u))
            if 0.005 <= p <= 0.3:
                out = max(out, (f - p) / math.sqrt(p * (1 - p) / reps))
        return out

    assert worst_excess(lambda u: tails.exact_log_cdf("gdp", mu, n, r, u)) <= 3
    assert worst_excess(lambda u: tails.p_value(n, r, u, "gdp", mu, log=True)) <= 3
    assert worst_excess(lambda u: tails.poisson_binomial_log_cdf(v, u)) > 3
    assert worst_excess(lambda u: tails.exact_log_cdf("gdp", 0.95 * mu, n, r, u)) > 3
    # the 95% bound exceeds the true mu in at most 5% (+ 3 sd) of the runs; the bound is
    # nonincreasing in u, so it exceeds mu exactly for u <= u_cut
    log_alpha = math.log(0.05)
    u_cut = max(u for u in freq if tails.exact_log_cdf("gdp", mu, n, r, u) <= log_alpha)
    for tail in tails.TAILS:
        above = bound.param_lower_bound(n, r, u_cut + 1, "gdp", 0.95, tail=tail)[0]
        assert above <= mu
    assert bound.param_lower_bound(n, r, u_cut, "gdp", 0.95, tail="exact")[0] > mu
    rate = freq[u_cut]
    assert rate <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / reps)


@pytest.mark.parametrize(
    ("family", "theta", "q"),
    [
        ("gdp", 0.1, None),
        ("gdp", 1.0, None),
        ("gdp", 4.0, None),
        ("laplace", 2.0, None),
        ("subsampled_gaussian", 2.0, 0.5),
        ("subsampled_gaussian", 3.0, 1.0),
    ],
)
def test_threshold_error_rate_quadrature(family, theta, q):
    # m(t) = mean of h over [0, t] against adaptive quadrature: relative error <= 1e-5,
    # covered by the rounding M_ROUND_DOWN; m(1) = p_min (Eq. 14).
    from scipy import integrate

    kink = families.laplace_kink(theta) if family == "laplace" else None
    if family == "subsampled_gaussian":
        kink = families.sgm_kink(theta, q)
    for t in (1e-6, 0.05, 0.7, 0.9999):

        def h(x: float) -> float:
            return float(families.error_quantile(family, theta, np.array([x]), q)[0])

        pts = [kink] if kink is not None and kink < t else None
        ref = integrate.quad(h, 0, t, points=pts, limit=200, epsabs=0, epsrel=1e-10)[0] / t
        got = tails.threshold_error_rate(family, theta, np.array([t]), q=q)[0]
        assert abs(got / ref - 1) <= 1e-5 < tails.M_ROUND_DOWN
    got1 = tails.threshold_error_rate(family, theta, np.array([1.0]), q=q)[0]
    assert got1 == pytest.approx(families.p_min(family, theta, q=q), rel=1e-5)


def test_sgm_quantile_at_q1_is_gdp():
    # q = 1: the subsampled Gaussian pair is the GDP pair; its |L| has both branches for every
    # s (the lower one was dropped before, which halved the survival and put h = 1/2 above
    # the median).
    t = np.array([1e-9, 0.1, 0.5, 0.7, 0.9, 0.99, 0.9999])
    for mu in (0.3, 2.0, 6.0):
        sgm = families.error_quantile("subsampled_gaussian", mu, t, 1.0)
        assert sgm == pytest.approx(families.error_quantile("gdp", mu, t), rel=1e-9)
    v_sgm = tails.v_vector("subsampled_gaussian", 2.0, 100, 100, q=1.0).sum()
    assert v_sgm == pytest.approx(tails.v_vector("gdp", 2.0, 100, 100).sum(), rel=1e-6)


@pytest.mark.slow
def test_exact_tail_no_nan_on_large_r():
    # Before the fix a log-probability rounded just above 0 reached ndtri_exp (NaN, "function
    # value ... is NaN") on 10 of 40 random large-r inputs. A seeded grid of such inputs, and
    # the issue's example, must all give a finite bound and a p-value in [0, 1].
    rng = np.random.default_rng(0)
    cases = [(100_000, 25_000, 7545)]
    for _ in range(40):
        n = int(rng.choice([20_000, 50_000, 100_000, 200_000]))
        r = int(rng.integers(n // 10, n // 2))
        cases.append((n, r, int(rng.integers(int(0.05 * r), int(0.35 * r)))))
    for n, r, wrong in cases:
        b = bound.epsilon_lower_bound(n, r, wrong, "gdp", tail="exact")
        assert math.isfinite(b.epsilon) and b.param >= 0 and 0.0 <= b.p_value <= 1.0
    assert bound._normal_score(1e-17) == bound._normal_score(0.0) < 0
    assert tails.poisson_binomial_log_cdf(np.full(50, 1e-18), 3) <= 0.0


def test_cli_exact_tail_issue_example(capsys):
    # the issue's command line: a finite bound at 95%, the exact tail at the bound <= 0.05
    argv = "fdp-one-run-bound --n 100000 --r 25000 --wrong 7545 --family gdp --tail exact"
    assert cli.main([*argv.split(), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["tail"] == "exact" and math.isfinite(out["epsilon"]) and out["p_value"] <= 0.05
    assert tails.p_value(100_000, 25_000, 7545, "gdp", out["mu"], tail="exact") <= 0.05


def test_subsampled_gaussian_few_guesses_below_the_kink():
    # n = 300, r = 9, one wrong at q < 1: no quadrature node falls below the kink of |L|, and
    # the quantile of an empty set of levels used to crash (zero-size array); tie-aware cuts
    # make such small r common
    for q in (0.1, 0.5):
        b = bound.epsilon_lower_bound(300, 9, 1, "subsampled_gaussian", delta=1e-5, q=q)
        assert 0.0 <= b.epsilon < 1.0 and b.r == 9
