"""Accountants: exact Gaussian mechanism, mu-GDP, DP-SGD accountants, calibration, CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dpaudit.accounting import dpsgd, gaussian
from dpaudit.cli import main


# --- exact Gaussian mechanism (Balle and Wang 2018, Theorem 8) -------------------------------
def test_one_run_fig10_gaussian_upper_bound():
    """Steinke, Nasr, Jagielski (2023) Fig. 10: sensitivity 2, sigma 2 (mu = 1). The paper's
    upper bound is epsilon = 4.38 at delta = 1e-5, and a 2.675 bound would need delta =
    0.0039334 (our recomputation: 4.3772 and 0.0039334)."""
    assert gaussian.gaussian_epsilon(1e-5, 1.0) == pytest.approx(4.3772, abs=5e-5)
    assert gaussian.gaussian_delta(2.67585, 1.0) == pytest.approx(0.0039334, abs=5e-8)


@pytest.mark.parametrize(
    "delta, ub",
    [
        (1e-7, 5.35),
        (1e-6, 4.89),
        (1e-5, 4.38),
        (1e-4, 3.80),
        (1e-3, 3.14),
        (1e-2, 2.32),
        (1e-1, 1.16),
    ],
)
def test_one_run_fig11_gaussian_ub_column(delta, ub):
    """Steinke et al. 2023, Fig. 11: the Gaussian upper bound (mu = 1), two decimals."""
    assert round(gaussian.gaussian_epsilon(delta, 1.0), 2) == ub


def test_gaussian_delta_matches_monte_carlo_privacy_loss():
    """delta(eps) = E_P[(1 - e^{eps - L})_+] with L the privacy loss ~ N(mu^2/2, mu^2)."""
    rng = np.random.default_rng(0)
    mu, eps = 1.5, 1.0
    loss = rng.normal(mu * mu / 2, mu, 2_000_000)
    mc = np.mean(np.maximum(0.0, 1.0 - np.exp(eps - loss)))
    se = np.std(np.maximum(0.0, 1.0 - np.exp(eps - loss))) / np.sqrt(loss.size)
    assert abs(gaussian.gaussian_delta(eps, mu) - mc) < 5 * se


def test_gaussian_inverses_round_trip():
    for mu in (0.1, 0.5, 1.0, 3.0):
        eps = gaussian.gaussian_epsilon(1e-5, mu)
        assert gaussian.gaussian_delta(eps, mu) == pytest.approx(1e-5, rel=1e-8)
        assert gaussian.gaussian_mu(eps, 1e-5) == pytest.approx(mu, rel=1e-8)
    # delta so large that epsilon = 0 already holds
    assert gaussian.gaussian_epsilon(0.5, 0.1) == 0.0


def test_gdp_matches_opacus_dual():
    """mu-GDP -> (epsilon, delta) (Dong, Roth, Su Cor. 2.13) agrees with Opacus' eps_from_mu."""
    from opacus.accountants.analysis.gdp import eps_from_mu

    for mu in (0.3, 1.0, 2.0):
        assert gaussian.gdp_epsilon(1e-5, mu) == pytest.approx(
            eps_from_mu(mu=mu, delta=1e-5), rel=1e-6
        )


def test_gaussian_large_epsilon_no_overflow():
    assert gaussian.gaussian_delta(800.0, 2.0) == 0.0
    assert np.all(np.isfinite(gaussian.gaussian_delta(np.array([0.0, 10.0, 1e3]), 5.0)))


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: gaussian.gaussian_epsilon(0.0, 1.0), "delta"),
        (lambda: gaussian.gaussian_epsilon(1e-5, 0.0), "mu"),
        (lambda: gaussian.gaussian_epsilon(1e-5, float("nan")), "mu"),
        (lambda: gaussian.gaussian_delta(-1.0, 1.0), "epsilon"),
        (lambda: gaussian.gaussian_mu(0.0, 1e-5), "epsilon"),
    ],
)
def test_gaussian_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# --- DP-SGD accountants ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "sigma, T, expected",
    [(0.5, 100, 6.476), (1.0, 100, 0.718), (1.5, 100, 0.292), (1.0, 1000, 0.149)],
)
def test_pld_values_of_note_003(sigma, T, expected):
    """Our PLD values (dp_accounting PLD, q = 1/T, T steps, delta = 1e-5); the shuffle
    paper's Fig. 3 prints the PRV values 6.49, 0.73, 0.30 for T = 100."""
    assert dpsgd.epsilon_pld(sigma, 1 / T, T, 1e-5) == pytest.approx(expected, abs=1e-3)


