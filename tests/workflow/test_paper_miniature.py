"""The miniature of each paper config (dpaudit.pipeline.miniature): its job kinds, its overlay,
and (slow) the run end to end through Snakemake, with a planted fault in a paper-only code path
that must make it fail (benchmarks/paper_miniature.py)."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import pytest
from snakemake.utils import update_config

from dpaudit import scores
from dpaudit.config import guards, load_config_file, validate_config
from dpaudit.pipeline import miniature, preflight
from dpaudit.pipeline.params import max_physical_batch
from dpaudit.pipeline.settings import setting_experiment, train_setting_specs
from dpaudit.plots.roc import curves_of

REPO = Path(__file__).resolve().parents[2]
PAPER = REPO / "config" / "paper"
RUNNER = REPO / "benchmarks" / "paper_miniature.py"
#: The kinds of training job of each paper config (`python benchmarks/paper_miniature.py`
#: prints them): one_run: Dirac SGD, the no-canary control, Dirac Adam, mislabeled and
#: in-distribution black box; LiDP: 3 model/data pairs x 2 canaries; selection: 2 canaries x 3
#: setups x 2 statistics; shuffling: LeNet, CNN and 6 loader / adversary variants of the MLP.
KINDS = {
    "one_run_training": 5,
    "lidp_training": 6,
    "selection_training": 12,
    "shuffling_training": 8,
}


def _paper(stem: str) -> dict:
    """The paper config merged into the default config without its experiments, validated."""
    config = load_config_file(REPO / "config" / "config.yaml")
    config.pop("experiments")
    update_config(config, load_config_file(PAPER / f"{stem}.yaml"))
    return validate_config(config, cross_checks=False)


def _checksums(config: dict) -> dict:
    return {
        name: {"sha256": "ab" * 32}
        if name in ("location", "purchase")
        else {"checksums": {"f.gz": "0" * 32}}
        for name in miniature.mirror_datasets(config)
    }


def _mini(stem: str) -> tuple[dict, dict]:
    paper = _paper(stem)
    overlay = miniature.miniature_overlay(copy.deepcopy(paper), "/mirror", _checksums(paper))
    merged = copy.deepcopy(paper)
    update_config(merged, overlay)
    return paper, validate_config(merged, cross_checks=False)


def test_paper_configs_all_have_kinds_listed():
    assert sorted(p.stem for p in PAPER.glob("*_training.yaml")) == sorted(KINDS)


@pytest.mark.parametrize("stem", sorted(KINDS))
def test_miniature_keeps_every_kind_and_shrinks_every_job(stem):
    paper, mini = _mini(stem)
    kinds = miniature.job_kinds(paper)
    assert len(kinds) == KINDS[stem]
    assert set(miniature.job_kinds(mini)) == set(kinds)
    settings = sum(
        len(train_setting_specs(b)) for b in mini["experiments"].values() if b["kind"] == "train"
    )
    assert settings <= 2 * len(kinds) + len(paper["experiments"])
    for name, block in mini["experiments"].items():
        assert set(block) >= set(paper["experiments"][name])  # every experiment stays
        if block["kind"] != "train":
            continue
        assert block["model"] == paper["experiments"][name]["model"]  # the paper's model
        assert block["seeds"] == [0] and block["shards"] == 1
        assert max_physical_batch(mini, name) == miniature.MINI["train.max_physical_batch"]
        for setting in train_setting_specs(block):
            from dpaudit.pipeline.settings import setting_experiment

            b = setting_experiment(block, setting)
            assert b["train"]["batch_size"] <= 48
            if (b["dataset"].get("n_train") or 40) > 1:  # several passes a batch
                assert b["train"]["batch_size"] > max_physical_batch(mini, name)


@pytest.mark.parametrize("stem", sorted(KINDS))
def test_overlay_changes_neither_the_paper_config_nor_its_job_count(stem):
    paper = _paper(stem)
    before = copy.deepcopy(paper)
    count = sum(guards.experiment_jobs(b)[0] for b in paper["experiments"].values())
    miniature.miniature_overlay(paper, "/mirror", _checksums(paper))
    assert paper == before
    assert sum(guards.experiment_jobs(b)[0] for b in paper["experiments"].values()) == count


@pytest.mark.parametrize("stem", sorted(KINDS))
def test_issue36_item12_no_miniature_batch_exceeds_its_records(stem):
    """Issue 36, item 12: a batch larger than its records is a preflight error; the miniature
    shrank paper Fig. 4's batches (40 of 501 records) to 8 of its 5 records."""
    paper, mini = _mini(stem)
    assert preflight.batch_problems(paper) == []
    assert preflight.batch_problems(mini) == []


