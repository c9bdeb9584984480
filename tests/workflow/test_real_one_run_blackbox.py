"""The black box of config/cpu/one_run.yaml (Steinke, Nasr, Jagielski 2023, arXiv:2305.08846,
Sec. 4.2, Figs. 7 and 8) on Location-30.

* The design's invariants, checked on the config itself (no data needed): the Poisson rate
  q = B / (n - m + m/2) is 0.08 at every point, 1000 steps everywhere, the canaries fit the
  held-out split, and the MLP's random-label capacity (about 2 bits per parameter, Cover 1965;
  log2(29) bits per mislabeled label) lies between the IN canaries of Fig. 7's middle and
  largest m (docs/real_data/one_run.md, "Black box: design").
* A reduced copy of both experiments end to end through Snakemake on the real Location-30 records
  of the shared data mirror (skips on a fresh clone without ../shared, fails in CI).
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from dpaudit.models import build_for_data
from tests.workflow.test_real_one_run import build_paper_targets

REPO = Path(__file__).resolve().parents[2]
CPU = yaml.safe_load((REPO / "config" / "cpu" / "one_run.yaml").read_text())
BLACK_BOX = ("cpu_one_run_fig7", "cpu_one_run_fig8")
LOCATION_ROWS, LOCATION_FEATURES, LOCATION_CLASSES = 5010, 446, 30
Q, STEPS = 0.08, 1000


def _points(name: str) -> list[dict]:
    """Each point of a black-box experiment with its m and n - m filled in."""
    exp = CPU["experiments"][name]
    out = []
    for point in exp["points"]:
        out.append(
            {
                "m": point.get("canaries.m", exp["canaries"]["m"]),
                "n_train": point.get("dataset.n_train", exp["dataset"].get("n_train")),
                "batch_size": point["train.batch_size"],
            }
        )
    return out


@pytest.mark.parametrize("name", BLACK_BOX)
def test_blackbox_points_hold_the_sample_rate_and_steps(name):
    exp = CPU["experiments"][name]
    assert exp["dataset"]["name"] == "location"
    assert exp["train"]["steps"] == STEPS and exp["train"]["target_epsilons"] == [8]
    test_rows = round(exp["dataset"]["test_fraction"] * LOCATION_ROWS)
    train_rows = LOCATION_ROWS - test_rows
    pool = exp["dataset"]["canary_pool"]
    assert exp["train"]["eval_examples"] == test_rows - pool  # every non-canary held-out row
    for p in _points(name):
        n_train = train_rows if p["n_train"] is None else p["n_train"]
        assert 1 <= n_train <= train_rows and p["m"] <= pool
        q = p["batch_size"] / (n_train + p["m"] / 2)  # the trainer's nominal data set
        assert q == pytest.approx(Q, rel=0.005), (name, p, q)


def test_blackbox_mlp_capacity_lies_inside_the_m_grid():
    models = {yaml.safe_dump(CPU["experiments"][n]["model"]) for n in BLACK_BOX}
    assert len(models) == 1  # one network for both figures
    spec = CPU["experiments"]["cpu_one_run_fig7"]["model"]
    net = build_for_data(spec, (LOCATION_FEATURES,), LOCATION_CLASSES)
    params = sum(p.numel() for p in net.parameters())
    assert params == 446 * 4 + 4 + 4 * 30 + 30 == 1938
    capacity = 2 * params / math.log2(LOCATION_CLASSES - 1)  # random labels it can store
    ms = sorted(p["m"] for p in _points("cpu_one_run_fig7"))
    assert ms[-2] / 2 < capacity < ms[-1] / 2  # ~500 IN fit, ~2000 IN do not
    fig8_m = CPU["experiments"]["cpu_one_run_fig8"]["canaries"]["m"]
    assert fig8_m / 2 < capacity  # Fig. 8's canaries fit without the extra data


def _reduced(mirror: Path) -> dict:
    """Both black-box experiments with two points each, mislabeled only, 20 steps, 2 models."""
    config = {
        "data": {"root": "resources/downloads", "mirror": str(mirror)},
        "estimators": {"one_run": {"method": "one_run", "selections": ["bonferroni"]}},
        "experiments": {},
    }
    for name in BLACK_BOX:
        exp = copy.deepcopy(CPU["experiments"][name])
        exp["points"] = exp["points"][:2]
        if "grid" in exp:  # Fig. 7: mislabeled canaries only (its figure keeps the type column)
            exp["grid"] = {"canaries.type": ["mislabeled"]}
        exp["train"].update(steps=20, models_per_shard=2)
        config["experiments"][name] = exp
    return config


@pytest.mark.slow
def test_reduced_blackbox_builds_its_figures_and_claims(tmp_path, shared_data):
    config = _reduced(shared_data / "data")
    build_paper_targets(tmp_path, config)
    fig7 = pd.read_csv(tmp_path / "results/cpu_one_run_fig7/audit.csv")
    assert set(fig7["m"]) == {500, 1000} and set(fig7["type"]) == {"mislabeled"}
    fig8 = pd.read_csv(tmp_path / "results/cpu_one_run_fig8/audit.csv")
    assert set(fig8["n_train"]) == {1, 1000} and set(fig8["m"]) == {500}
    for table in (fig7, fig8):
        assert table["claimed_epsilon"].between(7.9, 8.1).all()
        assert table["test_accuracy"].between(0.0, 1.0).all()
    # the canaries are Location-30's held-out records: 446 binary features, 30 classes
    data = np.load(tmp_path / "resources/datasets/cpu_one_run_fig7/base.npz")
    meta = json.loads(str(data["meta"]))
    assert meta["n_canary"] == 4000 and meta["n_test"] == 509 and meta["n_train"] == 1
    assert data["x_canary"].shape == (4000, 446) and set(np.unique(data["x_canary"])) <= {0, 1}
    scores = sorted((tmp_path / "results/cpu_one_run_fig7/scores").glob("m1000_*/*.npz"))
    assert scores and np.load(scores[0])["score"].shape[-1] == 1000
