"""The shuffling paper's BGM experiments as pipeline pieces: the claimed-epsilon mechanism
wrapper, the reference-line analyses, and the paper-scale config.

Paper: Annamalai, Balle, Hayes, De Cristofaro, "To Shuffle or not to Shuffle" (arXiv:2411.10614),
§6.2.1 / Fig. 3 and §6.3.2-6.3.3 / Figs. 6-7.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from dpaudit import analyses
from dpaudit.accounting.shuffling import poisson_reference_epsilon
from dpaudit.audit import audit
from dpaudit.config import load_schema, validate_config
from dpaudit.mechanisms import registry
from dpaudit.mechanisms.batched_gaussian import bgm_score_file
from dpaudit.mechanisms.bgm_calibrated import bgm_calibrated_score_file, resolve_sigma
from dpaudit.pipeline.settings import simulate_settings

REPO = Path(__file__).resolve().parents[2]
PAPER_CONFIG = REPO / "config" / "paper" / "shuffling.yaml"
DELTA = 1e-5


@pytest.fixture(scope="module")
def paper_config() -> dict:
    cfg = yaml.safe_load(PAPER_CONFIG.read_text())
    validate_config(cfg, load_schema(REPO / "config" / "schema.yaml"))
    return cfg


# ------------------------------------------------------------------ reference-line analyses


@pytest.fixture(scope="module")
def fig3_lines():
    return analyses.run(
        "shuffle_fig3_references",
        {"steps_per_epoch": 100, "sigmas": [0.5, 1.0, 1.5], "runs": [1000, 10**6]},
    )


@pytest.mark.parametrize(
    "sigma,paper_poisson,chua", [(0.5, 6.49, 9.997), (1.0, 0.73, 4.063), (1.5, 0.30, 1.464)]
)
def test_fig3_reference_lines_match_the_paper(fig3_lines, sigma, paper_poisson, chua):
    # §6.2.1: Poisson (PRV) eps 6.49 / 0.73 / 0.30 at T = 100; Chua's bound, our computation.
    t = fig3_lines[fig3_lines["sigma"] == sigma]
    poisson = t[t["reference"] == "poisson_epsilon"]
    lower = t[t["reference"] == "shuffle_lower_bound"]
    assert sorted(poisson["x"]) == [1000, 10**6]  # one row per x: a flat line
    assert poisson["y"].nunique() == 1 and lower["y"].nunique() == 1
    assert poisson["y"].iloc[0] == pytest.approx(paper_poisson, abs=0.015)
    assert lower["y"].iloc[0] == pytest.approx(chua, abs=0.002)
    assert {"x", "y", "series"} <= set(t.columns)


def test_fig3_paper_audits_sit_below_chua(fig3_lines):
    # §6.2.1: converged audits 4.01 (sigma 1) and 1.44 (sigma 1.5) "match [...] but do not
    # exceed" Chua et al.'s lower bound.
    lower = fig3_lines[fig3_lines["reference"] == "shuffle_lower_bound"].groupby("sigma")["y"]
    lb = lower.first()
    assert 4.01 <= lb[1.0] <= 4.01 + 0.1
    assert 1.44 <= lb[1.5] <= 1.44 + 0.1


def test_calibrated_reference_lines_with_given_sigmas():
    # Our PLD calibration: sigma 0.902 / 0.737 / 0.590 give Poisson eps 1 / 2 / 4 (T = 100) and
    # Chua lower bounds 4.78 / 6.24 / 8.16.
    t = analyses.run(
        "shuffle_calibrated_references",
        {"target_epsilons": [1.0, 2.0, 4.0], "sigmas": [0.9020, 0.7367, 0.5905]},
    )
    lower = t[t["reference"] == "shuffle_lower_bound"].set_index("x")["y"]
    poisson = t[t["reference"] == "poisson_epsilon"].set_index("x")["y"]
    assert lower.to_dict() == pytest.approx({1.0: 4.78, 2.0: 6.24, 4.0: 8.16}, abs=0.01)
    assert poisson.to_dict() == pytest.approx({1.0: 1.0, 2.0: 2.0, 4.0: 4.0}, abs=0.01)
    assert t.loc[t["x"] == 2.0, "sigma"].iloc[0] == 0.7367


def test_calibrated_reference_lines_bad_inputs():
    with pytest.raises(ValueError, match="sigmas has 1 entries but target_epsilons has 2"):
        analyses.run("shuffle_calibrated_references",
                     {"target_epsilons": [1.0, 2.0], "sigmas": [0.9]})
    with pytest.raises(ValueError, match="target_epsilons must be a non-empty list"):
        analyses.run("shuffle_calibrated_references", {"target_epsilons": []})
    with pytest.raises(ValueError, match="runs must be a non-empty list"):
        analyses.run("shuffle_fig3_references", {"sigmas": [1.0], "runs": []})


# ------------------------------------------------------------------ claimed-epsilon wrapper


def test_resolve_sigma_checks_a_given_sigma():
    sigma, eps = resolve_sigma(1.0, 100, 1, DELTA, sigma=0.9020)
    assert sigma == 0.9020 and eps == pytest.approx(1.0, abs=0.005)
    # sigma = 0.8 gives Poisson eps ~1.3 at T = 100, not 1: a config typo must not pass.
    msg = r"sigma 0.8 gives Poisson epsilon 1\.\d+.*set sigma: null"
    with pytest.raises(ValueError, match=msg):
        resolve_sigma(1.0, 100, 1, DELTA, sigma=0.8)
    with pytest.raises(ValueError, match="target_epsilon must be a finite number > 0"):
        resolve_sigma(0.0, 100, 1, DELTA, sigma=0.9)
    with pytest.raises(ValueError, match="tolerance must be > 0"):
        resolve_sigma(1.0, 100, 1, DELTA, sigma=0.9, tolerance=0.0)


def test_calibrated_score_file_is_the_bgm_with_the_claim_attached():
    kw = dict(runs_per_hypothesis=300, steps_per_epoch=10, threat_model="partially_informed",
              batch_size=1000, seed=3)
    sf = bgm_calibrated_score_file(target_epsilon=1.0, sigma=1.741, **kw)
    plain = bgm_score_file(sigma=1.741, reference_lines=False, **kw)
    np.testing.assert_array_equal(sf.score, plain.score)
    np.testing.assert_array_equal(sf.membership, plain.membership)
    assert sf.claimed_epsilon == 1.0 and sf.meta["accountant"] == "poisson_pld"
    assert sf.meta["poisson_epsilon"] == pytest.approx(1.0, abs=0.005)
    assert sf.meta["shuffle_lower_bound"] == pytest.approx(1.94, abs=0.01)  # Chua et al. (ours)
    assert registry.MECHANISM_DESIGNS["bgm_calibrated"] == "multi_run"
    assert registry.get("bgm_calibrated") is bgm_calibrated_score_file


def test_calibrated_worst_case_audit_beats_the_claim_but_not_chua():
    # Fig. 7 Worst-Case at claimed eps = 1 (sigma 0.902), reduced to 2 x 10^4 runs per
    # hypothesis: the *valid* held-out bound already exceeds the Poisson claim (docs: 1.59),
    # and even the uncorrected same-data value stays below Chua's 4.78.
    sf = bgm_calibrated_score_file(1.0, 20000, 100, sigma=0.9020, batch_size=100, seed=0)
    t = audit([sf], {"cp": {"method": "multi_run_cp", "confidence": 0.95,
                            "selections": ["same_data", "heldout"]}})
    held = t.loc[t["selection"] == "heldout"].iloc[0]
    same = t.loc[t["selection"] == "same_data"].iloc[0]
    assert bool(held["valid"]) and held["epsilon"] > held["claimed_epsilon"] == 1.0
    assert same["epsilon"] < sf.meta["shuffle_lower_bound"]
    assert t["accountant"].eq("poisson_pld").all()


# ------------------------------------------------------------------ the paper-scale config


def test_paper_config_sigmas_give_their_claimed_epsilon(paper_config):
    # Every written-out sigma must be the Poisson calibration of its claimed eps (the mechanism
    # re-checks at run time; this catches a typo before hours of simulation).
    pairs = set()
    for exp in paper_config["experiments"].values():
        if exp.get("mechanism") != "bgm_calibrated":
            continue
        for params in simulate_settings(exp).values():
            pairs.add((params["target_epsilon"], params["sigma"], params["steps_per_epoch"]))
    assert len(pairs) == 6
    for target, sigma, steps in sorted(pairs):
        assert poisson_reference_epsilon(sigma, steps, 1, DELTA) == pytest.approx(target, abs=0.01)


def test_paper_config_reproduce_rows_select_existing_settings(paper_config):
    # A reproduce row whose filter matches no setting would silently give NaN.
    for name, exp in paper_config["experiments"].items():
        if exp["kind"] != "simulate":
            continue
        settings = list(simulate_settings(exp).values())
        for row in exp.get("reproduce", []):
            where = dict(row["where"])
            est = where.pop("estimator")
            where.pop("selection")
            assert est in exp["estimators"], (name, row["quantity"])
            hits = [s for s in settings
                    if all(np.isclose(s[k], v) if isinstance(v, float) else s[k] == v
                           for k, v in where.items())]
            assert len(hits) == 1, (name, row["quantity"], where)


def test_reduced_default_snippet_in_the_docs_is_a_valid_config():
    # The block proposed for config/config.yaml (docs/mechanisms/shuffling.md) must validate
    # and its settings must resolve, so the lead can paste it as is.
    doc = (REPO / "docs" / "mechanisms" / "shuffling.md").read_text()
    block = doc.split("### Reduced block for the default config", 1)[1]
    snippet = block.split("```yaml\n", 1)[1].split("```", 1)[0]
    cfg = {
        "experiments": yaml.safe_load("\n".join(line[2:] for line in snippet.splitlines())),
        "estimators": {
            "multi_run_cp": {"method": "multi_run_cp", "confidence": 0.95},
            "multi_run_cp_paper": {"method": "multi_run_cp", "confidence": 0.90,
                                   "selections": ["same_data"]},
        },
    }
    validate_config(cfg, load_schema(REPO / "config" / "schema.yaml"))
    exps = cfg["experiments"]
    assert set(exps) == {"shuffle_fig3_bgm", "shuffle_fig7_threat_models",
                         "shuffle_fig3_references"}
    settings = simulate_settings(exps["shuffle_fig7_threat_models"])
    assert len(settings) == 6
    total_runs = sum(p["runs_per_hypothesis"] for e in exps.values() if e["kind"] == "simulate"
                     for p in simulate_settings(e).values())
    assert total_runs <= 300_000  # keeps the default suite's simulations to seconds
