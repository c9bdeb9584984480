"""BENCHMARKS.md stays a page of current figures: at most 500 lines, and every benchmark script it
names exists (the figures' history is in CHANGELOG.md)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "BENCHMARKS.md"
MAX_LINES = 500


def test_benchmarks_page_is_at_most_500_lines() -> None:
    n = len(PAGE.read_text().splitlines())
    assert n <= MAX_LINES, (
        f"BENCHMARKS.md has {n} lines, over {MAX_LINES}: tighten its text (its history belongs "
        "in CHANGELOG.md)"
    )


def test_benchmarks_page_names_only_scripts_that_exist() -> None:
    named = set(re.findall(r"benchmarks/([\w.-]+\.(?:py|sh))", PAGE.read_text()))
    assert named and "bench_attach_checks.py" in named
    missing = sorted(s for s in named if not (ROOT / "benchmarks" / s).is_file())
    assert not missing, f"BENCHMARKS.md names benchmarks/{missing}, which do not exist"
