"""Table 1 of Mahloujifar, Melis, Chaudhuri (ICML 2025, arXiv:2410.22235): the idealised
Gaussian setting of App. D (Alg. 4) against the paper's printed numbers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from dpaudit.analyses import fdp_abstention_ideal as F
from dpaudit.analyses import registry
from dpaudit.analyses.one_run_theory import gaussian_accuracy
from dpaudit.estimators.fdp_abstention import bound as fdp_abstention

REPO = Path(__file__).resolve().parents[2]


def test_counts_reproduce_the_papers_own_counts():
    """App. B (Figs. 10-11) states c = 1429 correct of c' = 1500 at m = 10^5, sigma = 1: Alg. 4
    as we run it gives the same count (within 3: the 100-repetition mean of the count has
    standard deviation 1.2 guesses), and the averaged accuracy is the
    closed-form expected accuracy of the top c'/2 (to Monte Carlo error)."""
    (c,) = F.ideal_counts(100_000, 1.0, [1500], repetitions=100, seed=0)
    assert abs(c - 1429) <= 3
    frac = F.ideal_fractions(100_000, 1.0, [1500], repetitions=20, seed=1)[:, 0].mean()
    assert frac == pytest.approx(gaussian_accuracy(1500, 100_000, 2.0), abs=0.005)


def test_the_papers_bound_on_the_papers_counts_is_below_the_printed_column():
    """The documented gap: the recursion (tau = 0.05) on App. B's counts gives 3.30 at sigma = 1;
    the printed 3.61 needs mu = 0.846, a rejection the counts cannot give at 95%."""
    b = fdp_abstention.epsilon_lower_bound(100_000, 1500, 1500 - 1429, "gdp", 1e-5, 0.95)
    assert b.epsilon == pytest.approx(3.299, abs=0.005)
    assert b.epsilon < F.PAPER_TABLE1[1.0][4] - 0.25


def test_guess_grid_is_even_and_within_m():
    grid = F.guess_grid(1000, 12)
    assert grid == sorted(set(grid)) and all(g % 2 == 0 and 10 <= g <= 1000 for g in grid)
    assert grid[-1] == 1000
    with pytest.raises(ValueError, match="need m >= 2"):
        F.guess_grid(1, 5)


def test_pointwise_is_at_least_the_single_test_at_the_reporting_delta():
    """The union of the 60 tests contains the test at (about) 1e-5 itself: the pointwise
    bound is at least the Steinke et al. bound of the same game (here within bisection error,
    1e-5 lies between two of the 60 deltas) and is a max over deltas."""
    m, g, c = 100_000, 1424, 1360
    from dpaudit.estimators.fdp_one_run.families import from_epsilon, to_epsilon
    from dpaudit.estimators.one_run import bound as one_run

    single = one_run.epsilon_lower_bound(m, g, c, 1e-5, 0.95)
    mu, eps = F.steinke_pointwise(m, g, c)
    assert eps >= single - 0.02
    mu_one, _ = F.steinke_pointwise(m, g, c, deltas=[1e-5])
    assert mu_one == pytest.approx(from_epsilon("gdp", single, 1e-5))
    assert to_epsilon("gdp", mu_one, 1e-5) == pytest.approx(single, abs=1e-6)
    assert mu >= mu_one - 1e-9


@pytest.mark.slow
def test_table1_sigma2_against_the_printed_row():
    """Table 1, sigma = 2, m = 10^5 (about 5 s): theoretical within 0.01 (the paper truncates),
    Steinke et al. and its pointwise variant within 0.1, the paper's bound 0.1 below (the
    documented gap: the paper's algorithm on the paper's counts)."""
    t = F.table1([2.0], [100_000], repetitions=100, seed=0, grid_size=40)
    y = dict(zip(t["series"], t["y"], strict=True))
    m, theo, st, pw, ours = F.PAPER_TABLE1[2.0]
    assert abs(y["theoretical"] - theo) <= 0.01
    assert abs(y["Steinke et al."] - st) <= 0.1
    assert abs(y["Steinke et al. (pointwise)"] - pw) <= 0.1
    assert y["Steinke et al. (pointwise)"] >= y["Steinke et al."] - 1e-9
    assert ours - 0.15 < y["ours (Mahloujifar et al.)"] < ours - 0.05  # the gap, as documented
    assert np.allclose(t["difference"], t["y"] - t["paper"])


def test_registry_and_paper_config_agree_with_the_library():
    """The analysis is registered, and config/paper/fdp_abstention.yaml's reproduce rows carry
    exactly the printed values kept in the library (16 cells: 4 sigmas x 4 columns)."""
    assert registry.get("fdp_abstention_table1") is F.table1
    cfg = yaml.safe_load((REPO / "config/paper/fdp_abstention.yaml").read_text())
    exp = cfg["experiments"]["fdp_abstention_table1"]
    assert exp["params"]["sigmas"] == list(F.PAPER_TABLE1)
    assert exp["params"]["ms"] == [v[0] for v in F.PAPER_TABLE1.values()]
    checks = exp["reproduce"]
    assert len(checks) == 16
    for c in checks:
        sigma, series = c["where"]["x"], c["where"]["series"]
        assert c["paper"] == F.PAPER_TABLE1[sigma][1 + F.SERIES.index(series)], c["quantity"]


