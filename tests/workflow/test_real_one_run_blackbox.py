"""The black box of config/cpu/one_run.yaml (Steinke, Nasr, Jagielski 2023, arXiv:2305.08846,
Sec. 4.2, Figs. 7 and 8) on Location-30.

* The design's invariants, checked on the config itself (no data needed): the paper's recipe,
  one batch size B = 20 and 1000 steps at every point (no per-point training key), so that the
  Poisson rate q = B / (n - m + m/2) that ``RunSpec.schedule`` derives is 0.08 at the smallest
  point and falls as m or n - m grows (the noise is recalibrated per point by the trainer); both
  canary types at every point; the canaries fit the held-out split; and the MLP's random-label
  capacity (about 2 bits per parameter, Cover 1965; log2(29) bits per mislabeled label) lies
  between the IN canaries of Fig. 7's middle and largest m (docs/real_data/one_run.md, "Black
  box: design").
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
from dpaudit.training.spec import RunSpec
from tests.workflow.test_real_one_run import build_paper_targets

REPO = Path(__file__).resolve().parents[2]
CPU = yaml.safe_load((REPO / "config" / "cpu" / "one_run.yaml").read_text())
BLACK_BOX = ("cpu_one_run_fig7", "cpu_one_run_fig8")
LOCATION_ROWS, LOCATION_FEATURES, LOCATION_CLASSES = 5010, 446, 30
Q_SMALLEST, BATCH, STEPS = 0.08, 20, 1000


def _points(name: str) -> list[dict]:
    """Each (m, n - m) point of a black-box experiment, in the order of its grid."""
    exp = CPU["experiments"][name]
    grid = exp.get("grid") or {}
    ms = grid.get("canaries.m", [exp["canaries"]["m"]])
    n_trains = grid.get("dataset.n_train", [exp["dataset"].get("n_train")])
    return [{"m": m, "n_train": n} for m in ms for n in n_trains]


@pytest.mark.parametrize("name", BLACK_BOX)
def test_blackbox_points_follow_the_papers_recipe(name):
    exp = CPU["experiments"][name]
    assert exp["dataset"]["name"] == "location"
    assert exp["train"]["steps"] == STEPS and exp["train"]["target_epsilons"] == [8]
    # one training recipe: no point sets its own batch size (or any training key)
    assert "points" not in exp
    assert not [k for k in exp.get("grid", {}) if k.startswith("train.")]
    assert exp["train"]["batch_size"] == BATCH
    # the paper reports the better canary type at each point: both are trained
    assert exp["grid"]["canaries.type"] == ["mislabeled", "in_distribution"]
    test_rows = round(exp["dataset"]["test_fraction"] * LOCATION_ROWS)
    train_rows = LOCATION_ROWS - test_rows
    pool = exp["dataset"]["canary_pool"]
    assert exp["train"]["eval_examples"] == test_rows - pool  # every non-canary held-out row
    rates = []
    for p in _points(name):
        n_train = train_rows if p["n_train"] is None else p["n_train"]
        assert 1 <= n_train <= train_rows and p["m"] <= pool
        block = copy.deepcopy(exp)
        block["canaries"]["m"] = p["m"]
        rates.append(RunSpec.from_block(block).schedule(n_train).sample_rate)
        assert rates[-1] == pytest.approx(BATCH / (n_train + p["m"] / 2))  # nominal data set
    assert rates[0] == pytest.approx(Q_SMALLEST, rel=0.005)  # the previous design's point
    assert all(np.diff(rates) < 0), rates  # q falls along the grid


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
        # two points, mislabeled canaries only (the figures keep the type column)
        exp["grid"] = {
            **{k: v[:2] for k, v in exp["grid"].items() if k != "canaries.type"},
            "canaries.type": ["mislabeled"],
        }
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
