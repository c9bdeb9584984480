"""Library modules stay small: each holds one piece that can be read whole (issue 38, "Done
when": no library module is over 600 lines)."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

#: The most lines a module of ``dpaudit/`` may have; a module that grows past it is split into
#: modules named for what they compute (docs/architecture.md).
MAX_LINES = 600


def test_no_library_module_is_over_600_lines():
    """Issue 38, Done when: no library module is over 600 lines; names every module over it."""
    modules = sorted((REPO / "dpaudit").rglob("*.py"))
    assert len(modules) > 100  # the package was found
    sizes = {p.relative_to(REPO).as_posix(): len(p.read_text().splitlines()) for p in modules}
    over = {path: n for path, n in sizes.items() if n > MAX_LINES}
    assert not over, (
        f"modules over {MAX_LINES} lines (split each into modules named for what they "
        f"compute): {over}"
    )
