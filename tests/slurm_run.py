"""Helpers of the SLURM end-to-end test (tests/test_slurm_cluster.py): a copy of the repository
to run in, a timed Snakemake run, and the files two runs must share byte for byte."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# what must be identical between a local and a cluster run: score files, audit tables and the
# tables of figures, paper targets and the reproduction check
COMPARED = ("*.npz", "*.csv", "reproduction.md")


def copy_repo(dest: Path) -> Path:
    """The repository's tracked and untracked (not ignored) files, copied to ``dest``."""
    files = (
        subprocess.run(
            ["git", "ls-files", "-co", "--exclude-standard", "-z"],
            cwd=REPO,
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .split("\0")
    )
    for rel in filter(None, files):
        src = REPO / rel
        if not src.is_file():
            continue
        out = dest / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(src.read_bytes())
    return dest


def snakemake(
    workdir: Path, *args: str, timeout: int = 1800
) -> tuple[float, subprocess.CompletedProcess]:
    """Run Snakemake in ``workdir`` (its own copy of the repository); returns (seconds, run)."""
    env = dict(os.environ, PYTHONPATH=str(workdir), OMP_NUM_THREADS="1", MPLBACKEND="Agg")
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "snakemake", *args],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return time.perf_counter() - start, done


def result_files(workdir: Path) -> dict[str, bytes]:
    """Relative path -> bytes of every compared file under ``results/``."""
    root = workdir / "results"
    return {
        str(p.relative_to(root)): p.read_bytes()
        for pattern in COMPARED
        for p in sorted(root.rglob(pattern))
    }
