"""The LiDP Gaussian study through the pipeline (Pillutla et al., NeurIPS 2023, Sec. 4 and
App. E.1): held-out tuning trials written into the score file and used by ``threshold:
heldout``, K = sqrt(n), the below-order skip, the correlation diagnostics and the Fig. 4
analyses, and the paper configuration ``config/paper/lidp.yaml``.
"""

from __future__ import annotations

import copy
import math
from pathlib import Path

import numpy as np
import pytest
import yaml
from scipy import stats

from dpaudit import analyses
from dpaudit.analyses import lidp_gaussian as al
from dpaudit.audit import audit
from dpaudit.config import load_schema, validate_config
from dpaudit.estimators.lidp import bound as lidp
from dpaudit.estimators.lidp import xbern
from dpaudit.estimators.lidp.audit import run_lidp, split_in_out
from dpaudit.estimators.lidp.xbern import XBernInputError
from dpaudit.mechanisms import lidp_gaussian as lg
from dpaudit.pipeline.settings import simulate_settings

ROOT = Path(__file__).resolve().parents[2]
BETA = 0.05


def correlated_scores(rng, n, K, mean, rho):
    """a_i + b_ik, a_i ~ N(0, rho), b_ik ~ N(mean, 1 - rho): exchangeable, marginals N(mean, 1)."""
    return rng.normal(0.0, math.sqrt(rho), size=(n, 1)) + rng.normal(
        mean, math.sqrt(1 - rho), size=(n, K)
    )


# ---------------------------------------------------------------------------------------------
# score files with held-out rows
# ---------------------------------------------------------------------------------------------


def test_heldout_rows_are_shared_across_seeds_and_evaluation_rows_are_fresh():
    """App. E.1 protocol: one tuning set (heldout_seed) in every file, fresh evaluation rows
    per seed, and the evaluation rows equal the file without held-out rows (same seed)."""
    kw = dict(n=64, K="sqrt_n", d=100, epsilon=2.0, delta=1e-5, heldout_trials="n")
    a = lg.score_file(seed=0, heldout_seed=1000, **kw)
    b = lg.score_file(seed=1, heldout_seed=1000, **kw)
    assert a.meta["K"] == 8 and a.meta["heldout_trials"] == 64 and a.score.shape == (128, 16)
    np.testing.assert_array_equal(a.score[:64], b.score[:64])
    assert not np.array_equal(a.score[64:], b.score[64:])
    plain = lg.score_file(n=64, K=8, d=100, epsilon=2.0, delta=1e-5, seed=0)
    np.testing.assert_array_equal(a.score[64:], plain.score)
    assert plain.meta["heldout_trials"] == 0
    # without heldout_seed each file draws its own tuning rows, disjoint from its eval stream
    c = lg.score_file(seed=0, **kw)
    assert not np.array_equal(c.score[:64], a.score[:64])
    assert not np.array_equal(c.score[:64], c.score[64:])


def test_runner_tunes_on_exactly_the_declared_rows():
    sf = lg.score_file(
        n=200, K=8, d=1000, epsilon=4.0, delta=1e-5, seed=3, heldout_trials=150, heldout_seed=9
    )
    si, so = split_in_out(sf)
    (row,) = run_lidp(sf, {"interval": "wilson", "order": 2, "grid_size": 100})
    tau, tuned = lidp.tune_threshold(
        si[:150], so[:150], lidp.BoundSpec(1e-5, 0.95, "wilson", 2), 100
    )
    ref = lidp.epsilon_lower_bound(
        si[150:] >= tau, so[150:] >= tau, lidp.BoundSpec(1e-5, 0.95, "wilson", 2)
    )
    assert row["threshold"] == tau and row["tuned_epsilon"] == tuned
    assert row["epsilon"] == ref.epsilon and row["epsilon"] > 0
    assert row["n_tune"] == 150 and row["n_trials"] == 200
    assert row["heldout_source"] == "file_rows" and row["valid"]
    # a fixed threshold and in_sample also evaluate only the 200 evaluation rows
    (fixed,) = run_lidp(sf, {"threshold": tau, "grid_size": 100})
    assert fixed["epsilon"] == ref.epsilon and fixed["n_trials"] == 200
    (ins,) = run_lidp(sf, {"threshold": "in_sample", "grid_size": 100})
    assert ins["n_trials"] == 200 and ins["n_tune"] == 200 and not ins["valid"]
    # files without declared rows keep the random split
    plain = lg.score_file(n=200, K=8, d=1000, epsilon=4.0, delta=1e-5, seed=3)
    (split,) = run_lidp(plain, {"grid_size": 100})
    assert split["heldout_source"] == "random_split" and split["n_trials"] == 100


