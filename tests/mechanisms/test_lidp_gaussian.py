"""Tests of the Gaussian-mechanism LiDP simulator (Pillutla et al., Section 4 / App. E):
the Gram (Bartlett) sampler against direct sampling, the noise calibration, score files."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from dpaudit import scores
from dpaudit.accounting.gaussian import gaussian_rdp_epsilon
from dpaudit.audit import audit
from dpaudit.mechanisms import lidp_gaussian as lg

N = 20000


def statistics(s_in: np.ndarray, s_out: np.ndarray) -> dict[str, np.ndarray]:
    """Marginals and joint functionals of one trial's scores (dependence included)."""
    return {
        "s1": s_in[:, 0],
        "sK": s_in[:, -1],
        "sum_in": s_in.sum(axis=1),
        "s1*s2": s_in[:, 0] * s_in[:, 1],
        "max_in": s_in.max(axis=1),
        "t1": s_out[:, 0],
        "t1*t2": s_out[:, 0] * s_out[:, 1],
        "max_out": s_out.max(axis=1),
        "s1*t1": s_in[:, 0] * s_out[:, 0],
    }


@pytest.fixture(scope="module")
def samples():
    K, m, d, sigma = 4, 3, 9, 0.6
    gram = lg.sample_scores(N, K, m, d, sigma, 1, "gram")
    direct = lg.sample_scores(N, K, m, d, sigma, 2, "direct")
    return (K, m, d, sigma), gram, direct


def test_gram_sampler_matches_direct_sampling_in_distribution(samples):
    """Two-sample KS on marginals and joint functionals, Gram vs direct (K=4, m=3, d=9)."""
    _, gram, direct = samples
    a, b = statistics(*gram), statistics(*direct)
    pvals = {k: stats.ks_2samp(a[k], b[k]).pvalue for k in a}
    assert min(pvals.values()) > 1e-3 / len(pvals), pvals


def test_distribution_test_has_power(samples):
    """The KS check above detects a wrong degree of freedom (d + 3 instead of d)."""
    (K, m, d, sigma), _, direct = samples
    wrong = lg.sample_scores(N, K, m, d + 3, sigma, 3, "gram")
    a, b = statistics(*wrong), statistics(*direct)
    assert min(stats.ks_2samp(a[k], b[k]).pvalue for k in a) < 1e-6


def test_closed_form_moments(samples):
    """E s_k = 1, Var s_k = (K-1)/d + sigma^2, Cov(s_k, s_l) = 1/d; null: mean 0, same
    variance, uncorrelated (random unit vectors: E<u,v> = 0, Var<u,v> = 1/d, <u, z> ~ N(0,1))."""
    (K, m, d, sigma), gram, _ = samples
    s_in, s_out = gram
    var = (K - 1) / d + sigma**2
    se = np.sqrt(2 * var**2 / N)
    assert np.abs(s_in.mean(axis=0) - 1).max() < 5 * np.sqrt(var / N)
    assert np.abs(s_in.var(axis=0) - var).max() < 5 * se
    assert np.abs(s_out.mean(axis=0)).max() < 5 * np.sqrt(var / N)
    assert np.abs(s_out.var(axis=0) - var).max() < 5 * se
    c_in, c_out = np.cov(s_in.T), np.cov(s_out.T)
    off = ~np.eye(K, dtype=bool)
    assert np.abs(c_in[off] - 1 / d).max() < 5 * var / np.sqrt(N)
    assert np.abs(c_out[~np.eye(m, dtype=bool)]).max() < 5 * var / np.sqrt(N)


def test_gram_sampler_matches_direct_sampling_when_K_exceeds_d():
    """K + 1 > d: the p x d factor (Bartlett rows, then full N(0, 1) rows beyond the d-th)
    against direct sampling (K = 6, m = 3, d = 4), as above."""
    K, m, d, sigma = 6, 3, 4, 0.6
    gram = lg.sample_scores(N, K, m, d, sigma, 11, "gram")
    direct = lg.sample_scores(N, K, m, d, sigma, 12, "direct")
    assert gram[0].shape == (N, K) and gram[1].shape == (N, m)
    a, b = statistics(*gram), statistics(*direct)
    pvals = {k: stats.ks_2samp(a[k], b[k]).pvalue for k in a}
    assert min(pvals.values()) > 1e-3 / len(pvals), pvals
    # power: a wrong dimension (d = 5) is detected at this sample size
    wrong = statistics(*lg.sample_scores(N, K, m, d + 1, sigma, 13, "gram"))
    assert min(stats.ks_2samp(wrong[k], b[k]).pvalue for k in a) < 1e-6


