"""A failing job's error, its log messages and its stderr land in its log file."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")

JOB = """
import os, sys, warnings
from dpaudit.joblog import job_log
log = job_log({log!r})
log.info("reading the scores")
print("from sys.stderr", file=sys.stderr)
os.write(2, b"from file descriptor 2\\n")
warnings.warn("a warning")
raise ValueError("bad score file x.npz: truncated")
"""


def test_an_uncaught_error_goes_to_the_log_with_its_traceback(tmp_path):
    log = tmp_path / "logs" / "job.log"  # its folder does not exist yet
    done = subprocess.run(
        [sys.executable, "-c", JOB.format(log=str(log))], env=ENV, capture_output=True, text=True
    )
    assert done.returncode != 0
    text = log.read_text()
    for line in ("reading the scores", "from sys.stderr", "from file descriptor 2", "a warning"):
        assert line in text
    assert "Traceback (most recent call last)" in text
    assert "ValueError: bad score file x.npz: truncated" in text
    # the console keeps one line naming the error and the log
    assert done.stderr.strip() == (
        f"dpaudit: ValueError: bad score file x.npz: truncated (traceback in {log})"
    )


def test_a_successful_job_keeps_its_messages(tmp_path):
    log = tmp_path / "job.log"
    code = f"from dpaudit.joblog import job_log\njob_log({str(log)!r}).info('wrote 3 rows')"
    done = subprocess.run([sys.executable, "-c", code], env=ENV, capture_output=True, text=True)
    assert done.returncode == 0 and done.stderr == ""
    assert "wrote 3 rows" in log.read_text() and "Traceback" not in log.read_text()


@pytest.mark.slow
def test_a_failing_snakemake_job_leaves_its_error_in_its_log(tmp_path):
    """Snakemake says "check log file(s)": the file holds the error, not nothing."""
    (tmp_path / "job.py").write_text(
        "from dpaudit.joblog import job_log\n"
        "log = job_log(snakemake.log[0])\n"
        "log.info('auditing %s', snakemake.input[0])\n"
        "raise ValueError(f'{snakemake.input[0]}: not a score file')\n"
    )
    (tmp_path / "scores.npz").write_text("not a score file")
    (tmp_path / "Snakefile").write_text(
        textwrap.dedent(
            """
            rule audit:
                input: "scores.npz"
                output: "audit.csv"
                log: "logs/audit.log"
                script: "job.py"
            """
        )
    )
    done = subprocess.run(
        [sys.executable, "-m", "snakemake", "--cores", "1", "--directory", str(tmp_path),
         "--snakefile", str(tmp_path / "Snakefile")],
        env=ENV, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode != 0
    assert "logs/audit.log" in done.stdout + done.stderr
    text = (tmp_path / "logs" / "audit.log").read_text()
    assert "auditing scores.npz" in text
    assert "Traceback" in text and "ValueError: scores.npz: not a score file" in text
    assert not (tmp_path / "audit.csv").exists()
