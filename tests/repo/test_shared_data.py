"""The real-data tests skip on a fresh clone (no ../shared) and fail when CI requires the data."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
REAL_DATA_TESTS = [
    "tests/data/test_data_download.py::test_real_location30_archive",
    "tests/data/test_data_download.py::test_real_location30_through_the_mirror_path",
    "tests/data/test_data_prepare.py::test_real_location30_prepare",
]


def run_real_data_tests(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    """The three real-data tests in a fresh pytest, with ``../shared`` hidden."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("DPAUDIT_")}
    environ.update(DPAUDIT_SHARED_DIR=str(tmp_path / "no-shared-here"), **env)
    cmd = [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", *REAL_DATA_TESTS]
    return subprocess.run(cmd, cwd=REPO, env=environ, capture_output=True, text=True, timeout=300)


def counts(output: str) -> dict[str, int]:
    """pytest's summary line as {outcome: count}."""
    last = output.strip().splitlines()[-1]
    return {m[2]: int(m[1]) for m in re.finditer(r"(\d+) (\w+)", last)}


@pytest.mark.parametrize("flag", [None, "0"])
def test_without_shared_the_real_data_tests_skip_with_the_reason(tmp_path, flag):
    env = {} if flag is None else {"DPAUDIT_REQUIRE_SHARED": flag}
    done = run_real_data_tests(tmp_path, **env)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert counts(out) == {"skipped": 3}, out
    assert "dataset_location.tgz" in out and "no-shared-here" in out  # says what and where


def test_when_required_a_missing_shared_folder_fails(tmp_path):
    done = run_real_data_tests(tmp_path, DPAUDIT_REQUIRE_SHARED="1")
    out = done.stdout + done.stderr
    assert done.returncode != 0, out
    assert counts(out) == {"errors": 3}, out
    assert "DPAUDIT_REQUIRE_SHARED is set" in out and "no-shared-here" in out


def test_ci_requires_the_shared_data():
    """.ci/run exports the flag before it runs pytest."""
    text = (REPO / ".ci" / "run").read_text()
    assert re.search(r"^export .*DPAUDIT_REQUIRE_SHARED=1", text, re.M)
    assert text.index("DPAUDIT_REQUIRE_SHARED=1") < text.index("\npytest")



def test_a_plain_clone_lists_its_candidate_once(tmp_path, monkeypatch):
    """In a plain clone (not a worktree) both candidates are ``<clone>/../shared``."""
    from tests import shared_data

    clone = tmp_path / "clone"
    clone.mkdir()
    subprocess.run(["git", "init", "-q", str(clone)], check=True)
    monkeypatch.setattr(shared_data, "REPO", clone)
    monkeypatch.delenv("DPAUDIT_SHARED_DIR", raising=False)
    assert shared_data.candidates() == [(tmp_path / "shared").resolve()]