def test_argmax_accuracy_against_its_definition():
    """k = 2: P[1 + s Z0 > s Z1] = Phi(1 / (2 sigma)) in closed form; k = 10 against a
    Monte Carlo draw of the k coordinates (4 standard errors)."""
    from scipy import special

    assert F.argmax_accuracy(2, 1.0) == pytest.approx(special.ndtr(0.5), abs=1e-9)
    rng = np.random.default_rng(3)
    s, n = 0.6 * np.sqrt(2), 200_000
    obs = rng.normal(0.0, s, size=(n, 10))
    obs[:, 0] += 1.0
    mc = np.mean(np.argmax(obs, axis=1) == 0)
    acc = F.argmax_accuracy(10, 0.6)
    assert abs(mc - acc) <= 4 * np.sqrt(acc * (1 - acc) / n)


def test_reconstruction_curve_rises_with_k_and_k2_is_membership():
    """App. B, Fig. 5's claim (more options per canary, more entropy): the bound rises with
    k at m = 100; at k = 2 it is the membership bound of the same counts; never above the
    theoretical epsilon; registered for config/paper/fdp_abstention.yaml."""
    t = F.reconstruction_curve(sigma=0.6, m=100, ks=(2, 5, 20, 50))
    ours = t[t["series"] == "ours, m = 100"].sort_values("x")
    assert np.all(np.diff(ours["y"].to_numpy()) > 0)
    k2 = ours.iloc[0]
    member = fdp_abstention.epsilon_lower_bound(100, 100, 100 - int(k2["correct"]), "gdp", 1e-5)
    assert k2["y"] == member.epsilon
    theory = t[t["series"] == "theoretical"]["y"].iloc[0]
    assert ours["y"].max() < theory
    assert registry.get("fdp_abstention_reconstruction") is F.reconstruction_curve


def test_noise_free_counts_agree_with_the_simulated_ones():
    """Figs. 1 and 6-9 use c = ceil(c' x the expected accuracy): at App. B's point it is the
    simulated 100-repetition count within 3 (and the paper's 1429 within 2)."""
    (c,) = F.expected_counts(100_000, 1.0, [1500])
    assert abs(c - F.ideal_counts(100_000, 1.0, [1500], repetitions=100, seed=0)[0]) <= 3
    assert abs(c - 1429) <= 2


def test_figs10_11_on_the_papers_counts():
    """m = 10^5, c' = 1500, c = 1429: the paper's bound is 3.30 at (1e-5, 95%), falls as the
    confidence grows, stays at least Steinke et al.'s at every delta and below the theory."""
    t = F.versus_delta_confidence("confidence", (0.5, 0.9, 0.95, 0.99))
    ours = t[t["series"] == "ours (Mahloujifar et al.)"].sort_values("x")["y"].to_numpy()
    assert np.all(np.diff(ours) < 0) and ours[2] == pytest.approx(3.299, abs=0.005)
    t = F.versus_delta_confidence("delta", (1e-9, 1e-5, 1e-3))
    y = {s: g.sort_values("x")["y"].to_numpy() for s, g in t.groupby("series")}
    assert np.all(y["ours (Mahloujifar et al.)"] >= y["Steinke et al."])
    assert np.all(y["ours (Mahloujifar et al.)"] < y["theoretical"])
    with pytest.raises(ValueError, match="vary must be 'delta' or 'confidence'"):
        F.versus_delta_confidence("m", (1.0,))


@pytest.mark.slow
def test_fig1_and_figs6_9_shapes():
    """Fig. 1: the paper's bound grows with m while Steinke et al.'s falls from 10^5 to 10^7
    (its m x delta term); App. B at m = 10^7: Steinke et al. is 0 at c' = 1000, the paper's
    bound is not (sigma = 2). About 4 s."""
    t = F.versus_m(2.0, ms=(1000, 100_000, 10_000_000), grid_size=20)
    y = {s: g.sort_values("x")["y"].to_numpy() for s, g in t.groupby("series")}
    assert np.all(np.diff(y["ours (Mahloujifar et al.)"]) > 0)
    assert y["Steinke et al."][2] < y["Steinke et al."][1]
    g = F.versus_guesses(2.0, 10_000_000, (1000,))
    by = dict(zip(g["series"], g["y"], strict=True))
    assert by["Steinke et al."] == 0.0 and by["ours (Mahloujifar et al.)"] > 1.5