def test_shuffle_fig3_prv_values():
    """Annamalai et al., Fig. 3 (PRV, T = 100): 0.73 and 0.30 at sigma = 1.0, 1.5."""
    assert dpsgd.epsilon_prv(1.0, 0.01, 100, 1e-5) == pytest.approx(0.73, abs=0.01)
    assert dpsgd.epsilon_prv(1.5, 0.01, 100, 1e-5) == pytest.approx(0.30, abs=0.01)


@pytest.mark.parametrize("sigma, q, T", [(1.0, 0.01, 100), (0.8, 0.004, 2500), (2.0, 0.1, 50)])
def test_accountants_order(sigma, q, T):
    """PLD and PRV are tight, RDP is looser: PLD <= RDP, and PRV within its error of PLD."""
    df = dpsgd.accountant_table(sigma, q, T, 1e-5)
    e = dict(zip(df.accountant, df.epsilon, strict=True))
    assert e["pld"] <= e["rdp"]
    assert e["prv"] <= e["rdp"] + 1e-9
    assert abs(e["prv"] - e["pld"]) <= 0.03 + 0.01 * e["pld"]


@pytest.mark.parametrize("sigma", [1.0, 1.5])
def test_gdp_close_to_pld_for_many_steps(sigma):
    """The CLT is accurate for many steps with small q (Bu et al. 2020): within 5% at T=1e4."""
    pld = dpsgd.epsilon_pld(sigma, 0.01, 10_000, 1e-5)
    gdp = dpsgd.epsilon_gdp(sigma, 0.01, 10_000, 1e-5)
    assert gdp == pytest.approx(pld, rel=0.05)


def test_full_batch_is_the_gaussian_mechanism():
    """q = 1: T steps of noise sigma are one Gaussian mechanism with mu = sqrt(T)/sigma."""
    sigma, T = 20.0, 100
    exact = gaussian.gaussian_epsilon(1e-5, np.sqrt(T) / sigma)
    assert dpsgd.epsilon_pld(sigma, 1.0, T, 1e-5) == pytest.approx(exact, abs=2e-3)
    assert dpsgd.epsilon_rdp(sigma, 1.0, T, 1e-5) > exact
    assert dpsgd.dpsgd_gdp_mu(sigma, 1.0, T, poisson=False) == pytest.approx(
        np.sqrt(T) / sigma, rel=0.03
    )  # the CLT mu is an approximation even at q = 1 (0.510 vs 0.5 here)


def test_table_reports_a_failing_accountant_instead_of_failing():
    """sigma = 0.02: e^{1/sigma^2} overflows in the GDP CLT; the other accountants still run."""
    df = dpsgd.accountant_table(0.02, 0.01, 10, 1e-5, accountants=("rdp", "gdp"))
    gdp = df[df.accountant == "gdp"].iloc[0]
    assert np.isnan(gdp.epsilon) and "GDP mu is not finite" in gdp.error
    assert np.isfinite(df[df.accountant == "rdp"].epsilon.iloc[0])
    with pytest.raises(ValueError, match="unknown accountant"):
        dpsgd.accountant_table(1.0, 0.01, 10, 1e-5, accountants=("foo",))


def test_table_columns():
    df = dpsgd.accountant_table(1.0, 0.01, 100, 1e-5)
    assert list(df.accountant) == list(dpsgd.EPSILON_ACCOUNTANTS)
    assert df.loc[df.accountant == "pld", "ratio_to_pld"].iloc[0] == 1.0
    assert not df.loc[df.accountant == "gdp", "is_upper_bound"].iloc[0]


@pytest.mark.parametrize("acc", ["rdp", "prv", "pld"])
@pytest.mark.slow
def test_noise_multiplier_calibration(acc):
    """Calibrated sigma reaches the target within tolerance, on the conservative side.
    Our PLD calibration: T = 10 (B = 1000 of n = 10^4), epsilon = 1 -> sigma = 1.741."""
    sigma = dpsgd.noise_multiplier(1.0, 1e-5, 0.1, 10, accountant=acc, epsilon_tolerance=0.005)
    eps = dpsgd.epsilon(acc, sigma, 0.1, 10, 1e-5)
    assert 1.0 - 0.005 - 0.01 <= eps <= 1.0 + 1e-9
    if acc == "pld":
        assert sigma == pytest.approx(1.741, abs=0.005)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: dpsgd.epsilon_pld(0.0, 0.01, 100, 1e-5), "noise multiplier"),
        (lambda: dpsgd.epsilon_rdp(1.0, 1.5, 100, 1e-5), "sample rate"),
        (lambda: dpsgd.epsilon_prv(1.0, 0.01, 0, 1e-5), "steps"),
        (lambda: dpsgd.epsilon_gdp(1.0, 0.01, 10.5, 1e-5), "steps"),
        (lambda: dpsgd.epsilon_pld(1.0, 0.01, 100, 0.0), "delta"),
        (lambda: dpsgd.epsilon("moments", 1.0, 0.01, 100, 1e-5), "unknown accountant"),
        (lambda: dpsgd.noise_multiplier(-1.0, 1e-5, 0.01, 100), "target epsilon"),
        (lambda: dpsgd.noise_multiplier(1.0, 1e-5, 0.01, 100, "foo"), "unknown accountant"),
    ],
)
def test_dpsgd_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# --- CLI -----------------------------------------------------------------------------------
def test_cli_accountant_json(capsys):
    rc = main(
        [
            "accountant",
            "--noise-multiplier",
            "1.0",
            "--sample-rate",
            "0.01",
            "--steps",
            "100",
            "--delta",
            "1e-5",
            "--json",
        ]
    )
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["epsilon"] == out["epsilon_pld"] == pytest.approx(0.718, abs=1e-3)
    assert {"epsilon_prv", "epsilon_rdp", "epsilon_gdp"} <= set(out)
    assert out["epsilon_pld"] <= out["epsilon_rdp"]


