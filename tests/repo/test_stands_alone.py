"""The project stands alone: it cites papers as papers, never the development notes, and names
no absolute path of a development machine (see docs/references.md for the bibliography)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

#: Files the scan skips: this test (it spells the patterns) and the helper that locates the
#: offline data directory next to the checkout (data, not a citation).
EXEMPT = {"tests/repo/test_stands_alone.py", "tests/shared_data.py"}

#: What a reader of the repository cannot follow.
FORBIDDEN = {
    "note citation": re.compile(r"\bnotes? 00\d|notes/\d|\.\./shared/(?:notes|papers)", re.I),
    "development paper file": re.compile(r"\bpapers?[/ ]00\d", re.I),
    "absolute machine path": re.compile(r"(?<![\w.~])/(?:work|root)/|(?<![\w.~])/home/\w"),
}


def _tracked_files() -> list[str]:
    """Every file git tracks in this checkout (skips the test if git is unavailable)."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError) as err:  # pragma: no cover
        pytest.skip(f"git ls-files failed: {err}")
    return [p for p in out.decode().split("\0") if p]


#: What may start a continuation line of a comment or docstring ("# ", "//", " * ", "> "); it
#: is dropped when two lines are joined, so that a citation wrapped over them is still seen.
_CONTINUATION = re.compile(r"^\s*(?:#+|//+|\*|>)?\s*")


def _matches(line: str) -> list[str]:
    """The kinds of forbidden text in ``line``."""
    return [kind for kind, pattern in FORBIDDEN.items() if pattern.search(line)]


def find_offences(root: Path, files: list[str]) -> list[str]:
    """``path:line: kind: text`` for every forbidden citation or path in the text ``files``.

    Each line is read alone and joined with the next (its comment marker dropped), so a
    reference wrapped over two lines ("note" at the end of one, "004" at the start of the next)
    is found too; it is reported as ``path:N-N+1``.
    """
    hits = []
    for rel in files:
        if rel in EXEMPT:
            continue
        path = root / rel
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue  # binary files (figures, archives) and files deleted in the worktree
        lines = text.splitlines()
        for lineno, line in enumerate(lines, 1):
            alone = _matches(line)
            hits += [f"{rel}:{lineno}: {kind}: {line.strip()[:120]}" for kind in alone]
            if lineno == len(lines):
                continue
            nxt = lines[lineno]
            joined = f"{line.rstrip()} {_CONTINUATION.sub('', nxt, count=1)}"
            for kind in _matches(joined):
                if kind not in alone and kind not in _matches(nxt):
                    hits.append(f"{rel}:{lineno}-{lineno + 1}: {kind}: {joined.strip()[:120]}")
    return hits


def test_patterns_catch_what_they_should(tmp_path):
    """The scan flags each kind of offence and passes a paper citation and a relative data path."""
    bad = {
        "a.py": "# see note 003 §6.1\n",
        "b.md": "Paper: `/work/shared/papers/000_x.txt`\n",
        "c.py": '"""Note 000 section 2.9."""\n',
        "d.md": "see ../shared/notes/001_one_run.md\n",
        "e.yaml": "path: /root/data\n",
        "f.md": "(papers/003)\n",
        "g.py": "x = '/home/alice/run'\n",
        "h.yaml": "# the panels the paper leaves open (note\n# 004 section 7.5) are ours\n",
        "i.py": '"""As in the paper\n    003 of the set."""\n',
    }
    good = {
        "ok.py": "# Steinke, Nasr, Jagielski (2023), arXiv:2305.08846, Algorithm 1\n",
        "ok.md": "mirror: ../shared/data; see docs/references.md; https://x.org/work/a\n",
        "ok.yaml": "# two notes\n# 2 papers, 100 runs\n",
    }
    for name, text in {**bad, **good}.items():
        (tmp_path / name).write_text(text)
    hits = find_offences(tmp_path, sorted({**bad, **good}))
    assert sorted({h.split(":")[0] for h in hits}) == sorted(bad)


def test_no_note_citations_or_machine_paths():
    """No tracked file cites the development notes or names an absolute development path."""
    hits = find_offences(REPO, _tracked_files())
    assert not hits, f"{len(hits)} line(s) cite the notes or a machine path:\n" + "\n".join(hits)
