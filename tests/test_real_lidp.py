"""End to end on real data: the smallest version of config/cpu/lidp.yaml (LiDP Table 1 and
Figs. 5, 12-15 of Pillutla et al. 2023, arXiv:2305.18447) through the Snakemake pipeline.

One train experiment (digits, scikit-learn's bundled real 8x8 images, offline everywhere; a
linear model; random-gradient canaries), K in {1, 4}, 16 models per seed, two seeds; the lidp
estimator's bounds at n in {4, 8} trials (its ``trials`` option); the ``lidp_table1`` analysis
(trials saved by K = 4 over K = 1 at n_ref = 8, jackknife over the two seeds) and its claim row
in results/reproduction.csv. The ClipBKD canaries and the other pieces have their own unit tests
(tests/test_canaries.py, tests/test_lidp_sample_complexity.py); this test checks that they are
wired together, so it keeps the job count small (about 13 jobs).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from tests.test_pipeline_e2e import snakemake

pytestmark = pytest.mark.slow

TRAIN = {
    "target_epsilons": [8],
    "nonprivate": False,
    "epochs": 1,
    "batch_size": 100,
    "lr": 0.5,
    "models_per_shard": 16,
    "eval_examples": 359,
}
ESTIMATORS = {
    "w1": {"method": "lidp", "order": 1, "trials": [4, 8]},
    "w2": {"method": "lidp", "order": 2, "trials": [4, 8], "below_order": "skip"},
}
CLAIM = "LiDP (K = 4) needs fewer trials than DP (K = 1), random-gradient canaries"


def tiny_config() -> dict:
    experiments: dict = {
        "real_randgrad": {
            "kind": "train",
            "design": "lidp",
            "threat_model": "final_model_cosine",
            "dataset": {"name": "digits"},
            "model": {"name": "logreg"},
            "canaries": {"type": "random_gradient"},
            "grid": {"canaries.k": [1, 4]},
            "train": TRAIN,
            "seeds": [0, 1],
            "estimators": ["w1", "w2"],
            "figure": {"x": "n_trials", "series": ["estimator", "k"]},
            "paper_target": "lidp/tiny_randgrad_vs_n",
        },
        "real_table1": {
            "kind": "analysis",
            "analysis": "lidp_table1",
            "inputs": ["real_randgrad"],
            "params": {
                "n_ref": 8,
                "lidp_k": 4,
                "baseline_estimator": "w1",
                "lidp_estimators": {"w2": 2},
                "experiments": {
                    "real_randgrad": {"paper_row": "FMNIST/Linear", "canary": "random_gradient"}
                },
            },
            "figure": {
                "x": "order",
                "y": "factor",
                "series": ["experiment"],
                "where": {"row": "cell"},
            },
            "paper_target": "lidp/tiny_table1",
            "reproduce": [
                {
                    "quantity": CLAIM,
                    "claim": {"test": "at_least", "value": 1},
                    "where": {"row": "summary_geometric", "canary": "random_gradient"},
                    "column": "factor",
                    "tolerance": 0,
                }
            ],
        },
    }
    return {"experiments": experiments, "estimators": ESTIMATORS}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("real_lidp")
    config = work / "tiny_lidp.yaml"
    config.write_text(yaml.safe_dump(tiny_config()))
    targets = [
        "results/real_randgrad/audit.csv",
        "results/lidp/tiny_table1.csv",
        "results/lidp/tiny_table1.png",
        "results/reproduction.csv",
    ]
    snakemake(work, *targets, configfile=config)
    return work


def test_bounds_at_each_n_and_k(run_dir):
    t = pd.read_csv(run_dir / "results/real_randgrad/audit.csv")
    assert set(t["n_trials"]) == {4, 8} and set(t["k"]) == {1, 4}
    assert set(t["seed"]) == {0, 1}
    # K = 1 has no 2nd-order row (below_order: skip); K = 4 has both
    assert set(t[t["k"] == 1]["estimator"]) == {"w1"}
    assert set(t[t["k"] == 4]["estimator"]) == {"w1", "w2"}
    assert (t["K"] == t["k"]).all() and (t["epsilon"] >= 0).all()
    assert (t["n_tune"] == t["n_trials"]).all()  # held-out trials: as many as evaluated
    assert t["test_accuracy"].between(0.3, 1.0).all()  # digits, one epoch, eps 8
    assert (t["claimed_epsilon"] - 8).abs().max() < 0.1


def test_table1_and_its_claim_row(run_dir):
    t1 = pd.read_csv(run_dir / "results/lidp/tiny_table1.csv")
    cells = t1[t1["row"] == "cell"]
    assert len(cells) == 1 and (cells["repetitions"] == 2).all()
    assert list(cells["paper_factor"]) == [5.98]  # FMNIST/Linear, random gradient, eps 8, 2nd
    assert np.isfinite(cells["baseline_epsilon"]).all()
    # NaN where the DP baseline's bound is 0 (one epoch at epsilon 8: nothing to reach)
    assert ((cells["factor"] >= 0) | cells["factor"].isna()).all()
    assert (run_dir / "results/lidp/tiny_table1.png").stat().st_size > 1000
    rows = pd.read_csv(run_dir / "results/reproduction.csv")
    row = rows[rows["quantity"] == CLAIM]
    assert len(row) == 1 and row["experiment"].iloc[0] == "real_table1"
    assert row["source"].iloc[0] == "claim"
    # the claim's value is the summary row's factor (NaN when undefined, which never agrees)
    summary = t1[(t1["row"] == "summary_geometric") & (t1["canary"] == "random_gradient")]
    factor = float(summary["factor"].mean())
    assert bool(row["agrees"].iloc[0]) == (factor >= 1)
