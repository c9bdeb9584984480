"""Write the Snakemake HTML report the documented way (``snakemake --report``), robustly.

The pipeline calls this after a run: the ``report`` rule for the full run (so a missing or
out-of-date ``results/report.html`` is rewritten even when nothing else has to run) and the
``onsuccess`` hook for a run of other targets, whose report goes to its own file so that it
never replaces the full one. The report is written to a temporary file and renamed into place,
so a killed run leaves no half-written report; a failure raises :class:`ReportError` with the
whole end of Snakemake's output (not a ``--quiet`` summary).
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