def test_protocol_bound_valid_at_the_shared_tuned_threshold():
    """Monte Carlo validity of the paper's protocol (one tuning set, fresh evaluation sets):
    on correlated exchangeable scores with a known ROC, eps_hat exceeds the true
    eps(tau*) = log((TPR(tau*) - delta)/FPR(tau*)) in <= beta + 3 s.d. of 250 evaluation
    repetitions, for each of 4 independent tuning sets (tau* fixed within each)."""
    rng = np.random.default_rng(5)
    delta, reps, n, K, mu_in, rho = 1e-5, 250, 120, 8, 1.0, 0.2
    for _ in range(4):
        ti, to = correlated_scores(rng, n, K, mu_in, rho), correlated_scores(rng, n, K, 0, rho)
        above, tau = 0, None
        for _ in range(reps):
            si = np.concatenate([ti, correlated_scores(rng, n, K, mu_in, rho)])
            so = np.concatenate([to, correlated_scores(rng, n, K, 0.0, rho)])
            res = lidp.audit_scores(
                si, so, delta, 0.95, "wilson", 2, grid_size=100, heldout_trials=n
            )
            assert tau is None or res.threshold == tau  # one tau* for all repetitions
            tau = res.threshold
            true = math.log((stats.norm.sf(tau - mu_in) - delta) / stats.norm.sf(tau))
            above += res.epsilon > true
        assert above / reps <= BETA + 3 * math.sqrt(BETA * (1 - BETA) / reps)


def test_protocol_null_bound_is_zero():
    """Members and non-members from one distribution: eps_hat = 0 in >= 95% of 200 reps."""
    rng = np.random.default_rng(6)
    n, K = 100, 8
    zeros = 0
    for _ in range(200):
        si = correlated_scores(rng, 2 * n, K, 0.0, 0.3)
        so = correlated_scores(rng, 2 * n, K, 0.0, 0.3)
        res = lidp.audit_scores(si, so, 1e-5, 0.95, "wilson", 2, grid_size=100, heldout_trials=n)
        zeros += res.epsilon == 0.0
    assert zeros / 200 >= 0.95


def test_gaussian_mechanism_protocol_bound_below_exact_epsilon():
    """Score files of the pipeline (K = sqrt(n) = 8, d = 100, claimed eps = 8 by RDP, exact
    eps 7.44 by Balle-Wang): eps_hat > exact eps in <= beta + slack of 200 seeds; not trivial."""
    sigma = lg.sigma_for_epsilon(8.0, 1e-5)
    exact = lg.epsilon_exact(sigma, 1e-5)
    eps = []
    for seed in range(200):
        sf = lg.score_file(
            n=64,
            K="sqrt_n",
            d=100,
            epsilon=8.0,
            delta=1e-5,
            seed=seed,
            heldout_trials="n",
            heldout_seed=1000,
        )
        eps.append(run_lidp(sf, {"grid_size": 100})[0]["epsilon"])
    eps = np.array(eps)
    assert np.mean(eps > exact) <= BETA + 3 * math.sqrt(BETA * (1 - BETA) / 200)
    assert eps.mean() > 0.5


# ---------------------------------------------------------------------------------------------
# diagnostics, skip, bad input
# ---------------------------------------------------------------------------------------------


