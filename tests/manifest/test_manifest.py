"""Tamper evidence of results (issue 36, item 4): each job records the SHA-256 of what it read
and wrote; a downstream job refuses an input that changed since; ``dpaudit verify`` names every
file that changed since it was written.

On b656a52 a score file rewritten with IN scores + 50 moved the bound 0 -> 2.04 silently, and
with its old mtime restored Snakemake said "Nothing to be done". The tree below is built by
three jobs as the pipeline runs them (each a process whose script starts with
:func:`dpaudit.manifest.start_job`, as ``scripts/*.py`` do): a simulation writes a score
file, an audit job reads it and writes an audit table, a figure job reads the table and draws
a PNG.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dpaudit import manifest, scores
from dpaudit.cli import main

REPO = Path(__file__).resolve().parents[2]
SCORES = "results/sim/scores/eps2/seed0.shard0.npz"
TABLE = "results/sim/audit/eps2.csv"
FIGURE = "results/sim/figures/eps.png"

#: A job's process: a stand-in for Snakemake's ``snakemake`` object, then the adapter's body.
JOB = textwrap.dedent(
    """
    import json, sys
    from types import SimpleNamespace
    from dpaudit.manifest import start_job
    spec = json.loads(sys.argv[1])
    snakemake = SimpleNamespace(
        input=spec["input"], output=spec["output"], log=[spec["log"]], rule=spec["rule"]
    )
    log = start_job(snakemake)
    exec(spec["body"])
    """
)

SIMULATE = """
from dpaudit import scores
from dpaudit.mechanisms.one_run_ideal import randomized_response_score_file
sf = randomized_response_score_file(100, 0.0, 1e-5, seed=0, experiment="sim", setting="eps2")
sf.meta["claimed_epsilon"] = 1.0
scores.write(snakemake.output[0], sf)
"""
AUDIT = """
from dpaudit.audit import audit_setting
from dpaudit.tables import write_audit_csv
spec = {"one_run": {"method": "one_run", "selections": ["bonferroni"]}}
write_audit_csv(snakemake.output[0], audit_setting([list(snakemake.input)], spec))
"""
FIGURE_BODY = """
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
from dpaudit.tables import read_audit_csv
table = read_audit_csv(snakemake.input[0])
fig, ax = plt.subplots()
ax.bar(range(len(table)), table["epsilon"])
fig.savefig(snakemake.output[0])
"""


def run_job(root: Path, rule: str, inputs: list[str], outputs: list[str], body: str):
    """Run one job in ``root`` (the run's working directory) as the pipeline would."""
    spec = {
        "input": inputs,
        "output": outputs,
        "log": f"logs/{rule}.log",
        "rule": rule,
        "body": body,
    }
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1", MPLBACKEND="Agg")
    return subprocess.run(
        [sys.executable, "-c", JOB, json.dumps(spec)],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def build(root: Path) -> None:
    for rule, inputs, outputs, body in (
        ("simulate", [], [SCORES], SIMULATE),
        ("audit", [SCORES], [TABLE], AUDIT),
        ("figure", [TABLE], [FIGURE], FIGURE_BODY),
    ):
        done = run_job(root, rule, inputs, outputs, body)
        assert done.returncode == 0, (done.stderr, (root / f"logs/{rule}.log").read_text())


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("tree")
    build(root)
    return root


@pytest.fixture
def tree(built, tmp_path, monkeypatch) -> Path:
    """A fresh copy of the built tree; the working directory is its root."""
    root = tmp_path / "run"
    shutil.copytree(built, root)
    monkeypatch.chdir(root)
    return root


def verify(capsys, *args: str) -> tuple[int, str]:
    code = main(["verify", *args])
    return code, capsys.readouterr().out


def test_each_job_records_its_outputs_and_the_inputs_it_read(tree, capsys):
    for path in (SCORES, TABLE, FIGURE):
        record = manifest.read_record(path)
        assert record["sha256"] == manifest.sha256(path)
        assert record["size"] == Path(path).stat().st_size
    audit = manifest.read_record(TABLE)
    assert audit["rule"] == "audit" and audit["inputs"] == {SCORES: manifest.sha256(SCORES)}
    assert manifest.sidecar(SCORES).name == ".seed0.shard0.npz.manifest.json"
    code, out = verify(capsys, "results")
    assert code == 0, out
    assert "3 recorded file(s) checked under results: 0 changed, 0 missing, 0 stale" in out


def test_issue36_item4_verify_finds_a_rewritten_score_file_with_its_mtime_kept(tree, capsys):
    """Issue 36, item 4: IN scores + 50, the old modification time restored."""
    stat = os.stat(SCORES)
    sf = scores.read(SCORES)
    sf.score[sf.membership == 1] += 50
    scores.write(SCORES, sf)  # a valid score file, through the library's own writer
    os.utime(SCORES, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    code, out = verify(capsys, "results")
    assert code == 3
    assert f"changed: {SCORES}: its content changed since the simulate job recorded it" in out
    assert f"stale: {TABLE}: made from {SCORES}, which has changed since" in out
    assert "1 changed, 0 missing, 1 stale" in out
    assert "delete it, run Snakemake with it as the target (snakemake ... <file>)" in out


def test_issue36_item4_the_downstream_job_refuses_a_rewritten_input(tree):
    """Issue 36, item 4: the audit job, rerun (e.g. --forcerun), reads no tampered file."""
    sf = scores.read(SCORES)
    sf.score[sf.membership == 1] += 50
    scores.write(SCORES, sf)
    done = run_job(tree, "audit", [SCORES], [TABLE], AUDIT)
    log = (tree / "logs/audit.log").read_text()
    assert done.returncode != 0
    assert f"ManifestError: {SCORES}: its content changed since the simulate job" in log
    way_out = f"delete it, run Snakemake with it as the target (snakemake ... {SCORES})"
    assert f"refusing to read it: {way_out}" in log
    assert not Path(TABLE).exists() or manifest.read_record(TABLE) is None  # nothing recorded


def test_issue36_item4_verify_finds_an_edited_audit_table(tree, capsys):
    """Issue 36, item 4: a bound edited in the table (same size: only the content tells)."""
    text = Path(TABLE).read_text()
    header, row = text.splitlines()[:2]
    eps = row.split(",")[header.split(",").index("epsilon")]
    Path(TABLE).write_text(text.replace(eps, eps.replace(eps[0], "9" if eps[0] != "9" else "8")))
    code, out = verify(capsys, "results")
    assert code == 3
    assert f"changed: {TABLE}: its content changed since the audit job recorded it" in out
    assert f"stale: {FIGURE}: made from {TABLE}" in out


def test_issue36_item4_verify_finds_a_truncated_figure(tree, capsys):
    """Issue 36, item 4: a figure cut to half its bytes."""
    data = Path(FIGURE).read_bytes()
    Path(FIGURE).write_bytes(data[: len(data) // 2])
    code, out = verify(capsys, "results", "--json")
    assert code == 3
    result = json.loads(out)
    assert [c["path"] for c in result["changed"]] == [FIGURE]
    assert f"the figure job recorded {len(data)} bytes, the file now holds {len(data) // 2}" in (
        result["changed"][0]["why"]
    )
    assert result["stale"] == [] and result["missing"] == [] and not result["ok"]
    code, out = verify(capsys, FIGURE)  # one file, given by name
    assert code == 3 and f"changed: {FIGURE}: the figure job recorded" in out


def test_verify_names_a_deleted_result_and_lists_files_without_a_record(tree, capsys):
    Path(FIGURE).unlink()
    (tree / "results/notes.txt").write_text("mine")
    code, out = verify(capsys, "results", "--list-unrecorded")
    assert code == 3
    assert f"missing: {FIGURE}: it was written and is now gone" in out
    assert "unrecorded: results/notes.txt" in out


def test_a_failed_job_records_nothing_and_a_rerun_forgets_the_old_record(tree):
    done = run_job(tree, "figure", [TABLE], [FIGURE], "raise RuntimeError('boom')")
    assert done.returncode != 0
    assert manifest.read_record(FIGURE) is None  # the old record went with the rerun's start


def test_a_damaged_record_is_an_error_naming_it(tree, capsys):
    manifest.sidecar(TABLE).write_text("{not json")
    with pytest.raises(manifest.ManifestError, match=r"\.eps2\.csv\.manifest\.json: the record"):
        manifest.check_inputs([TABLE])
    code, out = verify(capsys, "results")
    assert code == 3 and "is not valid JSON" in out


def test_verify_of_a_path_that_does_not_exist_is_a_one_line_error(tmp_path, capsys):
    assert main(["verify", str(tmp_path / "nowhere")]) == 2
    assert "no such file or folder to verify" in capsys.readouterr().err


def test_issue36_item9_a_job_checks_its_outputs_are_writable_before_its_work(tree):
    """Issue 36, item 9: every job (training included) learns of an output it cannot write
    when it starts, not after its work."""
    (tree / "results/blocked").write_text("a file where a folder should be")
    out = "results/blocked/seed0.shard0.npz"
    done = run_job(tree, "train", [], [out], "open('worked', 'w').write('hours of training')")
    log = (tree / "logs/train.log").read_text()
    assert done.returncode != 0 and not (tree / "worked").exists()
    assert f"cannot write {out} (File exists: 'results/blocked')" in log
