"""Tests of the LiDP estimators (Pillutla et al., NeurIPS 2023): XBern intervals (App. C),
the epsilon lower bound (Alg. 1) and held-out threshold tuning (App. E.1).

Paper: arXiv:2305.18447 (see docs/references.md).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import optimize, special, stats

from dpaudit.audit import audit
from dpaudit.estimators.lidp import bound as lidp
from dpaudit.estimators.lidp import xbern
from dpaudit.estimators.lidp.audit import split_in_out
from dpaudit.estimators.lidp.xbern import XBernInputError, XBernSummary
from dpaudit.scores import ScoreFile, ScoreFileError

BETA = 0.05
CASES = [
    ("wilson", 1),
    ("wilson", 2),
    ("wilson", 4),
    ("bernstein", 1),
    ("bernstein", 2),
    ("bernstein", 4),
    ("clopper_pearson", 1),
]


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------


def rdp_gaussian_epsilon(sigma: float, delta: float) -> float:
    """App. E.1: eps <= inf_{a>1} a/(2 s^2) + log(1/(a delta))/(a-1) + log(1 - 1/a)
    ([4, Thm 21]), for the Gaussian mechanism with sensitivity 1."""

    def f(log_am1):
        a = 1.0 + math.exp(log_am1)
        return a / (2 * sigma**2) + math.log(1 / (a * delta)) / (a - 1) + math.log(1 - 1 / a)

    res = optimize.minimize_scalar(
        f, bounds=(-8.0, 8.0), method="bounded", options={"xatol": 1e-10}
    )
    return float(res.fun)


def exact_gaussian_epsilon(sigma: float, delta: float) -> float:
    """Exact (eps, delta) curve of the Gaussian mechanism with sensitivity 1 (Balle and Wang
    2018, Thm 8): delta(eps) = Phi(1/(2s) - eps s) - e^eps Phi(-1/(2s) - eps s)."""

    def d(eps):
        return (
            stats.norm.cdf(0.5 / sigma - eps * sigma)
            - math.exp(eps) * stats.norm.cdf(-0.5 / sigma - eps * sigma)
            - delta
        )

    return float(optimize.brentq(d, 0.0, 100.0))


def beta_binomial_xbern(rng, reps: int, n: int, K: int, a: float, b: float) -> np.ndarray:
    """(reps, n, K) exchangeable, positively correlated 0/1 vectors: p ~ Beta(a, b) per trial,
    then K i.i.d. Bernoulli(p). Mean a/(a+b); mu_2 = E[p^2] > mu_1^2."""
    p = rng.beta(a, b, size=(reps, n, 1))
    return rng.random((reps, n, K)) < p


def batch_summary(x: np.ndarray, order: int) -> XBernSummary:
    """Summaries of many independent data sets x[r] (reps, n, K) in one batch."""
    reps, n, K = x.shape
    counts = x.sum(axis=2)  # (reps, n)
    mom = xbern.per_row_moments(counts, K, min(order, K)).mean(axis=2)  # (order, reps)
    return XBernSummary(n=n, K=K, moments=mom, first=x[:, :, 0].sum(axis=1))


def correlated_scores(rng, reps, n, K, mean, rho):
    """Scores a_i + b_ik with a_i ~ N(0, rho) shared per trial, b_ik ~ N(mean, 1 - rho):
    exchangeable, correlated, each marginally N(mean, 1)."""
    a = rng.normal(0.0, math.sqrt(rho), size=(reps, n, 1))
    return a + rng.normal(mean, math.sqrt(1 - rho), size=(reps, n, K))


def lidp_file(score_in: np.ndarray, score_out: np.ndarray, delta=1e-5, eps=2.0) -> ScoreFile:
    n, K = score_in.shape
    m = score_out.shape[1]
    meta = dict(
        experiment="t",
        setting="s",
        seed=0,
        design="lidp",
        threat_model="simulation",
        claimed_epsilon=eps,
        delta=delta,
        accountant="test",
    )
    return ScoreFile(
        score=np.concatenate([score_out, score_in], axis=1),  # nulls first: order is free
        membership=np.concatenate([np.zeros((n, m)), np.ones((n, K))], axis=1),
        canary_id=np.tile(np.arange(K + m), (n, 1)),
        meta=meta,
    )


# ---------------------------------------------------------------------------------------------
# closed forms and numbers printed in the paper / note
# ---------------------------------------------------------------------------------------------


def test_recurrence_eq14_matches_brute_force_eq13():
    """Prop. 6 / Eq. (14) against the definition (13) for every binary vector with K = 6."""
    K = 6
    for x in itertools.product([0, 1], repeat=K):
        rec = xbern.per_row_moments(np.array([sum(x)]), K, K)[:, 0]
        for ell in range(1, K + 1):
            brute = np.mean(
                [np.prod([x[j] for j in c]) for c in itertools.combinations(range(K), ell)]
            )
            assert rec[ell - 1] == pytest.approx(brute, abs=1e-12)
            assert rec[ell - 1] == pytest.approx(special.comb(sum(x), ell) / special.comb(K, ell))


def test_variance_identities_eq17_eq18_exactly():
    """Eqs. (17)-(18) on an exact beta-binomial XBern (counts distribution enumerated)."""
    K, a, b = 7, 1.3, 2.1
    s = np.arange(K + 1)
    pmf = stats.betabinom.pmf(s, K, a, b)
    m = xbern.per_row_moments(s, K, 4)  # (4, K+1)
    mu = m @ pmf
    var1 = (m[0] ** 2) @ pmf - mu[0] ** 2
    var2 = (m[1] ** 2) @ pmf - mu[1] ** 2
    assert var1 == pytest.approx(mu[0] / K - mu[0] ** 2 + (K - 1) / K * mu[1], rel=1e-12)
    kk = K * (K - 1)
    eq18 = (
        2 * mu[1] * (1 - mu[1]) / kk
        + 4 * (K - 2) / kk * (mu[2] - mu[1] ** 2)
        + (K - 2) * (K - 3) / kk * (mu[3] - mu[1] ** 2)
    )
    assert var2 == pytest.approx(eq18, rel=1e-12)


def test_z_quantiles_of_the_beta_split():
    """App. C.2: with beta = 0.05 and beta/2 per side, the first/second/fourth
    order Wilson intervals use Z = 1.960, 2.241, 2.498."""
    assert xbern.z_quantile(0.05 / 2) == pytest.approx(1.960, abs=1e-3)
    assert xbern.z_quantile(0.05 / 4) == pytest.approx(2.241, abs=1e-3)
    assert xbern.z_quantile(0.05 / 8) == pytest.approx(2.498, abs=1e-3)


def test_first_order_wilson_is_the_wilson_score_interval():
    """Alg. 5 with K = 1 is the textbook Wilson score interval (when no clipping binds)."""
    rng = np.random.default_rng(0)
    x = (rng.random((400, 1)) < 0.3).astype(int)
    lo, hi = xbern.xbern_interval(x, BETA, "wilson", 1)
    p, n, z = x.mean(), len(x), stats.norm.isf(BETA)
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    assert lo == pytest.approx(centre - half, rel=1e-12)
    assert hi == pytest.approx(centre + half, rel=1e-12)


def test_clopper_pearson_first_coordinate_matches_scipy():
    rng = np.random.default_rng(1)
    x = (rng.random((120, 5)) < 0.2).astype(int)
    lo, hi = xbern.xbern_interval(x, BETA, "clopper_pearson", 1)
    ci = stats.binomtest(int(x[:, 0].sum()), 120).proportion_ci(1 - 2 * BETA, "exact")
    assert lo == pytest.approx(ci.low, rel=1e-9)
    assert hi == pytest.approx(ci.high, rel=1e-9)


def test_bernstein_roots_solve_the_printed_equations():
    """Algs. 2-3: the returned bounds satisfy their defining equations."""
    rng = np.random.default_rng(2)
    x = beta_binomial_xbern(rng, 1, 500, 8, 2.0, 5.0)[0]
    n, K = x.shape
    mu = xbern.moments(x, 2)
    lo, hi = xbern.xbern_interval(x, BETA, "bernstein", 1)
    L = math.log(1 / BETA)
    assert mu[0] - lo - math.sqrt(2 * L / n * lo * (1 - lo)) == pytest.approx(2 * L / (3 * n))
    assert hi - mu[0] - math.sqrt(2 * L / n * hi * (1 - hi)) == pytest.approx(2 * L / (3 * n))
    lo2, hi2 = xbern.xbern_interval(x, BETA, "bernstein", 2)
    L2 = math.log(2 / BETA)
    mu2_bar = xbern._bernstein_upper(mu[1], xbern._var_bernoulli, n, L2)
    for v, sign in ((lo2, -1), (hi2, 1)):
        lhs = sign * (v - mu[0]) - math.sqrt(2 * L2 / n * (v / K - v * v + mu2_bar))
        assert lhs == pytest.approx(2 * L2 / (3 * n), abs=1e-12)


def test_population_dp_wilson_baseline_reproduces_paper_section4():
    """Section 4 / Fig. 3 left: "DP + Wilson" (K = 1, first-order Wilson) needs n = 4096 for
    eps_hat = 0.67 and n = 65536 for eps_hat = 0.85, for the Gaussian mechanism at eps = 2,
    delta = 1e-5, beta = 0.05. sigma from the RDP conversion of App. E.1; population-level
    TPR/FPR, the 500-point 10%-90% quantile grid (our calibration, docs/estimators/lidp.md)."""
    sigma = optimize.brentq(lambda s: rdp_gaussian_epsilon(s, 1e-5) - 2.0, 0.5, 20.0)
    assert sigma**2 == pytest.approx(4.62, abs=0.01)  # the released code's sigma^2 for eps=2
    grid = np.linspace(sigma * stats.norm.ppf(0.1), 1 + sigma * stats.norm.ppf(0.9), 500)
    tpr = stats.norm.sf((grid - 1) / sigma)  # in-score 1 + sigma N(0,1)
    fpr = stats.norm.sf(grid / sigma)  # null score sigma N(0,1)
    got = {}
    for n in (256, 1024, 4096, 16384, 65536):
        p1, _ = xbern.bounds(XBernSummary(n, 1, tpr[None], tpr), BETA / 2, "wilson", 1)
        _, p0 = xbern.bounds(XBernSummary(n, 1, fpr[None], fpr), BETA / 2, "wilson", 1)
        got[n] = float(lidp.epsilon_from_bounds(p1, p0, 1e-5).max())
    assert round(got[4096], 2) == 0.67
    assert round(got[65536], 2) == 0.85
    # the rest of our calibration table (docs/estimators/lidp.md)
    assert [round(got[n], 2) for n in (256, 1024, 16384)] == [0.16, 0.44, 0.79]


def test_second_order_width_follows_eq8_for_independent_coordinates():
    """Eq. (8): with pairwise-uncorrelated coordinates (mu_2 = mu_1^2) the 2nd-order interval
    has half-width ~ Z sqrt(mu(1-mu)/(nK) + (mu2_bar - mu_2)/n), i.e. 1/sqrt(nK) + 1/n^(3/4),
    far below the 1st-order 1/sqrt(n) width, which ignores K."""
    rng = np.random.default_rng(3)
    n, K, p = 4096, 64, 0.3
    x = rng.random((n, K)) < p
    lo1, hi1 = xbern.xbern_interval(x, BETA, "wilson", 1)
    lo2, hi2 = xbern.xbern_interval(x, BETA, "wilson", 2)
    z = xbern.z_quantile(BETA / 2)
    slack_mu2 = z * math.sqrt(p**2 * (1 - p**2) / n)  # 1st-order Wilson on mu_2, to O(1/n)
    expected = 2 * z * math.sqrt(p * (1 - p) / (n * K) + (K - 1) / K * slack_mu2 / n)
    assert (hi2 - lo2) == pytest.approx(expected, rel=0.05)
    assert (hi1 - lo1) / (hi2 - lo2) > 3


def test_second_order_matches_first_order_when_coordinates_are_identical():
    """Perfect correlation (all K coordinates equal): mu_2 = mu_1 and Var(m_1) = mu(1-mu),
    so the 2nd-order interval is (about) the 1st-order one at beta/2 -- no gain from K."""
    rng = np.random.default_rng(4)
    col = rng.random((2000, 1)) < 0.4
    x = np.repeat(col, 16, axis=1)
    lo1, hi1 = xbern.xbern_interval(col, BETA / 2, "wilson", 1)
    lo2, hi2 = xbern.xbern_interval(x, BETA, "wilson", 2)
    assert (hi2 - lo2) >= (hi1 - lo1)
    assert (hi2 - lo2) == pytest.approx(hi1 - lo1, rel=0.05)


def test_grid_counts_match_direct_thresholding():
    """The batched summaries over the threshold grid equal thresholding one tau at a time."""
    rng = np.random.default_rng(5)
    si = correlated_scores(rng, 1, 70, 6, 1.0, 0.3)[0]
    so = correlated_scores(rng, 1, 70, 5, 0.0, 0.3)[0]
    grid = lidp.threshold_grid(si, so, 40)
    for interval, order in CASES:
        eps, p1, p0 = lidp.epsilon_curve(si, so, grid, lidp.BoundSpec(1e-5, 0.95, interval, order))
        for j in (0, 7, 20, 39):
            r = lidp.epsilon_lower_bound(
                si >= grid[j], so >= grid[j], lidp.BoundSpec(1e-5, 0.95, interval, order)
            )
            assert (r.epsilon, r.p1_lower, r.p0_upper) == pytest.approx(
                (eps[j], p1[j], p0[j]), abs=1e-12
            )


def test_threshold_grid_is_the_pooled_10_90_quantile_range():
    si = np.arange(100.0).reshape(10, 10)
    so = np.arange(100.0).reshape(10, 10) - 50
    g = lidp.threshold_grid(si, so)
    assert len(g) == 500
    assert g[0] == pytest.approx(np.quantile(so, 0.1))
    assert g[-1] == pytest.approx(np.quantile(si, 0.9))


# ---------------------------------------------------------------------------------------------
# Monte Carlo validity
# ---------------------------------------------------------------------------------------------

REPS = 400
#: One-sided MC slack: ~3 binomial standard deviations at p = 0.05 over 400 reps.
SLACK = 3 * math.sqrt(0.05 * 0.95 / REPS)


#: Every (interval, order, variant); the variants do not change Clopper-Pearson or order 1.
VARIANT_CASES = [
    (i, o, v)
    for i, o in CASES
    for v in xbern.VARIANTS
    if v == "printed" or (i != "clopper_pearson" and o > 1)
]


@pytest.mark.parametrize("interval,order,variant", VARIANT_CASES)
def test_interval_coverage_on_correlated_xbern(interval, order, variant):
    """Each one-sided bound fails with probability <= beta (+ MC slack) on a positively
    correlated beta-binomial XBern (n = 200, K = 16)."""
    rng = np.random.default_rng(10 + order)
    a, b = 2.0, 6.0
    x = beta_binomial_xbern(rng, REPS, 200, 16, a, b)
    lo, hi = xbern.bounds(batch_summary(x, order), BETA, interval, order, variant)
    mu = a / (a + b)
    assert np.mean(lo > mu) <= BETA + SLACK
    assert np.mean(hi < mu) <= BETA + SLACK


def test_coverage_test_has_power_against_an_interval_ignoring_correlation():
    """The coverage check above can fail: a Wilson interval that assumes independent
    coordinates (Var = mu(1-mu)/K) misses far more than beta on the same data."""
    rng = np.random.default_rng(12)
    a, b = 2.0, 6.0
    x = beta_binomial_xbern(rng, REPS, 200, 16, a, b)
    s = batch_summary(x, 1)
    naive = XBernSummary(n=s.n * s.K, K=1, moments=s.moments, first=s.first)  # n*K "trials"
    lo, _ = xbern.bounds(naive, BETA, "wilson", 1)
    assert np.mean(lo > a / (a + b)) > BETA + SLACK


@pytest.mark.parametrize("interval,order", CASES)
@pytest.mark.slow
def test_epsilon_bound_valid_with_heldout_threshold(interval, order):
    """Alg. 1 + App. E.1 on correlated exchangeable scores with known population ROC: the
    bound computed on fresh trials at the held-out-tuned tau* exceeds the true
    eps(tau*) = log((TPR(tau*) - delta) / FPR(tau*)) in at most beta (+ slack) of the reps.
    (eps(tau) <= the mechanism's epsilon for every tau, so this is the sharper check.)"""
    rng = np.random.default_rng(20 + order)
    delta, reps, n, K, mu_in, rho = 1e-5, 250, 120, 8, 1.0, 0.2
    si = correlated_scores(rng, reps, n, K, mu_in, rho)
    so = correlated_scores(rng, reps, n, K, 0.0, rho)
    above = 0
    for r in range(reps):
        res = lidp.audit_scores(
            si[r], so[r], delta, 0.95, interval, order, grid_size=100, split_seed=r
        )
        tau = res.threshold
        true = math.log((stats.norm.sf(tau - mu_in) - delta) / stats.norm.sf(tau))
        above += res.epsilon > true
    assert above / reps <= BETA + 3 * math.sqrt(BETA * (1 - BETA) / reps)


def test_epsilon_bound_below_true_epsilon_of_the_gaussian_mechanism():
    """LiDP on the Gaussian mechanism of Section 4 (K random unit canaries in d dims, sum
    query, base set {0}, Alg. 1 add/remove: the null model holds c_1..c_{K-1}) with the
    exact epsilon of the Gaussian mechanism (Balle-Wang): eps_hat > eps in <= beta of reps."""
    rng = np.random.default_rng(30)
    delta, sigma, reps, n, K, d = 1e-5, 0.8, 200, 64, 8, 100
    eps_true = exact_gaussian_epsilon(sigma, delta)
    above, eps_hats = 0, []
    for _ in range(reps):
        u = rng.normal(size=(n, 2 * K, d))
        u /= np.linalg.norm(u, axis=2, keepdims=True)
        c, cnull = u[:, :K], u[:, K:]
        z = rng.normal(size=(n, d))
        out1 = c.sum(axis=1) + sigma * z
        out0 = c[:, : K - 1].sum(axis=1) + sigma * z
        si = np.einsum("nkd,nd->nk", c, out1)
        so = np.einsum("nkd,nd->nk", cnull, out0)
        res = lidp.audit_scores(si, so, delta, 0.95, "wilson", 2, grid_size=100)
        eps_hats.append(res.epsilon)
        above += res.epsilon > eps_true
    assert above / reps <= BETA + SLACK
    assert np.mean(eps_hats) > 0.2  # the audit detects something (mean 0.26; eps = 5.68)


@pytest.mark.parametrize("interval,order", CASES)
def test_null_bound_is_zero(interval, order):
    """Members and non-members with one (correlated) distribution: eps_hat = 0 in >= 95% of
    reps, with the threshold tuned on held-out trials."""
    rng = np.random.default_rng(40 + order)
    reps, n, K = 200, 100, 8
    si = correlated_scores(rng, reps, n, K, 0.0, 0.3)
    so = correlated_scores(rng, reps, n, K, 0.0, 0.3)
    zeros = sum(
        lidp.audit_scores(
            si[r], so[r], 1e-5, 0.95, interval, order, grid_size=100, split_seed=r
        ).epsilon
        == 0.0
        for r in range(reps)
    )
    assert zeros / reps >= 0.95


# ---------------------------------------------------------------------------------------------
# registration on score files
# ---------------------------------------------------------------------------------------------


def test_registered_method_on_score_file_rows_and_validity_flags():
    rng = np.random.default_rng(50)
    si = correlated_scores(rng, 1, 200, 8, 1.5, 0.1)[0]
    so = correlated_scores(rng, 1, 200, 8, 0.0, 0.1)[0]
    sf = lidp_file(si, so)
    got_in, got_out = split_in_out(sf)
    np.testing.assert_array_equal(got_in, si)
    np.testing.assert_array_equal(got_out, so)
    specs = {
        "w2": {"method": "lidp"},
        "b4": {"method": "lidp", "interval": "bernstein", "order": 4, "beta": 0.1},
        "fixed": {"method": "lidp", "threshold": 1.0},
        "reuse": {"method": "lidp", "threshold": "in_sample"},
        "cp": {"method": "lidp", "interval": "clopper_pearson"},
    }
    table = audit([sf], specs).set_index("estimator")
    for col in ("epsilon", "valid", "threshold", "p1_lower", "p0_upper", "n_trials", "K"):
        assert col in table.columns
    assert table.loc["w2", "valid"] and table.loc["fixed", "valid"]
    assert not table.loc["reuse", "valid"]
    assert table.loc["w2", "n_trials"] == 100 and table.loc["w2", "n_tune"] == 100
    assert table.loc["fixed", "n_trials"] == 200 and table.loc["fixed", "threshold"] == 1.0
    assert table.loc["b4", "confidence"] == pytest.approx(0.9)
    assert table.loc["cp", "order"] == 1
    assert (table["K"] == 8).all() and (table["epsilon"] > 0).all()
    # the fixed-threshold row is exactly Alg. 1 on the thresholded arrays
    direct = lidp.epsilon_lower_bound(si >= 1.0, so >= 1.0, lidp.BoundSpec(1e-5, 0.95, "wilson", 2))
    assert table.loc["fixed", "epsilon"] == pytest.approx(direct.epsilon, rel=1e-12)
    # eps_hat = log((p1_lower - delta) / p0_upper)
    row = table.loc["fixed"]
    assert row["epsilon"] == pytest.approx(
        math.log((row["p1_lower"] - 1e-5) / row["p0_upper"]), rel=1e-12
    )


def test_trials_option_gives_nested_subsets_with_their_own_tuning_trials():
    """``trials: [n, ...]`` (App. F.2: n in {125, ..., 1000}): one row per n, the bound on the
    first n evaluation trials at the threshold tuned on the first n tuning trials of the one
    held-out split; at the largest n it is the ordinary row of the whole file."""
    rng = np.random.default_rng(52)
    si = correlated_scores(rng, 1, 400, 8, 1.5, 0.1)[0]
    so = correlated_scores(rng, 1, 400, 8, 0.0, 0.1)[0]
    sf = lidp_file(si, so)
    specs = {
        "all": {"method": "lidp"},
        "sub": {"method": "lidp", "trials": [50, 100, 200]},
        "fixed": {"method": "lidp", "threshold": 1.0, "trials": [30, 400]},
        "b": {"method": "lidp", "trials": [60], "beta": 0.1},
    }
    table = audit([sf], specs)
    sub = table[table["estimator"] == "sub"].set_index("n_trials")
    assert list(sub.index) == [50, 100, 200] and (sub["n_tune"] == sub.index).all()
    assert (sub["heldout_source"] == "random_split").all()
    whole = table[table["estimator"] == "all"].iloc[0]
    assert sub.loc[200, "epsilon"] == whole["epsilon"]
    assert sub.loc[200, "threshold"] == whole["threshold"]
    tune, ev = lidp.split_trials(400, 0.5, 0)
    spec = lidp.BoundSpec(1e-5, 0.95, "wilson", 2)
    tau, _ = lidp.tune_threshold(si[tune[:50]], so[tune[:50]], spec)
    direct = lidp.epsilon_lower_bound(si[ev[:50]] >= tau, so[ev[:50]] >= tau, spec)
    assert sub.loc[50, "threshold"] == tau
    assert sub.loc[50, "epsilon"] == pytest.approx(direct.epsilon, rel=1e-12)
    fixed = table[table["estimator"] == "fixed"].set_index("n_trials")
    first30 = lidp.epsilon_lower_bound(si[:30] >= 1.0, so[:30] >= 1.0, spec)
    assert fixed.loc[30, "epsilon"] == pytest.approx(first30.epsilon, rel=1e-12)
    assert table[table["estimator"] == "b"].iloc[0]["confidence"] == pytest.approx(0.9)
    with pytest.raises(ValueError, match="trials asks for 201 evaluation trials.*has 200"):
        audit([sf], {"too_many": {"method": "lidp", "trials": [201]}})


def test_method_does_not_apply_to_other_designs():
    rng = np.random.default_rng(51)
    sf = lidp_file(rng.normal(size=(10, 2)), rng.normal(size=(10, 2)))
    sf.meta["design"] = "multi_run"
    assert audit([sf], {"w": {"method": "lidp"}}).empty


# ---------------------------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------------------------


def test_bound_spec_is_one_checked_parameter_group():
    """(delta, confidence, interval, order, variant) travel as one frozen BoundSpec: the
    0/1 bound, the curve over a grid and the tuner read the same spec, which is checked once
    (floats, clear errors) and cannot be changed on the way."""
    spec = lidp.BoundSpec(np.float32(1e-5), 0.9, "wilson", 2)
    checked = spec.checked()
    assert type(checked.delta) is float and type(checked.confidence) is float
    assert (checked.interval, checked.order, checked.variant) == ("wilson", 2, "printed")
    with pytest.raises(AttributeError):
        spec.confidence = 0.5
    with pytest.raises(XBernInputError, match="delta must lie in"):
        lidp.BoundSpec(1.0).checked()
    rng = np.random.default_rng(4)
    si, so = rng.normal(1.0, 1.0, (300, 4)), rng.normal(0.0, 1.0, (300, 4))
    tau, best = lidp.tune_threshold(si, so, spec, 50)
    grid = lidp.threshold_grid(si, so, 50)
    eps, _, _ = lidp.epsilon_curve(si, so, grid, spec)
    assert best == eps.max() and tau in grid
    at_tau = lidp.epsilon_lower_bound(si >= tau, so >= tau, spec)
    assert at_tau.epsilon == pytest.approx(best, abs=1e-12) and at_tau.confidence == 0.9


def test_bad_input_errors_name_the_problem():
    rng = np.random.default_rng(60)
    x1 = rng.random((50, 1)) < 0.5
    x3 = rng.random((50, 3)) < 0.5
    with pytest.raises(XBernInputError, match="needs K >= 2"):
        xbern.xbern_interval(x1, BETA, "wilson", 2)
    with pytest.raises(XBernInputError, match="needs K >= 4"):
        xbern.xbern_interval(x3, BETA, "bernstein", 4)
    with pytest.raises(XBernInputError, match="order must be one of"):
        xbern.xbern_interval(x3, BETA, "wilson", 3)
    with pytest.raises(XBernInputError, match="first coordinate only"):
        xbern.xbern_interval(x3, BETA, "clopper_pearson", 2)
    with pytest.raises(XBernInputError, match="unknown interval"):
        xbern.xbern_interval(x3, BETA, "hoeffding", 1)
    with pytest.raises(XBernInputError, match="unknown variant"):
        xbern.xbern_interval(x3, BETA, "wilson", 1, "mine")
    for beta in (0.0, 1.0, -0.1, 2.0, float("nan")):
        with pytest.raises(XBernInputError, match="beta must lie in"):
            xbern.xbern_interval(x3, beta, "wilson", 1)
    for conf in (0.0, 1.0, 1.5):
        with pytest.raises(XBernInputError, match="confidence must lie in"):
            lidp.epsilon_lower_bound(x3, x3, lidp.BoundSpec(1e-5, conf))
    bad = x3.astype(float)
    bad[4, 2] = 2.0
    with pytest.raises(XBernInputError, match="only 0 and 1.*trial 4, canary 2"):
        xbern.xbern_interval(bad, BETA)
    bad[4, 2] = np.nan
    with pytest.raises(XBernInputError, match="NaN at trial 4, canary 2"):
        lidp.epsilon_lower_bound(x3, bad, lidp.BoundSpec(1e-5))
    with pytest.raises(XBernInputError, match="2-D"):
        xbern.xbern_interval(np.ones(5))
    with pytest.raises(XBernInputError, match="empty"):
        xbern.xbern_interval(np.ones((0, 3)))
    with pytest.raises(XBernInputError, match="y \\(null canaries\\) has K = 3"):
        lidp.epsilon_lower_bound(rng.random((50, 4)) < 0.5, x3, lidp.BoundSpec(1e-5, order=4))
    scores = rng.normal(size=(20, 4))
    nan_scores = scores.copy()
    nan_scores[3, 1] = np.nan
    with pytest.raises(XBernInputError, match="not finite at trial 3, canary 1"):
        lidp.audit_scores(nan_scores, scores, 1e-5)
    with pytest.raises(XBernInputError, match="heldout_fraction"):
        lidp.audit_scores(scores, scores, 1e-5, heldout_fraction=1.0)
    with pytest.raises(XBernInputError, match="threshold must be"):
        lidp.audit_scores(scores, scores, 1e-5, threshold="best")
    with pytest.raises(XBernInputError, match="20 trials but score_out has 19"):
        lidp.audit_scores(scores, scores[:19], 1e-5)


def test_bad_score_files_and_params():
    rng = np.random.default_rng(61)
    sf = lidp_file(rng.normal(size=(10, 3)), rng.normal(size=(10, 3)))
    with pytest.raises(ValueError, match="unknown lidp parameter"):
        audit([sf], {"w": {"method": "lidp", "ordre": 2}})
    with pytest.raises(ValueError, match="not both"):
        audit([sf], {"w": {"method": "lidp", "confidence": 0.9, "beta": 0.05}})
    with pytest.raises(XBernInputError, match="needs K >= 4"):
        audit([sf], {"w": {"method": "lidp", "order": 4}})
    mem = sf.membership.copy()
    mem[2, 0] = 1  # trial 2 now has 4 inserted canaries
    uneven = ScoreFile(sf.score, mem, sf.canary_id, sf.meta)
    with pytest.raises(ScoreFileError, match="same number of inserted"):
        audit([uneven], {"w": {"method": "lidp"}})
    mem = np.ones_like(sf.membership)
    with pytest.raises(ScoreFileError, match="no null"):
        audit([ScoreFile(sf.score, mem, sf.canary_id, sf.meta)], {"w": {"method": "lidp"}})


def test_cli_lidp_bound(tmp_path, capsys):
    import json

    from dpaudit import cli, scores

    rng = np.random.default_rng(70)
    si = correlated_scores(rng, 1, 100, 4, 1.5, 0.1)[0]
    so = correlated_scores(rng, 1, 100, 4, 0.0, 0.1)[0]
    path = scores.write(tmp_path / "s.npz", lidp_file(si, so))
    assert cli.main(["lidp-bound", str(path), "--threshold", "1.0", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    direct = lidp.epsilon_lower_bound(si >= 1.0, so >= 1.0, lidp.BoundSpec(1e-5, 0.95, "wilson", 2))
    assert out["epsilon"] == pytest.approx(direct.epsilon) and out["valid"] is True
    assert out["tuned_epsilon"] is None
    assert cli.main(["lidp-bound", str(path), "--order", "4", "--confidence", "1.5"]) == 2
    assert "confidence must lie in (0, 1)" in capsys.readouterr().err


def test_threshold_modes_are_the_shared_strategies():
    """Fixed / heldout / in_sample map to Explicit / Split / Uncorrected (selection.rules), and
    each row's validity is the strategy's."""
    from dpaudit.estimators.selection import rules

    assert lidp.threshold_rule(0.5, 0.5, 0) == rules.Explicit(0.5)
    assert lidp.threshold_rule("heldout", 0.3, 2) == rules.Split(2, 0.3)
    assert isinstance(lidp.threshold_rule("in_sample", 0.5, 0), rules.Uncorrected)
    with pytest.raises(XBernInputError, match="finite"):
        lidp.threshold_rule(float("inf"), 0.5, 0)
    rng = np.random.default_rng(0)
    si, so = rng.normal(1, 1, (200, 4)), rng.normal(0, 1, (200, 4))
    held = lidp.audit_scores(si, so, 1e-5, threshold="heldout")
    ins = lidp.audit_scores(si, so, 1e-5, threshold="in_sample")
    fix = lidp.audit_scores(si, so, 1e-5, threshold=0.5)
    assert (held.valid, ins.valid, fix.valid) == (True, False, True)
    assert (held.n_tune, ins.n_tune, fix.n_tune) == (100, 200, 0)
    assert ins.epsilon == pytest.approx(ins.tuned_epsilon)


def test_one_unit_interval_check_for_beta_and_confidence():
    assert xbern.check_open_unit(0.25, "x") == 0.25
    with pytest.raises(XBernInputError, match="failure probability beta must lie in"):
        xbern.check_beta(1.0)
    with pytest.raises(XBernInputError, match="confidence must be a number, got 'a'"):
        lidp.check_confidence("a")
    # the Bernstein bounds on either side come from one root finder, in [0, 1]
    lo = xbern._bernstein_lower(np.array([0.0, 0.3, 1.0]), xbern._var_bernoulli, 50, 3.0)
    hi = xbern._bernstein_upper(np.array([0.0, 0.3, 1.0]), xbern._var_bernoulli, 50, 3.0)
    assert np.all((0 <= lo) & (lo <= [0.0, 0.3, 1.0]) & ([0.0, 0.3, 1.0] <= hi) & (hi <= 1))
    assert xbern._bernstein_lower(0.0, xbern._var_bernoulli, 50, 3.0) == 0.0


@pytest.mark.parametrize("K", [8, 32, 256, 2040])
@pytest.mark.parametrize("dtype", [np.int8, np.uint8, bool])
def test_packed_row_sums_equal_the_plain_counts(K, dtype):
    """The word-at-a-time row sums of XBernSummary.from_binary are the plain counts, full
    rows and empty rows included (K = 2040: every byte lane at its bound 255)."""
    rng = np.random.default_rng(K)
    x = (rng.random((300, K)) < rng.random((300, 1))).astype(dtype)
    x[0], x[1] = 1, 0
    counts = xbern._row_sums_packed(x)
    assert counts is not None
    np.testing.assert_array_equal(counts, np.count_nonzero(x, axis=1))
    assert counts[0] == K
    summary = xbern.XBernSummary.from_binary(x, order=4)
    plain = xbern.moments(x, order=4)
    np.testing.assert_array_equal(summary.moments, plain)


def test_packed_row_sums_leave_other_layouts_to_the_plain_sum():
    x = np.ones((4, 16), dtype=np.int8)
    assert xbern._row_sums_packed(x[:, :12]) is None  # K not a multiple of 8, not contiguous
    assert xbern._row_sums_packed(np.ones((4, 12), dtype=np.int8)) is None
    assert xbern._row_sums_packed(np.ones((4, 2048), dtype=np.int8)) is None  # lanes could carry
    assert xbern._row_sums_packed(np.ones((4, 16), dtype=np.int16)) is None
    assert xbern._row_sums_packed(np.asfortranarray(np.ones((16, 16), dtype=np.int8))) is None
