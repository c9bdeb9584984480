"""Write the Snakemake HTML report the documented way (``snakemake --report``), robustly.

The pipeline calls this after a run: the ``report`` rule for the full run (so a missing or
out-of-date ``results/report.html`` is rewritten even when nothing else has to run) and the
``onsuccess`` hook for a run of other targets, whose report goes to its own file so that it
never replaces the full one. The report is written to a temporary file and renamed into place,
so a killed run leaves no half-written report; a failure raises :class:`ReportError` with the
whole end of Snakemake's output (not a ``--quiet`` summary).

The report's workflow graph draws each rule once (:func:`rulegraph_spec`, installed by
:func:`use_one_node_per_rule` when the Snakefile is parsed, so a plain ``snakemake --report``
gets it too).
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

FULL_REPORT = "results/report.html"
TARGETED_DIR = "results/reports"
TAIL_LINES = 60


class ReportError(RuntimeError):
    """``snakemake --report`` failed; the message holds the command and its output's end."""


def rulegraph_spec(dag: Any) -> tuple[dict[str, list[dict[str, Any]]], int, int]:
    """The report's workflow graph of the job DAG ``dag``, one node per rule, in the form of
    ``snakemake.report.rulegraph_spec.rulegraph_spec`` (nodes, links between neighbours
    ``links_direct`` and the others ``links``; x range, y range).

    Snakemake's own keeps one job of each rule per level of the job DAG, so a rule whose jobs
    sit at two depths (``audit`` after ``simulate`` and after ``prepare_dataset`` -> ``train``)
    is drawn twice, and so is everything downstream of it. Here the rules are ordered
    topologically (ties by name) and each dependency between jobs is one edge between rules."""
    jobs = [job for level in dag.toposorted() for job in level]
    needs: dict[str, set[str]] = {job.rule.name: set() for job in jobs}
    for job in jobs:
        needs[job.rule.name] |= {dep.rule.name for dep in dag.dependencies[job]}
    order: list[str] = []
    left = {rule: set(deps) - {rule} for rule, deps in needs.items()}
    while left:
        ready = sorted(rule for rule, deps in left.items() if not deps)
        if not ready:  # a cycle between rules cannot happen in a DAG of jobs; keep every rule
            ready = sorted(left)
        for rule in ready:
            order.append(rule)
            del left[rule]
        for deps in left.values():
            deps.difference_update(ready)
    idx = {rule: i for i, rule in enumerate(order)}
    nodes = [{"rule": rule, "fx": 10, "fy": i * 50} for i, rule in enumerate(order)]
    links: list[dict[str, Any]] = []
    direct: list[dict[str, Any]] = []
    for rule in order:
        for dep in sorted(needs[rule] - {rule}, key=idx.__getitem__):
            link = {
                "target": idx[rule],
                "source": idx[dep],
                "sourcerule": dep,
                "targetrule": rule,
                "value": 1,
            }
            (direct if idx[rule] - idx[dep] == 1 else links).append(link)
    ymax = max((node["fy"] for node in nodes), default=0)
    return {"nodes": nodes, "links": links, "links_direct": direct}, 100, ymax


def use_one_node_per_rule() -> None:
    """Make Snakemake's HTML report draw its workflow graph with :func:`rulegraph_spec` (the
    reporter looks the function up in its module when it renders)."""
    from snakemake.report import html_reporter

    html_reporter.rulegraph_spec = rulegraph_spec


def targeted_report_path(targets: Sequence[str]) -> str:
    """Where the report of a run of ``targets`` (not the default target) goes.

    One target: ``results/reports/<target with / as __>.html``; several: a short hash of them.
    """
    if len(targets) == 1:
        name = re.sub(r"[^A-Za-z0-9_.-]+", "__", targets[0].removeprefix("results/")).strip("_")
    else:
        digest = hashlib.sha256("\n".join(sorted(targets)).encode()).hexdigest()[:10]
        name = f"targets_{digest}"
    return f"{TARGETED_DIR}/{name or 'report'}.html"


def report_command(
    out: str | Path, targets: Sequence[str], snakefile: str | Path, configfile: str | Path
) -> list[str]:
    """The ``snakemake --report`` command line (targets first: ``--configfile`` takes every
    following word as a config file)."""
    return [
        sys.executable,
        "-m",
        "snakemake",
        *targets,
        "--snakefile",
        str(snakefile),
        "--report",
        str(out),
        "--nolock",
        "--configfile",
        str(configfile),
    ]


def tail(text: str, lines: int = TAIL_LINES) -> str:
    """The last ``lines`` lines of ``text``."""
    return "\n".join(text.strip().splitlines()[-lines:])


def make_report(
    out: str | Path,
    targets: Sequence[str],
    snakefile: str | Path,
    config: dict[str, Any],
    workdir: str | Path = ".",
) -> str:
    """Write the report of ``targets`` (built with ``config``) to ``out``; returns the output
    of ``snakemake --report``. Raises :class:`ReportError` naming the cause when it fails."""
    workdir = Path(workdir)
    final = workdir / out
    final.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="dpaudit-report-") as tmp:
        configfile = Path(tmp) / "config.yaml"
        # the run's config as it is, keys in its order: the report must name the run's files
        configfile.write_text(yaml.safe_dump(config, sort_keys=False))
        partial = final.parent / f".{final.stem}.partial.html"
        cmd = report_command(partial.resolve(), targets, Path(snakefile).resolve(), configfile)
        try:
            done = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True)
            output = done.stdout + done.stderr
            if done.returncode != 0 or not partial.is_file():
                raise ReportError(
                    f"writing the report {out} failed (exit {done.returncode}) for targets "
                    f"{list(targets)}:\n$ {' '.join(cmd)}\n{tail(output)}"
                )
            os.replace(partial, final)
        finally:
            partial.unlink(missing_ok=True)
    return output
