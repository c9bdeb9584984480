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

#: A workflow of the pipeline's shape: ``audit`` jobs at two depths of the job DAG (after
#: ``simulate``, and after ``prepare`` -> ``train``), and a table reading both.
TWO_DEPTHS = """
{install}
rule all:
    input: "table.txt"

rule table:
    input: "sim.audit", "trained.audit"
    output: report("table.txt", caption="caption.rst", category="Tables")
    shell: "cat {{input}} > {{output}}"

rule audit:
    input: "{{name}}.scores"
    output: "{{name}}.audit"
    shell: "cp {{input}} {{output}}"

rule simulate:
    output: "sim.scores"
    shell: "echo 1 > {{output}}"

rule prepare:
    output: "data.txt"
    shell: "echo 1 > {{output}}"

rule train:
    input: "data.txt"
    output: "trained.scores"
    shell: "cp {{input}} {{output}}"
"""


def _graph_rules(html: str) -> list[str]:
    """The rule of each node of the report's workflow graph."""
    import json

    spec = json.loads(re.search(r"var rulegraph_spec = (\{.*?\});\n", html, re.S).group(1))
    (nodes,) = [d["values"] for d in spec["data"] if d["name"] == "node-data"]
    return [n["rule"] for n in nodes]


@pytest.mark.slow
@pytest.mark.parametrize("installed", [False, True])
def test_issue36_item12_the_report_graph_draws_each_rule_once(tmp_path, installed):
    """Issue 36, item 12: the report's workflow graph showed ``audit``, ``audit_table``, ...
    twice: Snakemake keeps one job of each rule per level of the job DAG, and ``audit`` jobs sit
    at two levels. With :func:`use_one_node_per_rule` (the Snakefile's rules/common.smk calls
    it) each rule is one node; without it (Snakemake's own graph) ``audit`` is drawn twice."""
    install = "from dpaudit.report import use_one_node_per_rule\nuse_one_node_per_rule()\n"
    text = TWO_DEPTHS.format(install=install if installed else "")
    (tmp_path / "Snakefile").write_text(textwrap.dedent(text))
    (tmp_path / "caption.rst").write_text("A table.\n")
    build(tmp_path)
    make_report(FULL_REPORT, ["all"], tmp_path / "Snakefile", {}, tmp_path)
    rules = _graph_rules((tmp_path / FULL_REPORT).read_text(errors="ignore"))
    if installed:
        assert sorted(rules) == ["all", "audit", "prepare", "simulate", "table", "train"]
    else:
        assert rules.count("audit") == 2  # the defect, in Snakemake's own graph


class _Job:
    def __init__(self, rule: str) -> None:
        self.rule = type("Rule", (), {"name": rule})()


class _Dag:
    """Jobs and their dependencies as Snakemake's DAG holds them (levels, dependencies)."""

    def __init__(self, deps: dict[_Job, list[_Job]]) -> None:
        self.dependencies = {job: dict.fromkeys(d) for job, d in deps.items()}
        levels, done = [], set()
        while len(done) < len(deps):
            level = [j for j in deps if j not in done and all(d in done for d in deps[j])]
            levels.append(level)
            done |= set(level)
        self._levels = levels

    def toposorted(self):
        return self._levels


def test_rulegraph_spec_orders_rules_topologically_with_one_edge_per_rule_pair():
    from dpaudit.report import rulegraph_spec

    prep, sim = _Job("prepare_dataset"), _Job("simulate")
    train = _Job("train")
    audits = [_Job("audit"), _Job("audit")]
    table, every = _Job("audit_table"), _Job("all")
    dag = _Dag(
        {
            prep: [],
            sim: [],
            train: [prep],
            audits[0]: [sim],
            audits[1]: [train],
            table: audits,
            every: [table, sim, train],
        }
    )
    spec, _, ymax = rulegraph_spec(dag)
    order = [n["rule"] for n in spec["nodes"]]
    assert order == ["prepare_dataset", "simulate", "train", "audit", "audit_table", "all"]
    assert ymax == 250
    edges = {(e["sourcerule"], e["targetrule"]) for e in spec["links"] + spec["links_direct"]}
    assert edges == {
        ("prepare_dataset", "train"),
        ("simulate", "audit"),
        ("train", "audit"),
        ("audit", "audit_table"),
        ("audit_table", "all"),
        ("simulate", "all"),
        ("train", "all"),
    }
    assert len(spec["links"] + spec["links_direct"]) == len(edges)
    assert all(e["target"] - e["source"] == 1 for e in spec["links_direct"])
    assert all(e["target"] - e["source"] != 1 for e in spec["links"])
