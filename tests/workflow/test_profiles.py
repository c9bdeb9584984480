"""The SLURM profile is a working snakemake profile (dry run, no cluster needed)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_slurm_profile_dry_run(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            "--snakefile",
            str(REPO / "Snakefile"),
            "--profile",
            str(REPO / "profiles" / "slurm"),
            "--configfile",
            str(REPO / "config" / "test.yaml"),
            "--directory",
            str(tmp_path),
            "-n",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "train" in done.stdout and "This was a dry-run" in done.stdout
