"""Small file helpers shared by every writer: atomic writes and JSON/CSV output."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` only on success.

    A job killed half-way leaves at most a ``.tmp`` file, never a half-written output. The
    file's data is flushed to disk (``fsync``) before the rename and the directory entry after
    it, so that a crash of the machine does not leave an empty or partial file under ``path``.
    """
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, "is a directory, not a file to write", str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp_path, 0o666 & ~umask)  # mkstemp creates 0600; outputs are ordinary files
        _fsync_file(tmp_path)
        os.replace(tmp_path, path)
        _fsync_dir(path.parent)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def _fsync_file(path: Path) -> None:
    """Flush ``path``'s data to the disk."""
    with open(path, "rb") as fh:
        os.fsync(fh.fileno())


def _fsync_dir(path: Path) -> None:
    """Flush a directory's entries (a rename into it) to the disk, where the OS allows it."""
    if not hasattr(os, "O_DIRECTORY"):  # e.g. Windows: directories cannot be opened
        return
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_yaml(path: str | Path) -> Any:
    """Parse a YAML (or JSON) file; a syntax error names the file, the line and the column."""
    import yaml

    path = Path(path)
    try:
        text = path.read_text()
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not a text file ({exc.reason} at byte {exc.start})") from exc
    try:
        return yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = exc.problem or exc.context or "syntax error"
        raise ValueError(f"{path}: not valid YAML ({where}{problem})") from exc
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: not valid YAML ({exc})") from exc


def write_json(path: str | Path, obj: Any) -> None:
    """Write ``obj`` as indented, key-sorted JSON, atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, sort_keys=True) + "\n")


def write_csv(path: str | Path, frame) -> None:
    """Write a pandas DataFrame as CSV, atomically."""
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, index=False)


def copy_atomic(src: str | Path, dst: str | Path) -> None:
    """Copy ``src`` to ``dst`` atomically."""
    import shutil

    with atomic_path(dst) as tmp:
        shutil.copyfile(src, tmp)