def test_kind_table_names_every_field():
    paper = _paper("one_run_training")
    table = miniature.kinds_table(paper)
    assert table.count("\n") == 2 + KINDS["one_run_training"] - 1
    assert "cifar10, wrn, engine auto, adam" in table and "insert none" in table


def test_roc_leaves_out_a_setting_without_in_canaries():
    """The paper one-run accuracy experiment's no-canary control (canaries.insert: none) has no
    IN canary: its ROC figure failed on it (found by the miniature)."""
    import numpy as np

    def sf(member):
        member = np.asarray([member], dtype=np.int8)
        return scores.ScoreFile(
            score=np.asarray([[0.1, 0.5, 0.9, 0.3]]),
            membership=member,
            canary_id=np.arange(4)[None, :],
            meta={
                "experiment": "e",
                "setting": "s",
                "seed": 0,
                "design": "one_run",
                "threat_model": "white_box_dot",
                "claimed_epsilon": 8.0,
                "delta": 1e-5,
                "accountant": "rdp",
            },
        )

    curves = curves_of({"coins": [sf([1, 0, 1, 0])], "none": [sf([0, 0, 0, 0])]})
    assert [c.n_in for c in curves] == [2]


def _run(tmp_path: Path, stem: str, *extra: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, str(RUNNER), str(PAPER / f"{stem}.yaml"), "--workdir", str(tmp_path)]
    return subprocess.run([*cmd, *extra], capture_output=True, text=True, timeout=3600)


@pytest.mark.slow
@pytest.mark.parametrize("stem", sorted(KINDS))
def test_miniature_runs_end_to_end(tmp_path, stem):
    """Every kind of training job of the paper config, its audit, tables, figures, paper
    targets, reproduction rows and the report, through Snakemake on the CPU; the runner checks
    the outputs (a finite score file of every kind, a finite bound in every train table, every
    figure, paper target and reproduction row)."""
    done = _run(tmp_path, stem)
    assert done.returncode == 0, done.stdout[-8000:] + done.stderr[-3000:]
    assert f"{KINDS[stem]} kinds of training job" in done.stdout
    assert "PROBLEM" not in done.stdout
    work = tmp_path / stem / "workflow"
    assert (work / "results" / "report.html").is_file()
    files = sorted((work / "results").glob("*/scores/*/seed0.shard0.npz"))
    assert len(files) >= KINDS[stem]
    for path in files:
        assert scores.read(path).score.size > 0


PLANTED_WRN = """
# planted fault: every WRN-16-4 pass drops its first example's logits (a wrong output shape)
from dpaudit.models import wrn

_forward = wrn.WideResNet.forward
wrn.WideResNet.forward = lambda self, x: _forward(self, x)[1:]
"""


@pytest.mark.slow
def test_planted_wrn_shape_fault_fails_the_miniature(tmp_path):
    """A fault only the paper's WRN-16-4 path reaches (no CPU-scale config trains a WRN-16-4)
    makes the one-run miniature fail, naming the training job."""
    preload = tmp_path / "planted.py"
    preload.write_text(PLANTED_WRN)
    done = _run(tmp_path, "one_run_training", "--preload", str(preload))
    assert done.returncode == 1
    assert "FAILED" in done.stdout and "train" in done.stdout


# ----------------------------------------------------------------------------- preflight

COST = {("cifar10", "wrn"): preflight.JobCost(21.6, 900.0, 0.08)}


def test_preflight_names_the_placeholder_checksum():
    paper = _paper("lidp_training")
    problems = preflight.checksum_problems(paper)
    assert len(problems) == 2
    assert problems[0].startswith(
        "config key experiments.lidp_paper_purchase_mlp_poisoning.dataset.sha256: the placeholder"
    )
    assert "sha256sum dataset_purchase.tgz" in problems[0]
    with pytest.raises(preflight.PreflightError, match="dataset.sha256"):
        preflight.check_config(paper)
    # the miniature's overlay puts a checksum in: no problem left
    assert preflight.checksum_problems(_mini("lidp_training")[1]) == []


def test_preflight_stops_a_pass_that_cannot_fit_the_declared_gpu_memory():
    paper = _paper("one_run_training")
    assert preflight.memory_problems(paper, COST) == []  # compute.gpu_mem_mb not declared
    paper["compute"]["gpu_mem_mb"] = 80_000  # 1,024 x 21.6 MB + 900 MB = 23 GB fits
    assert preflight.memory_problems(paper, COST) == []
    paper["compute"]["gpu_mem_mb"] = 16_000
    problems = preflight.memory_problems(paper, COST)
    assert len(problems) == 8  # one per experiment
    assert problems[0].startswith(
        "config key experiments.paper_one_run_fig3.train.max_physical_batch: setting"
    )
    assert "1024 examples" in problems[0] and "at most 699 examples" in problems[0]