def test_correlation_diagnostics_match_the_moments():
    rng = np.random.default_rng(7)
    x = correlated_scores(rng, 300, 6, 0.0, 0.5) > 0
    y = correlated_scores(rng, 300, 6, -1.0, 0.5) > 0
    b = lidp.epsilon_lower_bound(x, y, lidp.BoundSpec(1e-5, 0.95, "wilson", 1))
    mu = xbern.moments(x, 4)
    assert b.mu2_hat == pytest.approx(mu[1]) and b.mu4_hat == pytest.approx(mu[3])
    assert b.corr2 == pytest.approx(abs(mu[1] - mu[0] ** 2))
    assert b.corr4 == pytest.approx(abs(mu[3] - mu[1] ** 2))
    assert b.corr2 > 0.01  # rho = 0.5: clearly correlated
    small = lidp.epsilon_lower_bound(x[:, :2], y[:, :2], lidp.BoundSpec(1e-5, 0.95, "wilson", 1))
    assert math.isfinite(small.corr2) and math.isnan(small.corr4)


def test_below_order_skip_and_error():
    sf = lg.score_file(n=50, K=1, d=100, epsilon=2.0, delta=1e-5, seed=0)
    assert run_lidp(sf, {"order": 2, "below_order": "skip"}) == []
    assert audit([sf], {"w2": {"method": "lidp", "order": 2, "below_order": "skip"}}).empty
    with pytest.raises(XBernInputError, match="needs K >= 2"):
        run_lidp(sf, {"order": 2})
    with pytest.raises(ValueError, match="below_order must be one of"):
        run_lidp(sf, {"order": 1, "below_order": "ignore"})
    assert len(run_lidp(sf, {"order": 1, "below_order": "skip"})) == 1


def test_bad_input():
    kw = dict(d=100, epsilon=2.0, delta=1e-5, seed=0)
    with pytest.raises(ValueError, match="K must be a positive integer or 'sqrt_n'"):
        lg.score_file(n=10, K="sqrt", **kw)
    with pytest.raises(ValueError, match="heldout_trials must be an integer >= 0 or 'n'"):
        lg.score_file(n=10, K=2, heldout_trials=-1, **kw)
    with pytest.raises(ValueError, match="heldout_seed must be an integer or null"):
        lg.score_file(n=10, K=2, heldout_trials=3, heldout_seed="a", **kw)
    with pytest.raises(ValueError, match="exceeds the released code's guard"):
        lg.score_file(n=2**17, K=1024, **kw)
    s = np.zeros((10, 2))
    with pytest.raises(XBernInputError, match=r"heldout_trials must lie in \[0, 9\]"):
        lidp.audit_scores(s, s, 1e-5, heldout_trials=10)
    with pytest.raises(XBernInputError, match="heldout_trials must be an integer"):
        lidp.audit_scores(s, s, 1e-5, heldout_trials=2.5)


def test_cli_uses_declared_rows_and_refuses_to_stack_them(tmp_path, capsys):
    import json

    from dpaudit.cli import main

    kw = dict(n=100, K=8, d=1000, epsilon=4.0, delta=1e-5, heldout_trials="n", heldout_seed=1)
    a = lg.write_score_file(tmp_path / "a.npz", seed=0, **kw)
    b = lg.write_score_file(tmp_path / "b.npz", seed=1, **kw)
    assert main(["lidp-bound", str(a), "--json"]) == 0
    row = json.loads(capsys.readouterr().out)
    assert row["n_tune"] == 100 and row["n_trials"] == 100 and row["heldout_source"] == "file_rows"
    assert main(["lidp-bound", str(a), str(b)]) == 2
    assert "cannot be stacked" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------
# Fig. 4 analyses
# ---------------------------------------------------------------------------------------------


def test_loglog_slope_recovers_a_power_law():
    x = np.array([4, 16, 64, 256])
    assert al.loglog_slope(x, 3.0 * x**-0.93) == pytest.approx(-0.93)
    assert math.isnan(al.loglog_slope([4], [1.0]))