@pytest.mark.parametrize("d", [160, 100])
def test_banded_fill_matches_direct_sampling(d):
    """K = 140 > ROW_FILL_MAX: the factor is filled in bands (p <= d and p > d), against
    direct sampling (4000 trials each, m = 4)."""
    K, m, sigma, n = 140, 4, 0.6, 4000
    assert K + 1 > lg.ROW_FILL_MAX
    a = statistics(*lg.sample_scores(n, K, m, d, sigma, 21, "gram"))
    b = statistics(*lg.sample_scores(n, K, m, d, sigma, 22, "direct"))
    pvals = {k: stats.ks_2samp(a[k], b[k]).pvalue for k in a}
    assert min(pvals.values()) > 1e-3 / len(pvals), pvals


@pytest.mark.parametrize(("p", "d"), [(20, 30), (200, 1000), (200, 150)])
def test_bartlett_factor_entries(p, d):
    """The factor itself: zero above the diagonal, N(0, 1) below it (and on the full rows
    beyond the d-th), chi^2_{d-i} on the diagonal squared."""
    t = 40
    r = min(p, d)
    out = np.zeros((t, p, r), dtype=np.float32)
    rng = np.random.default_rng(0)
    L = lg._bartlett(rng, lg.normal_stream(rng), out, d).astype(float)
    rows, cols = np.indices((p, r))
    assert (L[:, cols > rows] == 0).all()
    below = L[:, cols < np.minimum(rows, r)]
    assert below.size == t * int(np.minimum(np.arange(p), r).sum())
    assert stats.kstest(below.ravel(), "norm").pvalue > 1e-3
    diag2 = np.einsum("tii->ti", L[:, :r, :r]) ** 2
    z = (diag2.mean(axis=0) - (d - np.arange(r))) / np.sqrt(2 * (d - np.arange(r)) / t)
    assert np.abs(z).max() < 5
    assert abs(z.mean()) < 5 / np.sqrt(r)


def test_same_seed_same_scores_and_disjoint_streams():
    """Seeding is explicit: one seed (int or Generator) gives one set of scores; other seeds
    and the held-out stream (:func:`heldout_rng`) give other, non-overlapping draws."""
    args = (300, 16, 16, 10**4, 1.0)
    a = lg.sample_scores(*args, 5)
    b = lg.sample_scores(*args, np.random.default_rng(5))
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    assert a[0].dtype == np.float64 and a[1].dtype == np.float64
    c = lg.sample_scores(*args, 6)
    h = lg.sample_scores(*args, lg.heldout_rng(5, None))
    for other in (c, h):  # no shared (or shifted) stretch of draws; float32 values may
        # coincide by chance (about one pair in 3e7), so count rather than forbid matches
        assert np.isin(a[0], other[0]).mean() < 0.01 and np.isin(a[1], other[1]).mean() < 0.01


def test_standard_normal_f32_is_standard_normal():
    """Box-Muller from 32-bit words: KS against N(0, 1), moments, the stated tail cut."""
    z = lg.standard_normal_f32(np.random.SFC64(0), 400_001)
    assert z.dtype == np.float32 and z.shape == (400_001,)
    assert stats.kstest(z.astype(float), "norm").pvalue > 1e-3
    assert abs(z.mean()) < 5 / np.sqrt(len(z))
    assert abs(z.var() - 1) < 5 * np.sqrt(2 / len(z))
    assert abs(stats.kurtosis(z.astype(float))) < 5 * np.sqrt(24 / len(z))
    assert np.abs(z).max() <= np.sqrt(2 * 33 * np.log(2)) + 1e-5
    again = lg.standard_normal_f32(np.random.SFC64(0), 400_001)
    assert np.array_equal(z, again)


