"""The README's set-up is the one CI runs, and it says what a newcomer needs in the first hour
(what needs a package index, how to resume a killed run)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _blocks(markdown: str) -> list[str]:
    return re.findall(r"```bash\n(.*?)```", markdown, re.S)


def _quick_start() -> str:
    text = (REPO / "README.md").read_text()
    return text[text.index("## Quick start") : text.index("## Audit your own training")]


def test_issue36_item12_the_readme_set_up_is_what_ci_runs():
    """Issue 36, item 12: the README's set-up suggested a CPU-wheel step that left a torch and a
    torchvision that do not match; its first commands are now exactly CI's (.ci/run: a fresh
    venv, ``pip install -e ".[test]"``, then ``pytest``), the CPU wheel optional, as a pair."""
    ci = (REPO / ".ci" / "run").read_text()
    assert re.search(r"^python3 -m venv ", ci, re.M)
    (ci_install,) = re.findall(r"^pip install -q (.*)$", ci, re.M)
    setup, *rest = _blocks(_quick_start())
    assert setup.splitlines() == [
        "python3 -m venv .venv && . .venv/bin/activate",
        f"pip install {ci_install}",
    ]
    optional = next(b for b in rest if "download.pytorch.org" in b)
    assert optional.strip() == (
        "pip install torch torchvision --index-url https://download.pytorch.org/whl/cpu"
    )
    quick = " ".join(_quick_start().split())
    assert "Optional, on a CPU-only machine" in quick and "as a matching pair" in quick
    assert re.search(r"^pytest", ci, re.M) and "pytest" in [b.strip() for b in rest]


def test_issue36_item12_the_readme_says_what_needs_an_index_and_how_to_resume():
    """Issue 36, item 12: the quick start said "offline" though the install needs a package
    index, and never mentioned Snakemake's lock after a killed run."""
    quick = " ".join(_quick_start().split())
    assert "Only the install downloads" in quick and "everything below runs offline" in quick
    assert "Directory cannot be locked" in quick
    resume = next(b for b in _blocks(_quick_start()) if "--unlock" in b)
    assert resume.splitlines() == [
        "snakemake --unlock",
        "snakemake --cores all --rerun-incomplete",
    ]