def test_preflight_takes_the_gpu_measurement_where_there_is_one():
    """The shipped WRN-16-4 line is the H200's (18.44 MB per example + 1,225 MB: 20.1 GB at a
    pass of 1,024), not the CPU's resident memory (41 MB per example: 43 GB): a 40 GB A100
    passes, a 16 GB card does not, and the message names the GPU's numbers."""
    cost = preflight.MEASURED[("cifar10", "wrn")]
    assert cost.gpu_line() == (18.44, 1225.0)
    assert preflight.JobCost(21.6, 900.0, 0.08).gpu_line() == (21.6, 900.0)  # CPU only
    paper = _paper("one_run_training")
    paper["compute"]["gpu_mem_mb"] = 40_000
    assert preflight.memory_problems(paper) == []
    paper["compute"]["gpu_mem_mb"] = 16_000
    problems = preflight.memory_problems(paper)
    assert len(problems) == 8
    assert "18.44 MB per example + 1225 MB" in problems[0]
    assert "at most 801 examples" in problems[0]  # floor((16,000 - 1,225) / 18.44)


def test_preflight_stops_a_cluster_training_job_without_a_gpu():
    paper = _paper("one_run_training")
    gpus = {name: 0 for name in paper["experiments"]}
    problems = preflight.gpu_resource_problems(paper, gpus, COST)
    assert len(problems) == 8
    assert problems[0].startswith(
        "config key compute.gpus_per_training_job: the training jobs of "
        "experiments.paper_one_run_fig3 ask the cluster for no GPU"
    )
    assert preflight.gpu_resource_problems(paper, dict.fromkeys(gpus, 1), COST) == []
    # a job that fits its runtime on a CPU needs no GPU
    small = {("cifar10", "wrn"): preflight.JobCost(21.6, 900.0, 1e-9)}
    assert preflight.gpu_resource_problems(paper, gpus, small) == []


def test_preflight_cpu_seconds_counts_every_model_a_job_trains():
    """A job's seconds are steps x batch x models x the measured rate of one model: a LiDP job
    (30 epochs of B = 100 over FashionMNIST's 60,000: 18,000 steps, 250 models) and a tuning
    job, whose 500 trials train K ~ TNB(0, 0.01) runs each, E[K] = 21.5 (the selection paper's
    setup, Xiang, Wang, Wang 2024, arXiv:2402.13087, Section 4), not 500 models."""
    cost = preflight.JobCost(1.0, 800.0, 1e-3)
    lidp = _paper("lidp_training")
    block = setting_experiment(lidp["experiments"]["lidp_paper_fmnist_mlp_poisoning"], "k1_eps2")
    assert preflight.cpu_seconds(lidp, block, cost) == pytest.approx(18_000 * 100 * 250 * 1e-3)
    sel = _paper("selection_training")
    block = setting_experiment(
        sel["experiments"]["selection_dpsgd_paper"], "setupntnv_statisticlambda_a_eps1"
    )
    assert preflight.mean_tuning_runs(block["selection"]) == pytest.approx(21.5, abs=0.01)
    runs = 500 * preflight.mean_tuning_runs(block["selection"])
    assert preflight.cpu_seconds(sel, block, cost) == pytest.approx(100 * 5000 * runs * 1e-3)


@pytest.mark.slow
def test_preflight_runs_before_any_job_but_not_in_a_dry_run(tmp_path):
    """Snakemake stops a real run of the shipped LiDP paper config at the placeholder (before
    any job: no log or result is written); its dry run still works (CI dry-runs it)."""
    cmd = [sys.executable, "-m", "snakemake", "--nolock", "--cores", "1"]
    cmd += ["--configfile", str(PAPER / "lidp_training.yaml")]
    env = {**__import__("os").environ, "PYTHONPATH": str(REPO)}
    dry = subprocess.run(
        [*cmd, "-n", "--quiet", "rules"], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert dry.returncode == 0, dry.stderr[-2000:]
    work = tmp_path / "w"
    real = subprocess.run(
        [*cmd, "--directory", str(work), "results/lidp/table1.csv"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    assert real.returncode != 0
    assert (
        "experiments.lidp_paper_purchase_mlp_poisoning.dataset.sha256" in real.stdout + real.stderr
    )
    assert not (work / "logs").exists() and not (work / "results").exists()
