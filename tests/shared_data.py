"""Locating ``../shared`` (the real offline data the tests of the download path read).

A fresh clone has nothing beside it: the tests that need the real data then skip, saying why.
CI has ``../shared`` beside its clone and sets ``DPAUDIT_REQUIRE_SHARED=1`` (in ``.ci/run``), so
there a missing archive fails those tests instead of skipping them. ``DPAUDIT_SHARED_DIR``
names the folder explicitly (it replaces the default candidates).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ARCHIVE = Path("data") / "location" / "dataset_location.tgz"
SHARED_ENV = "DPAUDIT_SHARED_DIR"
REQUIRE_ENV = "DPAUDIT_REQUIRE_SHARED"


def candidates() -> list[Path]:
    """``$DPAUDIT_SHARED_DIR`` if set; else ``<repo>/../shared`` and, in a git worktree,
    ``<main checkout>/../shared``."""
    if os.environ.get(SHARED_ENV):
        return [Path(os.environ[SHARED_ENV])]
    found = [REPO.parent / "shared"]
    try:
        common = subprocess.run(
            ["git", "rev-parse", "--path-format=absolute", "--git-common-dir"],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        found.append(Path(common).parent.parent / "shared")
    except (OSError, subprocess.CalledProcessError):
        pass
    return list(dict.fromkeys(p.resolve() for p in found))  # a plain clone: both are the same


def shared_dir() -> tuple[Path | None, list[Path]]:
    """The first candidate holding ``data/location/dataset_location.tgz`` (or None), and the
    candidates tried, so a skipping or failing test can say where it looked."""
    tried = candidates()
    for c in tried:
        if (c / ARCHIVE).is_file():
            return c, tried
    return None, tried


def shared_required() -> bool:
    """Whether a missing shared folder is an error (CI) rather than a reason to skip."""
    return os.environ.get(REQUIRE_ENV, "").strip().lower() in ("1", "true", "yes")
