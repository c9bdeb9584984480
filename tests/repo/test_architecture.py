"""docs/architecture.md, "The common changes, file by file": every file it names exists, and
each change touches at most 4 library and pipeline files (issue 38, "for each kind of change the
files it touches, each at most 4"; a figure kind too, through the registry of
dpaudit/pipeline/figure_kinds.py)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "architecture.md"
HEADING = "### The common changes, file by file"
#: The changes the issue names, each a row of the table.
CHANGES = (
    "an estimator",
    "a dataset",
    "a training bug in the catalogue",
    "a conformance check",
    "a figure kind",
)


def rows() -> dict[str, list[str]]:
    """The section's table: change -> its cells after the first."""
    text = DOC.read_text()
    assert HEADING in text, f"{DOC.name} has no section {HEADING!r}"
    section = text.split(HEADING, 1)[1].split("\n#", 1)[0]
    table = [line for line in section.splitlines() if line.startswith("| ")][2:]
    cells = [[c.strip() for c in line.strip("|").split(" | ")] for line in table]
    return {c[0]: c[1:] for c in cells}


def paths(cell: str) -> list[str]:
    """The repository paths a cell names (code spans with a ``/``)."""
    return [p for p in re.findall(r"`([^`\s]+)`", cell) if "/" in p]


def expand(path: str) -> list[str]:
    """``a.{x,y}`` -> ``a.x``, ``a.y``; ``<name>`` -> a glob wildcard."""
    match = re.search(r"\{([^}]*)\}", path)
    alternatives = (
        [path[: match.start()] + alt + path[match.end() :] for alt in match.group(1).split(",")]
        if match
        else [path]
    )
    return [re.sub(r"<[^>]+>", "*", p) for p in alternatives]


def test_the_section_lists_every_change_the_issue_names():
    listed = rows()
    for change in CHANGES:
        assert any(name.startswith(change) for name in listed), change


def test_every_file_the_section_names_exists():
    missing = [
        pattern
        for cells in rows().values()
        for cell in cells
        for path in paths(cell)
        for pattern in expand(path)
        if not any(REPO.glob(pattern))
    ]
    assert not missing, f"{DOC.name} names files that do not exist: {missing}"


def test_each_change_touches_at_most_four_files():
    over = {
        name: paths(cells[0])
        for name, cells in rows().items()
        if len(paths(cells[0])) > 4
    }
    assert not over, over
