"""benchmarks/compare_results.py: the before/after check of a refactor (issue 26)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "compare_results.py"


def _tree(root: Path, scores: bytes, table: str) -> Path:
    (root / "exp" / "scores").mkdir(parents=True)
    (root / "exp" / "scores" / "seed0.npz").write_bytes(scores)
    (root / "exp" / "audit.csv").write_text(table)
    (root / "exp" / "benchmarks").mkdir()
    (root / "exp" / "benchmarks" / "train.tsv").write_text(str(root))  # a timing: differs
    return root


def _compare(before: Path, after: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), str(before), str(after)], capture_output=True, text=True
    )


def test_new_column_reordered_rows_and_identical_scores(tmp_path):
    before = _tree(tmp_path / "b", b"scores", "eps,verdict\n1.5,ok\n2.0,ok\n")
    after = _tree(tmp_path / "a", b"scores", "eps,verdict,evidence\n2.0,ok,x\n1.5,ok,y\n")
    done = _compare(before, after)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "table  exp/audit.csv: the same rows in another order; added evidence" in done.stdout
    assert "score files: ALL IDENTICAL" in done.stdout


def test_a_changed_bound_and_a_changed_score_file_are_named(tmp_path):
    before = _tree(tmp_path / "b", b"scores", "eps,verdict\n1.5,ok\n")
    after = _tree(tmp_path / "a", b"scores!", "eps,verdict\n1.6,ok\n")
    done = _compare(before, after)
    assert done.returncode == 1
    assert "table  exp/audit.csv: changed eps (1 rows)" in done.stdout
    assert "score file differs or is missing: exp/scores/seed0.npz" in done.stdout