def test_correlation_curve_small_case():
    """Fig. 4 centre on a small grid: tidy table, slopes of the terms' means, reference 1/x;
    the correlation decays with K (the paper's finding, slope about -1)."""
    t = analyses.run(
        "lidp_gaussian_correlations",
        dict(vary="K", values=[4, 16, 64], n=512, d=10000, reps=2, epsilon=4.0),
    )
    assert set(t["series"]) == {*al.TERMS, "1/x reference"}
    assert "epsilon" not in t.columns  # the generic plot would take it as y
    c2 = t[t["series"] == al.TERMS[0]].sort_values("x")
    assert c2["slope"].iloc[0] == pytest.approx(al.loglog_slope(c2["x"], c2["y"]))
    assert c2["slope"].iloc[0] < -0.3
    terms = t[t["series"].isin(al.TERMS)]
    assert (terms["y"] <= terms["y_mean_abs"] + 1e-15).all()  # |mean| <= mean |.|
    ref = t[t["series"] == "1/x reference"].sort_values("x")
    assert ref["y"].iloc[0] == pytest.approx(c2["y"].iloc[0])
    assert ref["y"].iloc[-1] == pytest.approx(c2["y"].iloc[0] * 4 / 64)


def test_bias_variance_curve_definitions():
    t = al.bias_variance_curve([4], n=256, d=1000, reps=2)
    assert "epsilon" not in t.columns
    row = t.set_index("series")["y"]
    assert row["net gain, order 2"] == pytest.approx(row["DeltaBias(K)"] + row["DeltaVar(K, 2)"])
    assert row["net gain, order 4"] == pytest.approx(row["DeltaBias(K)"] + row["DeltaVar(K, 4)"])


def test_analysis_bad_input():
    with pytest.raises(ValueError, match="vary must be 'K' or 'd'"):
        al.correlation_curve("n", [4], n=100, d=100)
    with pytest.raises(ValueError, match="needs the fixed d"):
        al.correlation_curve("K", [4], n=100)
    with pytest.raises(ValueError, match="needs K >= 4"):
        al.correlation_curve("K", [2], n=100, d=100)
    with pytest.raises(ValueError, match="reps must be"):
        al.bias_variance_curve([4], n=100, d=100, reps=0)
    with pytest.raises(ValueError, match="tuning_sets must be"):
        al.bias_variance_curve([4], n=100, d=100, tuning_sets=0)
    with pytest.raises(ValueError, match="tuning_sets must be"):  # the same check (issue 38)
        al.correlation_curve("d", [100], n=100, K=4, tuning_sets=1.5)
    t = al.correlation_curve("d", [100, 1000], n=128, K=4, reps=2, tuning_sets=2)
    assert set(t.loc[t["series"] == al.TERMS[0], "reps"]) == {4}


# ---------------------------------------------------------------------------------------------
# the paper configuration
# ---------------------------------------------------------------------------------------------


def test_paper_config_is_valid_and_within_the_papers_grid():
    """config/paper/lidp.yaml validates against the schema; every setting obeys the released
    code's guard n * K <= 1e8; the grids are the paper's (App. E.1)."""
    config = yaml.safe_load((ROOT / "config/paper/lidp.yaml").read_text())
    validate_config(copy.deepcopy(config), load_schema(ROOT / "config/schema.yaml"))
    ns, Ks, ds = set(), set(), set()
    for name, exp in config["experiments"].items():
        if exp["kind"] != "simulate":
            continue
        assert exp["seeds"] == list(range(25)), name
        # a varying `epsilon` takes the audit table's `epsilon` column (the bound is renamed)
        assert exp["figure"].get("y") == ("epsilon_estimator" if "epsilon" in exp["grid"] else None)
        for params in simulate_settings(exp).values():
            K = lg.resolve_K(params["K"], params["n"])
            assert params["n"] * K <= lg.MAX_NK
            # a fresh tuning set of n trials in every repetition (config header: why)
            assert params["heldout_trials"] == "n" and params["heldout_seed"] is None
            ns.add(params["n"]), Ks.add(K), ds.add(params["d"])
    assert ns <= {2**j for j in range(8, 17, 2)} and max(ns) == 65536
    assert Ks <= {2**j for j in range(11)} and max(Ks) == 1024
    assert ds == {10**j for j in range(2, 7)}
