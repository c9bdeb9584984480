"""Helpers of the SLURM end-to-end test (tests/workflow/test_slurm_cluster.py): a copy of the
repository to run in, a timed Snakemake run, and the files two runs must share byte for byte."""

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


def _env(workdir: Path) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(workdir), OMP_NUM_THREADS="1", MPLBACKEND="Agg")


def snakemake(
    workdir: Path, *args: str, timeout: int = 1800
) -> tuple[float, subprocess.CompletedProcess]:
    """Run Snakemake in ``workdir`` (its own copy of the repository); returns (seconds, run)."""
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "snakemake", *args],
        cwd=workdir,
        env=_env(workdir),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return time.perf_counter() - start, done


def start_snakemake(workdir: Path, log: Path, *args: str) -> subprocess.Popen:
    """Start Snakemake in ``workdir`` in the background, its stdout and stderr going to
    ``log``."""
    with log.open("w") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "snakemake", *args],
            cwd=workdir,
            env=_env(workdir),
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
        )


def cluster_jobs(workdir: Path) -> list[tuple[str, str]]:
    """(job id, state) of the SLURM jobs whose working directory is ``workdir``."""
    done = subprocess.run(
        ["squeue", "--noheader", "--states=all", "--format=%i|%T|%Z"],
        capture_output=True,
        text=True,
        check=True,
    )
    rows = [line.split("|") for line in done.stdout.splitlines() if line.count("|") == 2]
    return [(i, state) for i, state, wd in rows if Path(wd) == workdir]


def result_files(workdir: Path) -> dict[str, bytes]:
    """Relative path -> bytes of every compared file under ``results/``."""
    root = workdir / "results"
    return {
        str(p.relative_to(root)): p.read_bytes()
        for pattern in COMPARED
        for p in sorted(root.rglob(pattern))
    }
