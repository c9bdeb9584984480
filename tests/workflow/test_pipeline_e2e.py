"""End to end: the Snakemake pipeline on config/test.yaml in a temporary directory.

One full run (about a minute on one core) is shared by the tests below; each later test only
asks Snakemake what it *would* do (dry runs) or reruns single targets.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from dpaudit import scores
from dpaudit.estimators.one_run.bound import audit_scores

REPO = Path(__file__).resolve().parents[2]
TEST_CONFIG = REPO / "config" / "test.yaml"
pytestmark = pytest.mark.slow


def snakemake(workdir: Path, *args: str, configfile: Path = TEST_CONFIG, check: bool = True):
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "--snakefile",
        str(REPO / "Snakefile"),
        "--directory",
        str(workdir),
        "--configfile",
        str(configfile),
        "--cores",
        "2",
        *args,
    ]
    # generous: a loaded 2-core machine runs the full tiny run in minutes, not seconds
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    if check and done.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done


def job_counts(output: str) -> dict[str, int]:
    """The 'Job stats' table of a dry run as {rule: count}; {} when nothing is to be done."""
    if "Nothing to be done" in output:
        return {}
    block = output.split("Job stats:", 1)[1].split("total", 1)[0]
    return {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)\s*$", block, re.M)}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    workdir = tmp_path_factory.mktemp("e2e")
    snakemake(workdir)
    return workdir


def test_table_figure_and_report_exist_with_sane_values(run_dir):
    table = pd.read_csv(run_dir / "results/tiny/audit.csv")
    assert set(table["setting"]) == {"eps4", "nonprivate"}
    assert set(table["selection"].dropna()) == {"grid_max_uncorrected", "bonferroni"}
    assert (table["epsilon"] >= 0).all() and np.isfinite(table["epsilon"]).all()
    # the attack metrics' rows: a point estimate, never valid, with AUROC and its interval
    metrics = table[table["method"] == "attack_metrics"]
    assert len(metrics) == 2 and not metrics["valid"].any()
    assert (metrics["auroc_lo"] <= metrics["auroc"]).all()
    assert (metrics["auroc"] <= metrics["auroc_hi"]).all()
    table = table[table["method"] == "one_run"]
    private = table[table["setting"] == "eps4"]
    assert (private["claimed_epsilon"].between(3.5, 4.0)).all()  # Opacus RDP hits the target
    assert (private["epsilon"] < private["claimed_epsilon"]).all()
    # every accountant side by side; PLD is tighter than the RDP that calibrated the noise
    assert (private["claimed_epsilon_pld"] <= private["claimed_epsilon_rdp"] + 1e-9).all()
    assert np.allclose(private["claimed_epsilon_rdp"], private["claimed_epsilon"])
    assert not table.loc[table["selection"] == "grid_max_uncorrected", "valid"].any()
    for suffix in ("pdf", "png"):
        fig = run_dir / f"results/tiny/figures/eps_empirical_vs_claimed.{suffix}"
        assert fig.stat().st_size > 5000
    assert (run_dir / "results/tiny/figures/eps_empirical_vs_claimed.png").read_bytes()[:4] == (
        b"\x89PNG"
    )
    assert (run_dir / "results/tiny/figures/roc.png").read_bytes()[:4] == b"\x89PNG"
    report = (run_dir / "results/report.html").read_text(errors="ignore")
    assert "audit.csv" in report and "eps_empirical_vs_claimed" in report
    assert "roc.png" in report


VECTORISED = {
    "vec_lidp_random": ("lidp", "black_box_logit", "random_input", "poisson"),
    "vec_mislabeled_shuffle": ("one_run", "black_box_loss", "mislabeled", "shuffle"),
    "vec_indist_partial": ("one_run", "white_box_dot", "in_distribution", "partial_shuffle"),
    "vec_clipbkd_batchshuffle": ("multi_run", "black_box_loss", "clipbkd", "batch_then_shuffle"),
    "vec_dirac_noshuffle": ("one_run", "final_model_cosine", "dirac", "no_shuffle"),
    "vec_gradient_perstep": ("multi_run", "per_step_dot", "random_gradient", "shuffle"),
}


@pytest.mark.parametrize("experiment", sorted(VECTORISED))
def test_vectorised_engine_end_to_end(run_dir, experiment):
    """Every design, canary type, sampler and threat model of the engine, through the rules."""
    design, threat, canary, sampler = VECTORISED[experiment]
    files = sorted((run_dir / "results" / experiment / "scores").rglob("*.npz"))
    assert files
    for path in files:
        sf = scores.read(path)
        assert sf.meta["design"] == design and sf.meta["threat_model"] == threat
        assert sf.meta["sampler"] == sampler
        assert 7.5 < sf.claimed_epsilon <= 8.0  # always the Poisson accountant's epsilon
    table = pd.read_csv(run_dir / "results" / experiment / "audit.csv")
    assert len(table) and (table["epsilon"] >= 0).all()
    assert (table.loc[table["valid"].astype(bool), "epsilon"] < 8.0).all()
    assert scores.read(files[0]).meta["canary_type"] == canary


def test_nonprivate_run_gives_positive_bound(run_dir):
    table = pd.read_csv(run_dir / "results/tiny/audit.csv")
    row = table[(table["setting"] == "nonprivate") & (table["selection"] == "bonferroni")]
    assert float(row["epsilon"].iloc[0]) > 0.5


def test_permuted_membership_null_control(run_dir):
    """The noise-free run's scores with the membership bits permuted: the valid bound is 0 in
    nearly all repetitions (here at least 95 of 100)."""
    sf = scores.read(run_dir / "results/tiny/scores/nonprivate/seed0.shard0.npz")
    rng = np.random.default_rng(0)
    zeros = 0
    for _ in range(100):
        member = rng.permutation(sf.membership[0])
        (res,) = audit_scores(sf.score[0], member, sf.delta, 0.95, selections=["bonferroni"])
        zeros += res.epsilon == 0.0
    assert zeros >= 95


def test_complete_run_schedules_nothing(run_dir):
    assert job_counts(snakemake(run_dir, "-n").stdout) == {}


def test_changing_confidence_reruns_no_training(run_dir, tmp_path):
    cfg = yaml.safe_load(TEST_CONFIG.read_text())
    cfg["estimators"]["one_run"]["confidence"] = 0.9
    path = tmp_path / "conf.yaml"
    path.write_text(yaml.safe_dump(cfg))
    counts = job_counts(snakemake(run_dir, "-n", configfile=path).stdout)
    assert not {"train", "prepare_dataset"} & set(counts)
    # the audit jobs of the settings one_run runs on: tiny's 2, one of each vectorised one_run
    # experiment
    assert counts["audit"] == 5 and counts["figure_eps"] == 4


def test_changing_one_setting_reruns_only_it(run_dir, tmp_path):
    cfg = yaml.safe_load(TEST_CONFIG.read_text())
    cfg["experiments"]["tiny"]["train"]["target_epsilons"] = [4, 8]
    path = tmp_path / "more.yaml"
    path.write_text(yaml.safe_dump(cfg))
    counts = job_counts(snakemake(run_dir, "-n", configfile=path).stdout)
    # only the new eps8 setting: its training and its audit job (one_run and attack_metrics)
    assert counts["train"] == 1 and counts["audit"] == 1


@pytest.mark.parametrize(
    ("edit", "key"),
    [
        (lambda c: c["experiments"]["tiny"]["train"].update(epochz=3), "experiments.tiny.train"),
        (
            lambda c: c["experiments"]["tiny"]["train"].update(target_epsilons=[-1]),
            "experiments.tiny.train.target_epsilons[0]",
        ),
    ],
    ids=["misspelled-key", "negative-epsilon"],
)
def test_bad_config_fails_before_any_job(tmp_path, edit, key):
    cfg = yaml.safe_load(TEST_CONFIG.read_text())
    edit(cfg)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(cfg))
    workdir = tmp_path / "w"
    workdir.mkdir()
    done = snakemake(workdir, "-n", configfile=path, check=False)
    assert done.returncode != 0
    assert key in done.stderr + done.stdout
    assert not (workdir / "results").exists() and not (workdir / "resources").exists()


def test_deleting_a_score_file_reruns_only_its_job(run_dir):
    victim = run_dir / "results/tiny/scores/eps4/seed0.shard0.npz"
    saved = victim.read_bytes()
    victim.unlink()
    counts = job_counts(snakemake(run_dir, "-n").stdout)
    assert counts == {
        "train": 1,
        "audit": 1,  # one job: one_run and attack_metrics on its setting
        "audit_table": 1,
        "figure_eps": 1,
        "figure_kind": 1,
        "report": 1,
        "all": 1,
    }
    snakemake(run_dir, "results/tiny/scores/eps4/seed0.shard0.npz")
    assert victim.read_bytes() == saved  # and it is reproduced bit for bit


def test_a_deleted_intermediate_is_not_rebuilt_for_an_up_to_date_target(run_dir, tmp_path):
    """What the README says: asking for a downstream file whose outputs are up to date does not
    rebuild a deleted intermediate; asking for the file itself, or -R its rule, does."""
    work = tmp_path / "w"
    shutil.copytree(run_dir, work, symlinks=True)
    (work / "results/tiny/audit/eps4.csv").unlink()
    assert job_counts(snakemake(work, "-n", "results/tiny/audit.csv").stdout) == {}
    asked = job_counts(snakemake(work, "-n", "results/tiny/audit/eps4.csv").stdout)
    assert asked == {"audit": 1}
    forced = job_counts(snakemake(work, "-n", "results/tiny/audit.csv", "-R", "audit").stdout)
    assert forced["audit"] >= 1 and forced["audit_table"] == 1


def test_nothing_else_to_do_still_writes_a_missing_or_stale_report(run_dir, tmp_path):
    work = tmp_path / "w"
    shutil.copytree(run_dir, work, symlinks=True)
    report = work / "results/report.html"
    report.unlink()
    assert job_counts(snakemake(work, "-n").stdout) == {"report": 1, "all": 1}
    snakemake(work)
    assert "audit.csv" in report.read_text(errors="ignore")
    png = work / "results/tiny/figures/eps_empirical_vs_claimed.png"
    png.touch()  # newer, same content: Snakemake (mtime, then checksum) keeps the report
    assert job_counts(snakemake(work, "-n").stdout) == {}
    with png.open("ab") as fh:  # a changed result: the report is out of date
        fh.write(b"\0")
    assert job_counts(snakemake(work, "-n").stdout) == {"report": 1, "all": 1}


def test_a_failing_job_leaves_its_error_in_its_log(run_dir, tmp_path):
    work = tmp_path / "w"
    shutil.copytree(run_dir, work, symlinks=True)
    bad = work / "results/tiny/scores/eps4/seed0.shard0.npz"
    assert bad.exists()
    bad.write_text("not a score file")
    target = "results/tiny/audit/eps4.csv"
    done = snakemake(work, target, "--forcerun", "audit", check=False)
    assert done.returncode != 0
    log = (work / "logs/tiny/audit/eps4.log").read_text()
    assert "Traceback (most recent call last)" in log
    assert re.search(r"^[\w.]+(Error|Exception)\b", log.split("Traceback", 1)[1], re.M), log


def dpaudit_verify(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    cmd = [sys.executable, "-m", "dpaudit.cli", "verify", "results", *args]
    return subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, env=env, timeout=600)


def test_issue36_item4_every_result_is_recorded_and_verify_finds_a_quiet_rewrite(
    run_dir, tmp_path
):
    """Issue 36, item 4, through Snakemake: every job's outputs carry a record; a score file
    rewritten with IN scores + 50 and its old mtime put back is "Nothing to be done" for
    Snakemake, but ``dpaudit verify`` names it and the audit job, forced, refuses it."""
    work = tmp_path / "w"
    shutil.copytree(run_dir, work, symlinks=True)
    done = dpaudit_verify(work, "--json", "--list-unrecorded")
    result = json.loads(done.stdout)
    assert done.returncode == 0 and result["ok"] and result["checked"] > 50, done.stdout
    # without a record: only Snakemake's benchmark files and the onsuccess hook's reports of
    # other targets (test_deleting_a_score_file_reruns_only_its_job asked for one)
    unrecorded = [p for p in result["unrecorded"] if not p.startswith("results/reports/")]
    assert all("/benchmarks/" in p for p in unrecorded), unrecorded
    victim = "results/tiny/scores/nonprivate/seed0.shard0.npz"
    audit = "results/tiny/audit/nonprivate.csv"
    stat = os.stat(work / victim)
    sf = scores.read(work / victim)
    sf.score[sf.membership == 1] += 50
    scores.write(work / victim, sf)
    os.utime(work / victim, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert job_counts(snakemake(work, "-n", audit).stdout) == {}  # what mtimes cannot see
    done = dpaudit_verify(work, "--json")
    result = json.loads(done.stdout)
    assert done.returncode == 3
    assert [c["path"] for c in result["changed"]] == [victim]
    assert {"path": audit, "input": victim} in result["stale"]
    forced = snakemake(work, audit, "--forcerun", "audit", check=False)
    assert forced.returncode != 0
    log = (work / "logs/tiny/audit/nonprivate.log").read_text()
    assert f"ManifestError: {victim}: its content changed since the train job recorded it" in log


def test_same_config_gives_identical_score_files(run_dir, tmp_path):
    other = tmp_path / "again"
    other.mkdir()
    targets = [
        "results/tiny/scores/eps4/seed0.shard0.npz",
        "results/tiny/scores/nonprivate/seed0.shard0.npz",
    ]
    snakemake(other, *targets)
    for t in targets:
        assert (other / t).read_bytes() == (run_dir / t).read_bytes(), t
    shutil.rmtree(other)


def test_building_one_artifact_writes_its_own_report(run_dir, tmp_path):
    """`snakemake <one file>` (as for one paper figure) writes that target's report to its own
    file under results/reports/; the full run's results/report.html is left as it was."""
    work = tmp_path / "one"
    shutil.copytree(run_dir / "results", work / "results")
    full = (work / "results" / "report.html").read_bytes()
    target = "results/tiny/figures/eps_empirical_vs_claimed.pdf"
    done = snakemake(work, target, "--forcerun", "figure_eps")
    own = "results/reports/tiny__figures__eps_empirical_vs_claimed.pdf.html"
    assert f"written to {own}" in done.stdout + done.stderr
    assert "eps_empirical_vs_claimed" in (work / own).read_text(errors="ignore")
    assert (work / "results" / "report.html").read_bytes() == full