def test_cli_accountant_bad_input(capsys):
    rc = main(
        [
            "accountant",
            "--noise-multiplier",
            "1.0",
            "--sample-rate",
            "0",
            "--steps",
            "100",
            "--delta",
            "1e-5",
        ]
    )
    assert rc == 2
    assert "sample rate" in capsys.readouterr().err


def test_gdp_poisson_mu_formula():
    """Opacus' Poisson CLT mu = q sqrt(T (e^{1/sigma^2} - 1))."""
    mu = dpsgd.dpsgd_gdp_mu(1.0, 0.01, 10_000)
    assert mu == pytest.approx(0.01 * np.sqrt(10_000 * (np.e - 1)))


# --- one GDP curve (Dong, Roth, Su 2022), argument order: the curve's argument, then mu ------
def test_gdp_curve_known_values_and_argument_order():
    """delta(eps = 0) of 1-GDP is the total variation 2 Phi(mu/2) - 1 (Corollary 2.13 at
    eps = 0); the argument order is (epsilon, mu) / (delta, mu) / (alpha, mu)."""
    from scipy.stats import norm

    assert gaussian.gdp_delta(0.0, 1.0) == pytest.approx(2 * norm.cdf(0.5) - 1, rel=1e-14)
    assert gaussian.gdp_delta(0.0, 2.0) == pytest.approx(2 * norm.cdf(1.0) - 1, rel=1e-14)
    # swapping the arguments gives a different number: the order is fixed
    assert gaussian.gdp_delta(1.0, 3.0) != pytest.approx(gaussian.gdp_delta(3.0, 1.0))
    assert gaussian.gdp_epsilon(1e-5, 1.0) == pytest.approx(4.3772, abs=5e-5)
    # trade-off G_mu(alpha) = Phi(Phi^-1(1 - alpha) - mu)
    assert gaussian.gdp_tradeoff(0.5, 1.0) == pytest.approx(norm.cdf(-1.0), rel=1e-14)
    alpha = np.array([0.01, 0.1, 0.3])
    beta = gaussian.gdp_tradeoff(alpha, 1.7)
    np.testing.assert_allclose(gaussian.gdp_mu_from_rates(alpha, beta), 1.7, rtol=1e-12)


def test_gdp_delta_matches_high_precision_in_the_tail():
    """Against 50-digit arithmetic (mpmath), including a tail point where delta ~ 1e-200 is far
    below its two terms and the linear difference Phi(.) - e^eps Phi(.) would underflow."""
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 50

    def exact(eps: float, mu: float) -> float:
        e, m = mpmath.mpf(eps), mpmath.mpf(mu)
        return float(mpmath.ncdf(-e / m + m / 2) - mpmath.exp(e) * mpmath.ncdf(-e / m - m / 2))

    for eps, mu in ((0.0, 1.0), (4.3772, 1.0), (10.0, 0.5), (60.0, 2.0), (3.0, 8.0)):
        assert gaussian.gdp_delta(eps, mu) == pytest.approx(exact(eps, mu), rel=1e-9)
    assert 0 < gaussian.gdp_delta(60.0, 2.0) < 1e-150


def test_gdp_curve_has_one_implementation():
    """Every user imports the curve from dpaudit.accounting.gaussian (issue: the same math in
    several places, with three argument orders)."""
    from dpaudit.estimators.fdp_one_run import families
    from dpaudit.estimators.multi_run import bound as multi_run
    from dpaudit.mechanisms import one_run_ideal

    assert families.gdp_delta is gaussian.gdp_delta
    assert multi_run.gdp_epsilon is gaussian.gdp_epsilon
    assert multi_run.gdp_mu_from_rates is gaussian.gdp_mu_from_rates
    assert one_run_ideal.gdp_epsilon is gaussian.gdp_epsilon