def test_sigma_calibration_matches_the_released_table():
    """App. E.1 conversion at delta = 1e-5 (released code's table: sigma^2 = 16.36, 4.62, 1.34,
    0.4066 for eps = 1, 2, 4, 8). The exact Gaussian curve (Balle-Wang) is tighter."""
    for eps, s2 in ((1, 16.36), (2, 4.62), (4, 1.34), (8, 0.4066)):
        sigma = lg.sigma_for_epsilon(eps, 1e-5)
        assert sigma**2 == pytest.approx(s2, rel=2e-3)
        assert gaussian_rdp_epsilon(sigma, 1e-5) == pytest.approx(eps, abs=1e-8)
        assert lg.epsilon_exact(sigma, 1e-5) < eps


def test_score_file_layout_roundtrip_and_audit(tmp_path):
    path = lg.write_score_file(
        tmp_path / "g.npz", n=300, K=8, d=1000, epsilon=4.0, delta=1e-5, seed=7
    )
    sf = scores.read(path)
    assert sf.meta["design"] == "lidp" and sf.meta["claimed_epsilon"] == 4.0
    assert sf.score.shape == (300, 16)
    assert (sf.membership[:, :8] == 1).all() and (sf.membership[:, 8:] == 0).all()
    again = lg.score_file(n=300, K=8, d=1000, epsilon=4.0, delta=1e-5, seed=7)
    np.testing.assert_array_equal(sf.score, again.score)  # reproducible from the seed
    row = audit([sf], {"w2": {"method": "lidp"}}).iloc[0]
    assert row["valid"] and 0 < row["epsilon"] < 4.0


def test_bad_input():
    with pytest.raises(ValueError, match="K must be a positive integer"):
        lg.sample_scores(10, 0, 1, 5, 1.0, 0)
    with pytest.raises(ValueError, match="sigma must be >= 0"):
        lg.sample_scores(10, 2, 1, 5, -1.0, 0)
    with pytest.raises(ValueError, match="method must be"):
        lg.sample_scores(10, 2, 1, 5, 1.0, 0, "wishart")
    with pytest.raises(ValueError, match="epsilon must be > 0"):
        lg.sigma_for_epsilon(0.0, 1e-5)
    with pytest.raises(ValueError, match="unknown accountant"):
        lg.sigma_for_epsilon(1.0, 1e-5, "prv")


def test_lidp_second_order_wilson_reproduces_fig3_left_at_n1024():
    """Section 4: "eps_hat = 0.67 with n = 1024" for LiDP + 2nd-order Wilson (eps = 2,
    delta = 1e-5, beta = 0.05; K = sqrt(n) = 32, d = 10^4 inferred by our calibration):
    threshold tuned on n held-out trials, bound on n fresh trials, mean of 8 repetitions."""
    from dpaudit.estimators.lidp import bound as lidp

    sigma = lg.sigma_for_epsilon(2.0, 1e-5)
    rng = np.random.default_rng(2024)
    n, K, d = 1024, 32, 10**4
    si, so = lg.sample_scores(n, K, K, d, sigma, rng)
    tau, _ = lidp.tune_threshold(si, so, lidp.BoundSpec(1e-5, 0.95, "wilson", 2))
    eps = []
    for _ in range(8):
        si, so = lg.sample_scores(n, K, K, d, sigma, rng)
        eps.append(
            lidp.epsilon_lower_bound(
                si >= tau, so >= tau, lidp.BoundSpec(1e-5, 0.95, "wilson", 2)
            ).epsilon
        )
    assert np.mean(eps) == pytest.approx(0.67, abs=0.03)
    # and clearly above the K = 1 baseline at the same n (0.44 at the population level)
    assert np.mean(eps) > 0.6


def test_exact_accountant_uses_the_one_gdp_curve_and_calibrates():
    """epsilon_exact is the (1/sigma)-GDP curve of dpaudit.accounting.gaussian; calibrating
    sigma with the exact accountant works (the old copy of the curve overflowed in math.exp at
    the small-sigma end of the bracket)."""
    from dpaudit.accounting.gaussian import gdp_epsilon
    from dpaudit.mechanisms import lidp_gaussian as lgm

    assert lgm.epsilon_exact(0.5, 1e-5) == gdp_epsilon(1e-5, 2.0)
    sigma = lgm.sigma_for_epsilon(2.0, 1e-5, "exact")
    assert lgm.epsilon_exact(sigma, 1e-5) == pytest.approx(2.0, abs=1e-9)
