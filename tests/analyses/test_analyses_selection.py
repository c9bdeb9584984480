"""Pipeline analyses of the private-selection paper (Xiang, Wang, Wang 2024, arXiv:2402.13087):
dpaudit/analyses/selection.py, its registration as analyses, and the Fig. 6 audit mechanism
(dpaudit/mechanisms/selection_game.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from dpaudit import analyses
from dpaudit.accounting import selection as sel
from dpaudit.analyses import selection as S
from dpaudit.audit import run_estimator
from dpaudit.mechanisms import registry
from dpaudit.mechanisms import selection_game as game

REPO = Path(__file__).resolve().parents[2]


def _y(df, **where):
    rows = df
    for k, v in where.items():
        rows = rows[rows[k] == v]
    assert len(rows) == 1, where
    return float(rows["y"].iloc[0])


def test_registered_names_resolve():
    for name in ("selection_example1", "selection_example1_law", "selection_table3_epsilon_u",
                 "selection_table4", "selection_fig6_bounds"):
        assert callable(analyses.get(name))
    assert registry.get("selection_reduced_game") is game.reduced_game_score_file
    assert registry.MECHANISM_DESIGNS["selection_reduced_game"] == "multi_run"


def test_example1_reproduces_paper_section4_and_a1():
    """Example 1 (Section 4): (2.96, 0); A.1: (2.92, 1e-5) vs Papernot-Steinke (3.11, 1e-5)."""
    df = S.example1_curve(max_orders=(63, 100, 256, 10_000))
    assert _y(df, series="exact tuned mechanism (pure)", x=100.0) == pytest.approx(2.96, abs=0.01)
    assert _y(df, series="exact tuned mechanism (delta)", x=100.0) == pytest.approx(2.92, abs=0.01)
    assert _y(df, series="Papernot-Steinke (delta)", x=100.0) == pytest.approx(3.11, abs=0.01)
    ps = df[df.series == "Papernot-Steinke (delta)"].sort_values("x")["y"].to_numpy()
    # the prediction falls as the order grid grows, towards the pure bound 3 (our finding)
    assert np.all(np.diff(ps) < 0) and ps[-1] == pytest.approx(3.0, abs=0.002)
    assert set(df.columns) >= {"x", "y", "series", "paper", "note"}


def test_example1_output_law_eq8():
    """Eq. 8: H(X) = (8.66e-3, 2.60e-4, 9.91e-1), H(X') = (2.66e-3, 1.34e-5, 9.97e-1)."""
    df = S.example1_output_law()
    for series, paper in (("tuned H(X)", (8.66e-3, 2.60e-4, 9.91e-1)),
                          ("tuned H(X')", (2.66e-3, 1.34e-5, 9.97e-1))):
        ours = df[df.series == series].sort_values("x")["y"].to_numpy()
        np.testing.assert_allclose(ours, paper, rtol=2e-3)
        assert ours.sum() == pytest.approx(1.0, abs=1e-12)


def test_table3_epsilon_u_within_two_percent_and_ordered():
    """Table 3: epsilon_U = 1.86 at epsilon_B = 1 (within 2%); exact <= Algorithm 3 <= PS."""
    df = S.table3_epsilon_u([1.0])
    ps = _y(df, series="epsilon_U-P (Papernot-Steinke)")
    assert abs(ps / 1.86 - 1) < 0.02
    o = _y(df, series="epsilon_U-O (Algorithm 3)")
    assert _y(df, series="exact epsilon (reduced game)") < o < ps
    assert _y(df, series="paper epsilon_U (Table 3)") == 1.86


def test_table4_first_cell_and_note():
    """Table 4, epsilon_B = 1, tau = 1, L = 10, s = 0.1: paper 1.13 / 1.12."""
    df = S.table4([1.0], [1.0], [[10, 0.1]])
    conv = df[df.quantity == "converged"]
    assert _y(conv, variant="G") == pytest.approx(1.13, abs=0.03)
    assert _y(conv, variant="O") == pytest.approx(1.12, abs=0.03)
    assert (df["x"] == df["paper"]).all()
    assert conv["note"].str.startswith("agrees").all()
    exact = _y(df, quantity="exact")
    assert exact < _y(conv, variant="O")


def test_table4_note_explains_truncation_and_calibration():
    note = S._table4_note("O", paper=5.90, ours=6.28, truncated=5.89, exact=5.88)
    assert "[-6, 6]" in note and "+0.38" in note
    note = S._table4_note("O", paper=3.23, ours=3.30, truncated=3.30, exact=3.299)
    assert "below the exact epsilon" in note and "[-6, 6]" not in note


def test_fig6_bounds_ordering_and_tau1_matches_table3():
    df = S.fig6_bounds([1.0], tau=1.0, eta=0.0, nu=1e-2)
    ps = _y(df, series=S.FIG6_SERIES["epsilon_U_P"])
    t3 = S.table3_epsilon_u([1.0])
    assert ps == pytest.approx(_y(t3, series="epsilon_U-P (Papernot-Steinke)"), abs=2e-3)
    o = _y(df, series=S.FIG6_SERIES["epsilon_U_O"])
    assert _y(df, series=S.FIG6_SERIES["epsilon_exact"]) < o < ps
    assert _y(df, series="epsilon_B (base algorithm)") == 1.0


def test_fig6_bounds_tau_below_one_uses_subsampled_rdp():
    """tau = 0.1: PS on Opacus' sampled-Gaussian RDP (finite, between eps_U-O and 2x)."""
    pt = S.fig6_point(1.0, 0.1, 0.0, 1e-2)
    assert pt["epsilon_exact"] < pt["epsilon_U_O"] < pt["epsilon_U_P"] < 2 * pt["epsilon_U_O"]
    assert pt["mu_G"] > pt["mu_O"]  # Corollary 7's CLT mu exceeds tau sqrt(N)/sigma at tau < 1


def test_reduced_game_score_file_meta_and_audit_columns():
    sf = registry.simulate("selection_reduced_game", {"epsilon_B": 1.0, "n_games": 2000},
                           seed=3, experiment="e", setting="s")
    pt = S.fig6_point(1.0, 1.0, 0.0, 1e-2)
    assert sf.score.shape == (2000, 1) and sf.meta["design"] == "multi_run"
    assert sf.claimed_epsilon == pytest.approx(pt["epsilon_U_O"])
    assert sf.meta["claimed_epsilons"]["exact"] == pytest.approx(pt["epsilon_exact"])
    table = run_estimator(sf, "cp", {"method": "multi_run_cp", "selections": ["heldout"]})
    assert {"claimed_epsilon_exact", "claimed_epsilon_papernot_steinke"} <= set(table.columns)


def test_audit_of_the_game_stays_below_the_exact_epsilon():
    """Monte Carlo validity: the held-out Clopper-Pearson audit of the simulated game (a valid
    95% lower bound) exceeds the game's exact epsilon in at most ~5% of 200 repetitions."""
    exact = S.fig6_point(4.0, 1.0, 0.0, 1e-2)["epsilon_exact"]
    over = 0
    for seed in range(200):
        sf = game.reduced_game_score_file(4.0, 4000, seed=seed)
        row = run_estimator(sf, "cp", {"method": "multi_run_cp", "selections": ["heldout"]})
        over += float(row["epsilon"].iloc[0]) > exact
    assert over / 200 <= 0.05 + 2 * np.sqrt(0.05 * 0.95 / 200)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: S.example1_curve(delta=0.0), "delta"),
        (lambda: S.example1_curve(max_orders=(1.0,)), "max_orders"),
        (lambda: S.table3_epsilon_u([-1.0]), "epsilon_bases"),
        (lambda: S.table4([1.0], [1.5]), "tau"),
        (lambda: S.table4([1.0], [1.0], [[10]]), r"\[L, s\]"),
        (lambda: S.fig6_bounds([1.0], tau=0.0), "tau"),
        (lambda: game.reduced_game_score_file(1.0, 0, seed=0), "n_games"),
    ],
)
def test_bad_inputs_name_the_problem(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_paper_config_names_exist():
    cfg = yaml.safe_load((REPO / "config" / "paper" / "selection.yaml").read_text())
    for name, exp in cfg["experiments"].items():
        if exp["kind"] == "analysis":
            assert exp["analysis"] in analyses.ANALYSES, name
        else:
            assert exp["mechanism"] in registry.MECHANISMS, name
            assert set(exp["estimators"]) <= set(cfg["estimators"]), name
    targets = [e.get("paper_target") for e in cfg["experiments"].values()]
    assert {"selection/example1_paper", "selection/table4", "selection/table3_epsilon_u",
            "selection/fig6_audit"} <= set(targets)
    checks = cfg["experiments"]["selection_table4_paper"]["reproduce"]
    assert len(checks) == 90  # every printed Table 4 number


def test_tabulated_base_rdp_is_an_upper_bound():
    """The step-function RDP used for Papernot-Steinke at tau < 1 never under-states Opacus'
    sampled-Gaussian RDP (so the bound built on it stays an upper bound)."""
    from opacus.accountants.analysis.rdp import compute_rdp

    tau, sigma, steps = 0.1, 2.75, 500
    orders = np.sort(np.random.default_rng(0).uniform(1.01, 250.0, 40))
    exact = np.asarray(compute_rdp(q=tau, noise_multiplier=sigma, steps=steps, orders=list(orders)))
    tab = sel.opacus_rdp(tau, sigma, steps)(orders)
    assert np.all(tab >= exact - 1e-12)
    assert np.all(tab <= exact * 1.2)  # and it is close
    assert np.isinf(sel.opacus_rdp(tau, sigma, steps)(np.array([300.0]))).all()


def _paper_checks(cfg: dict, analysis: str) -> list[dict]:
    """The ``reproduce`` checks of every experiment of ``cfg`` that runs ``analysis``."""
    return [
        check
        for exp in cfg["experiments"].values()
        if exp.get("analysis") == analysis
        for check in exp.get("reproduce", [])
    ]


def test_paper_config_numbers_agree_with_the_library():
    """The paper's numbers in config/paper/selection.yaml's ``reproduce`` checks are the ones
    kept in dpaudit/analyses/selection.py (the library is the source; this keeps the two from
    drifting apart). Experiments are found by their ``analysis``, not by name."""
    cfg = yaml.safe_load((REPO / "config" / "paper" / "selection.yaml").read_text())
    t3 = _paper_checks(cfg, "selection_table3_epsilon_u")
    assert {c["where"]["x"] for c in t3} == set(S.PAPER_TABLE3_EPSILON_U)
    for c in t3:
        assert c["paper"] == S.PAPER_TABLE3_EPSILON_U[c["where"]["x"]], c["quantity"]
    t4 = _paper_checks(cfg, "selection_table4")
    assert len(t4) == 2 * len(S.PAPER_TABLE4) * len(S.TABLE4_COLUMNS)
    for c in t4:
        w = c["where"]
        col = S.TABLE4_COLUMNS.index((w["L"], w["s"]))
        expected = S.PAPER_TABLE4[(w["epsilon_B"], w["tau"])][col]["GO".index(w["variant"])]
        assert c["paper"] == expected, c["quantity"]
    keys = {
        "exact tuned mechanism (pure)": "epsilon_pure",
        "exact tuned mechanism (delta)": "epsilon_delta",
        "Papernot-Steinke (delta)": "papernot_steinke",
    }
    ex1 = [c for c in _paper_checks(cfg, "selection_example1") if c["where"]["series"] in keys]
    assert len(ex1) == len(S.PAPER_EXAMPLE1)
    for c in ex1:
        assert c["paper"] == S.PAPER_EXAMPLE1[keys[c["where"]["series"]]], c["quantity"]
