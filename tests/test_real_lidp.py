"""End to end on real data: a still smaller version of config/cpu/lidp.yaml (LiDP Table 1 and
Figs. 5, 12-15 of Pillutla et al. 2023, arXiv:2305.18447) through the Snakemake pipeline.

Digits (scikit-learn's bundled real 8x8 images, offline everywhere) with a linear model,
ClipBKD and random-gradient canaries, K in {1, 4}, bounds at n in {4, 8} trials, two seeds.
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
KINDS = {
    "poisoning": (
        "black_box_loss",
        {"type": "clipbkd", "first_component": 32, "last_component": 64, "scale": 2.0},
    ),
    "randgrad": ("final_model_cosine", {"type": "random_gradient"}),
}
ESTIMATORS = {
    "w1": {"method": "lidp", "order": 1, "trials": [4, 8]},
    "w2": {"method": "lidp", "order": 2, "trials": [4, 8], "below_order": "skip"},
}


def tiny_config() -> dict:
    experiments: dict = {}
    for kind, (threat_model, canaries) in KINDS.items():
        experiments[f"real_{kind}"] = {
            "kind": "train",
            "design": "lidp",
            "threat_model": threat_model,
            "dataset": {"name": "digits"},
            "model": {"name": "logreg"},
            "canaries": canaries,
            "grid": {"canaries.k": [1, 4]},
            "train": TRAIN,
            "seeds": [0, 1],
            "estimators": ["w1", "w2"],
            "figure": {"x": "n_trials", "series": ["estimator", "k"]},
            "paper_target": f"lidp/tiny_{kind}_vs_n",
        }
    inputs = list(experiments)
    experiments["real_vs_K"] = {
        "kind": "analysis",
        "analysis": "audit_rows",
        "inputs": inputs,
        "params": {"where": {"n_trials": 8}},
        "figure": {"x": "k", "series": ["experiment", "estimator"]},
        "paper_target": "lidp/tiny_vs_K",
    }
    experiments["real_table1"] = {
        "kind": "analysis",
        "analysis": "lidp_table1",
        "inputs": inputs,
        "params": {
            "n_ref": 8,
            "lidp_k": 4,
            "baseline_estimator": "w1",
            "lidp_estimators": {"w2": 2},
            "experiments": {
                "real_poisoning": {"paper_row": "FMNIST/Linear", "canary": "poisoning"},
                "real_randgrad": {"paper_row": "FMNIST/Linear", "canary": "random_gradient"},
            },
        },
        "figure": {"x": "order", "y": "factor", "series": ["experiment"], "where": {"row": "cell"}},
        "paper_target": "lidp/tiny_table1",
    }
    return {"experiments": experiments, "estimators": ESTIMATORS}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("real_lidp")
    config = work / "tiny_lidp.yaml"
    config.write_text(yaml.safe_dump(tiny_config()))
    targets = [
        f"results/lidp/tiny_{n}.{ext}"
        for n in ("poisoning_vs_n", "randgrad_vs_n", "vs_K", "table1")
        for ext in ("csv", "png")
    ]
    snakemake(work, *targets, configfile=config)
    return work


def test_bounds_at_each_n_and_k(run_dir):
    for kind in KINDS:
        t = pd.read_csv(run_dir / f"results/lidp/tiny_{kind}_vs_n.csv")
        assert set(t["n_trials"]) == {4, 8} and set(t["k"]) == {1, 4}
        assert set(t["seed"]) == {0, 1}
        # K = 1 has no 2nd-order row (below_order: skip); K = 4 has both
        assert set(t[t["k"] == 1]["estimator"]) == {"w1"}
        assert set(t[t["k"] == 4]["estimator"]) == {"w1", "w2"}
        assert (t["K"] == t["k"]).all() and (t["epsilon"] >= 0).all()
        assert (t["n_tune"] == t["n_trials"]).all()  # held-out trials: as many as evaluated
        assert t["test_accuracy"].between(0.3, 1.0).all()  # digits, one epoch, eps 8
        assert (t["claimed_epsilon"] - 8).abs().max() < 0.1


def test_vs_k_and_table1(run_dir):
    vk = pd.read_csv(run_dir / "results/lidp/tiny_vs_K.csv")
    assert (vk["n_trials"] == 8).all() and set(vk["experiment"]) == {
        "real_poisoning",
        "real_randgrad",
    }
    t1 = pd.read_csv(run_dir / "results/lidp/tiny_table1.csv")
    cells = t1[t1["row"] == "cell"]
    assert len(cells) == 2 and (cells["repetitions"] == 2).all()
    assert list(cells["paper_factor"]) == [2.55, 5.98]  # FMNIST/Linear, eps 8, 2nd order
    assert np.isfinite(cells["baseline_epsilon"]).all()
    # NaN where the DP baseline's bound is 0 (one epoch at epsilon 8: nothing to reach)
    assert ((cells["factor"] >= 0) | cells["factor"].isna()).all()
    for path in ("tiny_vs_K.png", "tiny_table1.png", "tiny_poisoning_vs_n.png"):
        assert (run_dir / "results/lidp" / path).stat().st_size > 1000
