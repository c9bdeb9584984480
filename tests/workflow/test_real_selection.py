"""A still smaller config/cpu/selection.yaml end to end (real digits, the tuning protocol with
real DP-SGD, the multi-run estimator, the paper target): the outputs exist and hold the rows
the CPU-scale claims are read from."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from dpaudit import scores
from tests.workflow.test_pipeline_e2e import snakemake

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


def _small_config() -> dict:
    """config/cpu/selection.yaml's Table 3 experiment, reduced: NTNV and ETCV, lambda_a,
    epsilon_B = 4, one seed, 80 games of K ~ TNB(0, 0.3)."""
    cpu = yaml.safe_load((REPO / "config" / "cpu" / "selection.yaml").read_text())
    exp = cpu["experiments"]["selection_dpsgd_cpu"]
    exp["seeds"] = [0]
    exp["dataset"].update(n_train=60, n_test=100)
    exp["train"].update(target_epsilons=[4], batch_size=60, steps=4, eval_examples=100)
    exp["selection"].update(trials=80, nu=0.3)
    exp["grid"] = {"selection.setup": ["ntnv", "etcv"]}
    exp["figure"]["series"] = ["setup"]
    exp["paper_target"] = "selection/table3_dpsgd_small"
    # the config's row-by-row claims (bound <= epsilon_U, <= the reduced game's exact epsilon)
    exp["reproduce"] = [r for r in exp["reproduce"] if "column_than" in r.get("claim", {})]
    return {
        "experiments": {"selection_small": exp},
        "estimators": {
            "multi_run_cp": {"method": "multi_run_cp", "selections": ["same_data", "heldout"]}
        },
    }


def test_tuning_audit_end_to_end(tmp_path):
    cfg = tmp_path / "selection_small.yaml"
    cfg.write_text(yaml.safe_dump(_small_config()))
    target = "results/selection/table3_dpsgd_small.csv"
    snakemake(tmp_path, target, "results/reproduction.csv", configfile=cfg)
    table = pd.read_csv(tmp_path / "results" / "selection_small" / "audit.csv")
    assert set(table["setup"]) == {"ntnv", "etcv"}
    assert set(table["threat_model"]) == {"selection_ntnv", "selection_etcv"}
    assert (table["target_epsilon"] == 4).all()
    valid = table[table["valid"]]  # the held-out threshold (same_data picks it on the data)
    assert set(valid["selection"]) == {"heldout"}
    assert len(valid) == 2 and np.isfinite(valid["epsilon"]).all() and (valid["epsilon"] >= 0).all()
    # the tuned mechanism's claim and the reduced game's exact epsilon travel with the rows
    claimed = valid["claimed_epsilon_papernot_steinke"]
    ceiling = valid["reference_reduced_game_exact"]
    assert (valid["epsilon"] <= ceiling).all() and (ceiling < claimed).all()
    assert (valid["claimed_epsilon"] < claimed).all()  # epsilon_B of one run < epsilon_U
    assert (tmp_path / target).exists()
    for setup in ("ntnv", "etcv"):
        path = tmp_path / "results" / "selection_small" / "scores"
        (sf_path,) = sorted(path.glob(f"setup{setup}_eps4/seed0.shard0.npz"))
        sf = scores.read(sf_path)
        assert sf.score.shape == (80, 1) and sf.meta["design"] == "multi_run"
        assert sf.meta["selection"]["setup"] == setup
        assert sf.meta["candidate_runs"] >= 80
        assert json.dumps(sf.meta)  # plain JSON
    # the claims reach results/reproduction.csv, one row each, judged on the valid rows
    repro = pd.read_csv(tmp_path / "results" / "reproduction.csv")
    assert len(repro) == 2 and (repro["source"] == "claim").all()
    assert (repro["rows"] == 2).all() and repro["agrees"].all()
    assert repro["claim"].str.contains("in every row").all()
