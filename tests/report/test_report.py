"""The HTML report: its dependencies are installed, its errors are shown whole, a targeted run's
report never replaces the full one, and a killed or failed report leaves no partial file."""

from __future__ import annotations

import re
import textwrap
import tomllib
from importlib.metadata import requires
from pathlib import Path

import pytest

from dpaudit.report import FULL_REPORT, ReportError, make_report, targeted_report_path

REPO = Path(__file__).resolve().parents[2]

SNAKEFILE = """
rule all:
    input: "a.txt"

rule a:
    output: report("a.txt", caption="caption.rst", category="Tables")
    shell: "echo 1 > {output}"
"""


def report_extra() -> list[str]:
    """The packages Snakemake itself lists for making reports (its ``reports`` extra)."""
    found = []
    for req in requires("snakemake") or []:
        if re.search(r"extra\s*==\s*['\"]reports['\"]", req):
            found.append(re.split(r"[ ;<>=!~\[]", req, maxsplit=1)[0].lower())
    return found


def test_the_report_dependencies_are_installed_by_pip_install():
    """``snakemake --report`` needs pygments, which plain ``snakemake`` does not install."""
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {re.split(r"[ <>=!~\[]", d, maxsplit=1)[0].lower() for d in deps}
    extra = report_extra()
    assert "pygments" in extra  # what Snakemake says; if this changes, read its report imports
    snakemake_req = next(d for d in deps if d.lower().startswith("snakemake"))
    assert "reports" in snakemake_req or set(extra) <= names, deps


@pytest.fixture()
def workflow(tmp_path) -> Path:
    (tmp_path / "Snakefile").write_text(textwrap.dedent(SNAKEFILE))
    (tmp_path / "caption.rst").write_text("A table.\n")
    return tmp_path


def build(workdir: Path) -> None:
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "snakemake", "--cores", "1", "--directory", str(workdir),
           "--snakefile", str(workdir / "Snakefile"), "--quiet", "all"]
    subprocess.run(cmd, check=True, capture_output=True, timeout=300)


@pytest.mark.slow
def test_make_report_writes_the_report_atomically(workflow):
    build(workflow)
    make_report(FULL_REPORT, ["all"], workflow / "Snakefile", {}, workflow)
    html = (workflow / FULL_REPORT).read_text(errors="ignore")
    assert "a.txt" in html
    assert sorted(p.name for p in (workflow / "results").iterdir()) == ["report.html"]


@pytest.mark.slow
def test_a_failing_report_shows_snakemake_s_real_error(workflow, monkeypatch):
    """Without pygments Snakemake says so; that line (not a --quiet summary) reaches the user,
    and no report (not even a partial one) is left."""
    build(workflow)
    fake = workflow / "fake"
    (fake / "pygments").mkdir(parents=True)
    (fake / "pygments" / "__init__.py").write_text("raise ImportError('no pygments here')\n")
    monkeypatch.setenv("PYTHONPATH", f"{fake}:{REPO}")
    with pytest.raises(ReportError) as err:
        make_report(FULL_REPORT, ["all"], workflow / "Snakefile", {}, workflow)
    assert "pygments must be installed to create reports" in str(err.value)
    assert "results/report.html" in str(err.value)
    assert list((workflow / "results").iterdir()) == []


@pytest.mark.parametrize(
    ("targets", "path"),
    [
        (["results/one_run/fig1_correct_guesses.pdf"],
         "results/reports/one_run__fig1_correct_guesses.pdf.html"),
        (["figure_eps"], "results/reports/figure_eps.html"),
    ],
)
def test_a_targeted_report_has_its_own_file(targets, path):
    assert targeted_report_path(targets) == path != FULL_REPORT


def test_several_targets_get_one_stable_name():
    a = targeted_report_path(["results/x.csv", "results/y.csv"])
    assert a == targeted_report_path(["results/y.csv", "results/x.csv"])
    assert re.fullmatch(r"results/reports/targets_[0-9a-f]{10}\.html", a)
    assert a != targeted_report_path(["results/x.csv", "results/z.csv"])


def test_issue36_item7_the_report_is_built_from_the_config_the_run_used(tmp_path, monkeypatch):
    """Issue 36, item 7: the report's ``snakemake --report`` got the run's config written back
    key-sorted, so an experiment's ``grid: {n, K}`` became ``{K, n}``: its setting names, and the
    files the report embeds, were not the run's ("Missing metadata"). It gets the config as run,
    and whatever the order, the same setting names."""
    import subprocess

    import yaml

    from dpaudit import report
    from dpaudit.pipeline.settings import experiment_settings

    block = {"kind": "simulate", "mechanism": "lidp_gaussian", "grid": {"n": [4], "K": [1]}}
    config = {"max_jobs": 10, "experiments": {"lidp": block}, "estimators": {}}
    seen = {}

    def fake_run(cmd, cwd, capture_output, text):
        seen["config"] = Path(cmd[cmd.index("--configfile") + 1]).read_text()
        Path(cmd[cmd.index("--report") + 1]).write_text("<html></html>")
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(report.subprocess, "run", fake_run)
    make_report(FULL_REPORT, ["all"], tmp_path / "Snakefile", config, tmp_path)
    used = yaml.safe_load(seen["config"])
    assert used == config and list(used) == list(config)
    assert list(used["experiments"]["lidp"]["grid"]) == ["n", "K"]
    assert list(experiment_settings(used["experiments"]["lidp"])) == ["n4_K1"]
    assert (tmp_path / FULL_REPORT).read_text() == "<html></html>"
