"""Locating ``../shared`` (the real offline data the tests of the download path read)."""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def shared_dir() -> tuple[Path | None, list[Path]]:
    """``<repo>/../shared``; in a git worktree also ``<main checkout>/../shared``.

    Returns the directory holding ``data/location/dataset_location.tgz`` (or None) and the
    candidates tried, so a failing test can say where it looked.
    """
    candidates = [REPO.parent / "shared"]
    try:
        common = subprocess.run(
            ["git", "rev-parse", "--path-format=absolute", "--git-common-dir"],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        candidates.append(Path(common).parent.parent / "shared")
    except (OSError, subprocess.CalledProcessError):
        pass
    for c in candidates:
        if (c / "data" / "location" / "dataset_location.tgz").is_file():
            return c, candidates
    return None, candidates
