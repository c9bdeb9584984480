"""End to end on real data: a reduced config/cpu/one_run.yaml (white-box Dirac vs m, the tight
one-run Fig. 6 with Adam) through Snakemake, offline (digits). The black box (Location-30, through
the shared data mirror) has its own test: tests/workflow/test_real_one_run_blackbox.py.

The reduced config is derived from the CPU config itself (fewer grid points, steps and models),
so the two cannot drift apart; the assertions are on the published figures and tables and on
the claims' rows of results/reproduction.csv (present, not holding: 2 models of 20 steps are too
few to decide a claim). Marked slow, it still runs in the default ``pytest`` (and in CI): about 2
CPU-minutes (119 s user + sys, measured on a loaded 2-core machine).
"""

from __future__ import annotations

import copy
from pathlib import Path

import pandas as pd
import pytest
import yaml

from dpaudit.scores import read
from tests.workflow.test_pipeline_e2e import snakemake

REPO = Path(__file__).resolve().parents[2]
CPU_CONFIG = REPO / "config" / "cpu" / "one_run.yaml"
CPU = yaml.safe_load(CPU_CONFIG.read_text())
KEEP = {
    # two of Fig. 3's points (m, and the batch size that holds the sample rate at that m)
    "cpu_one_run_fig3": {"points": CPU["experiments"]["cpu_one_run_fig3"]["points"][0:3:2]},
    "cpu_tight_one_run_fig6": {},
}
pytestmark = pytest.mark.slow


def reduced_config() -> dict:
    """config/cpu/one_run.yaml with two experiments at eps 8 only, 20 steps, 2 models."""
    cpu = copy.deepcopy(CPU)
    config = {
        "data": {"root": "resources/downloads", "mirror": None},
        "estimators": {
            **cpu["estimators"],
            "one_run": {"method": "one_run", "selections": ["bonferroni"]},
            "fdp_one_run_gdp": {"method": "fdp_one_run", "selections": ["bonferroni"]},
        },
        "experiments": {},
    }
    for name, edit in KEEP.items():
        exp = copy.deepcopy(cpu["experiments"][name])
        exp.update(edit)
        train = exp["train"]
        train.update({"target_epsilons": [8], "models_per_shard": 2})
        if "steps" in train:
            train["steps"] = 20
        else:
            train["epochs"] = 3
        config["experiments"][name] = exp
    return config


def build_paper_targets(tmp_path: Path, config: dict) -> str:
    """Write ``config``, build every experiment's figure (pdf, png, csv) and the reproduction
    table with Snakemake in ``tmp_path``, check that each file is non-empty and that every
    reproduction row of the config is in the table; return the table's text."""
    path = tmp_path / "reduced_config.yaml"
    path.write_text(yaml.safe_dump(config))
    targets = [
        f"results/{exp['paper_target']}.{ext}"
        for exp in config["experiments"].values()
        for ext in ("pdf", "png", "csv")
    ]
    snakemake(tmp_path, *targets, "results/reproduction.csv", configfile=path)
    for target in targets:
        assert (tmp_path / target).stat().st_size > 0, target
    reproduction = (tmp_path / "results/reproduction.csv").read_text()
    for exp in config["experiments"].values():
        for row in exp["reproduce"]:
            assert row["quantity"] in reproduction, row["quantity"]
    return reproduction


def test_reduced_cpu_one_run_config_builds_its_figures_and_claims(tmp_path):
    config = reduced_config()
    build_paper_targets(tmp_path, config)
    fig3 = pd.read_csv(tmp_path / "results/one_run/fig3_whitebox_vs_m.csv")
    assert set(fig3["m"]) == {point["canaries.m"] for point in KEEP["cpu_one_run_fig3"]["points"]}
    table = pd.read_csv(tmp_path / "results/cpu_one_run_fig3/audit.csv")
    assert {"m", "target_epsilon", "test_accuracy"} <= set(table.columns)
    assert table["test_accuracy"].between(0.2, 1.0).all()  # digits: well above chance (0.1)
    tight = pd.read_csv(tmp_path / "results/cpu_tight_one_run_fig6/audit.csv")
    assert set(tight["estimator"]) == {
        "one_run_half",
        "fdp_one_run_half",
        "fdp_abstention_half",
        "fdp_abstention_sg_half",
    }
    assert set(tight["r"]) == {500}  # r = m/2 of 1000 Dirac canaries
    # the DP-SGD family of Mahloujifar et al. at each run's own schedule, read from its score
    # files (the config leaves q and steps null)
    files = sorted((tmp_path / "results/cpu_tight_one_run_fig6/scores").rglob("*.npz"))
    assert files
    schedules = {(read(f).meta["sample_rate"], read(f).meta["steps"]) for f in files}
    assert len(schedules) == 1 and next(iter(schedules))[1] == 20  # the reduced runs' steps
    sg = tight[tight["estimator"] == "fdp_abstention_sg_half"]
    assert {(q, int(t)) for q, t in zip(sg["q"], sg["steps"], strict=True)} == schedules
    assert (sg["assumes"] == "subsampled_gaussian_steps").all() and sg["valid"].all()
