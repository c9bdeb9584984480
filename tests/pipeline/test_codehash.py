"""Library edits rerun what they affect (issue 30, point 5): each rule's ``code`` param is a
hash of the dpaudit modules its script can import (dpaudit.pipeline.codehash)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from dpaudit.pipeline.codehash import ENTRY_POINT_MODULE, compute_code_hash, library_modules

REPO = Path(__file__).resolve().parents[2]
TARGET = "results/sim/audit.csv"


@pytest.fixture
def copy(tmp_path) -> Path:
    """A copy of the package and the scripts (edited by the tests, never the real ones)."""
    shutil.copytree(
        REPO / "dpaudit", tmp_path / "dpaudit", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copytree(REPO / "scripts", tmp_path / "scripts")
    return tmp_path


def _hashes(root: Path) -> dict[str, str]:
    """Each script's ``code``; ``train`` as a job of the library's own engines (the rule's
    train_code leaves out the entry-point module), ``train_entry_point`` as a job that runs a
    user's ``train.entry_point``."""
    hashes = {
        s: compute_code_hash(root / "scripts" / f"{s}.py", root / "dpaudit")
        for s in ("audit", "simulate", "plot_eps", "paper_target")
    }
    train = root / "scripts" / "train.py"
    hashes["train"] = compute_code_hash(train, root / "dpaudit", exclude=(ENTRY_POINT_MODULE,))
    hashes["train_entry_point"] = compute_code_hash(train, root / "dpaudit")
    return hashes


#: An estimator edit reruns the audits, the own-training jobs (a user's entry point may audit
#: through dpaudit.attach) and the line figures (their labels say what a bound assumes, read from
#: the estimator registry, which reaches every estimator): never the library's own training.
ESTIMATOR_EDIT = {"audit", "train_entry_point", "plot_eps"}


def _changed(before: dict[str, str], after: dict[str, str]) -> set[str]:
    return {s for s in before if before[s] != after[s]}


def test_an_estimator_edit_changes_the_audit_param_and_not_the_training_one(copy):
    before = _hashes(copy)
    module = copy / "dpaudit/estimators/one_run/bound.py"
    module.write_text(module.read_text() + "\nCHANGED = 1\n")
    assert _changed(before, _hashes(copy)) == ESTIMATOR_EDIT


def test_a_training_edit_changes_the_training_param_only(copy):
    before = _hashes(copy)
    module = copy / "dpaudit/training/dpsgd.py"
    module.write_text(module.read_text() + "\nCHANGED = 1\n")
    assert _changed(before, _hashes(copy)) == {"train", "train_entry_point"}


def test_modules_imported_inside_functions_and_by_name_count(copy):
    """fdp_one_run.audit is reached only through the registry's import_module; the one_run
    runner imports it by name at run time, so the whole estimators package counts."""
    mods = library_modules(copy / "scripts/audit.py", copy / "dpaudit")
    assert {"dpaudit.estimators.fdp_one_run.audit", "dpaudit.estimators.lidp.xbern"} <= set(mods)
    assert not any(m.startswith("dpaudit.training") for m in mods)
    before = _hashes(copy)
    module = copy / "dpaudit/estimators/fdp_one_run/audit.py"
    module.write_text(module.read_text() + "\nCHANGED = 1\n")
    assert _changed(before, _hashes(copy)) == ESTIMATOR_EDIT


def test_package_data_a_module_names_counts(copy):
    before = _hashes(copy)
    style = copy / "dpaudit/plots/dpaudit.mplstyle"
    style.write_text(style.read_text() + "\n# edited\n")
    assert _changed(before, _hashes(copy)) == {"plot_eps"}


def test_an_unrelated_file_changes_nothing(copy):
    before = _hashes(copy)
    (copy / "dpaudit/commands/__init__.py").write_text("# edited\n")
    assert _changed(before, _hashes(copy)) == set()


def _rule_blocks() -> list[tuple[str, str]]:
    out = []
    for path in [REPO / "Snakefile", *sorted((REPO / "rules").glob("*.smk"))]:
        for block in re.split(r"(?m)^(?=rule )", path.read_text())[1:]:
            out.append((block.split(":", 1)[0].removeprefix("rule "), block))
    return out


def test_every_rule_with_a_script_has_the_code_param_of_that_script():
    scripted = 0
    for name, block in _rule_blocks():
        script = re.search(r'script:\s+"(?:\.\./)?scripts/(\w+)\.py"', block)
        if script is None:
            continue
        scripted += 1
        # the training rule's code depends on whether the job runs a user's entry point
        name_ = script.group(1)
        code = "code=train_code" if name_ == "train" else f'code=library_code("{name_}")'
        assert code in block, name
    assert scripted >= 14


@pytest.mark.slow
def test_snakemake_reruns_the_audit_after_an_estimator_edit(tmp_path):
    """End to end, in a scratch copy of the workflow: run a simulate experiment, edit an
    estimator module, and the dry run schedules its audit (and what reads it) but not the
    simulation; before the edit it has nothing to do."""
    from tests.workflow.test_pipeline_e2e import job_counts

    tree = tmp_path / "tree"
    tree.mkdir()
    for part in (
        "Snakefile",
        "rules",
        "scripts",
        "dpaudit",
        "envs",
        "report",
        "config",
        "profiles",
    ):
        src = REPO / part
        if src.is_dir():
            shutil.copytree(src, tree / part, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, tree / part)
    cfg = tmp_path / "sim.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {
                "experiments": {
                    "sim": {
                        "kind": "simulate",
                        "mechanism": "one_run_rr",
                        "params": {"m": 100, "epsilon": 1.0},
                        "estimators": ["one_run"],
                    }
                },
                "estimators": {"one_run": {"method": "one_run"}},
            }
        )
    )
    work = tmp_path / "work"
    work.mkdir()
    env = dict(os.environ, PYTHONPATH=str(tree), OMP_NUM_THREADS="1")

    def dry_run(*args: str) -> dict[str, int]:
        cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(tree / "Snakefile")]
        cmd += ["--directory", str(work), "--configfile", str(cfg), "--cores", "1", "--nolock"]
        # cwd: `python -m` puts it first on sys.path, before the copy on PYTHONPATH
        done = subprocess.run(
            [*cmd, *args, TARGET], capture_output=True, text=True, env=env, cwd=work
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return job_counts(done.stdout) if "-n" in args else {}

    dry_run()  # the real run
    assert dry_run("-n") == {}
    module = tree / "dpaudit/estimators/one_run/bound.py"
    module.write_text(module.read_text() + "\nCHANGED = 1\n")
    counts = dry_run("-n")
    assert counts.get("audit") == 1 and counts.get("audit_table") == 1, counts
    assert "simulate" not in counts


def test_an_attach_edit_reruns_only_entry_point_training(copy):
    """The own-training audit's code counts for jobs that run a user's entry point only."""
    before = _hashes(copy)
    module = copy / "dpaudit/attach/claim.py"
    module.write_text(module.read_text() + "\nCHANGED = 1\n")
    assert _changed(before, _hashes(copy)) == {"train_entry_point"}
