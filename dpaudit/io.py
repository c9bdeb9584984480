"""Small file helpers shared by every writer: atomic writes and JSON/CSV output."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

#: Marker in every temporary file name a dpaudit writer creates beside its destination.
TEMP_MARKER = "dpaudit-"


def _host() -> str:
    """This machine's name, reduced to characters safe in a file name."""
    return re.sub(r"[^A-Za-z0-9.]", "_", socket.gethostname()) or "host"


def temp_prefix(path: Path) -> str:
    """Prefix of the temporary files written for ``path``: hidden, recognisable, and naming the
    writer (``.<name>.dpaudit-<host>-<pid>-``), so that a later writer can tell whether it is
    still alive (:func:`remove_stale_temporaries`)."""
    return f".{path.name}.{TEMP_MARKER}{_host()}-{os.getpid()}-"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by another user
        return True
    return True


def remove_stale_temporaries(path: str | Path, suffix: str = ".tmp") -> list[Path]:
    """Delete the temporary files of ``path`` left by writers that are gone; return them.

    A temporary file of ``path`` is named ``temp_prefix(path) + <random> + suffix`` by a writer
    on host ``<host>`` with process id ``<pid>``. It is stale when that host is this one and no
    process ``<pid>`` runs (a writer killed by SIGKILL, or a crashed machine). A file from
    another host (a shared file system) or of a live process is left alone, as is every file
    not named this way.
    """
    path = Path(path)
    pattern = re.compile(
        rf"^\.{re.escape(path.name)}\.{TEMP_MARKER}(?P<host>.+)-(?P<pid>\d+)-[a-z0-9_]+"
        rf"{re.escape(suffix)}$"
    )
    removed = []
    try:
        entries = list(os.scandir(path.parent))
    except FileNotFoundError:
        return removed
    host = _host()
    for entry in entries:
        m = pattern.match(entry.name)
        if not m or m["host"] != host or _pid_alive(int(m["pid"])):
            continue
        if not entry.is_file(follow_symlinks=False):
            continue
        with contextlib.suppress(FileNotFoundError):  # another writer removed it first
            os.unlink(entry.path)
            removed.append(Path(entry.path))
    return removed


def _with_destination(
    exc: OSError, path: Path, after: str = "its temporary file was removed"
) -> OSError:
    """``exc`` re-made to name the destination ``path`` (errno kept, so the subclass too); a
    file name in ``exc`` that is one of our hidden temporaries is replaced by its folder, the
    place the user can act on."""
    what = exc.strerror or str(exc)
    if exc.filename is not None:
        name = Path(exc.filename)
        if name.name.startswith(f".{path.name}.{TEMP_MARKER}"):
            what = f"{what} in folder {str(name.parent)!r}"
        else:
            what = f"{what}: {exc.filename!r}"
    return OSError(exc.errno, f"cannot write {path} ({what}); {after}")


def check_writable(path: str | Path) -> None:
    """Raise an ``OSError`` naming ``path`` if a file cannot be written there (its folder cannot
    be made, is not writable, the disk is read-only, ``path`` is a folder), by creating and
    deleting a temporary file beside it as :func:`atomic_path` would: a job calls it before its
    work (a training of hours), not after."""
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, "is a directory, not a file to write", str(path))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=temp_prefix(path), suffix=".tmp", dir=path.parent)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise _with_destination(
            exc, path, "fix the folder (permissions, space, path) and rerun"
        ) from exc


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` only on success.

    A job killed half-way leaves at most a hidden temporary file
    (``.<name>.dpaudit-<host>-<pid>-<random>.tmp``), never a half-written output, and the next
    atomic write of ``path`` deletes such leftovers of writers that are gone
    (:func:`remove_stale_temporaries`). The file's data is flushed to disk (``fsync``) before
    the rename and the directory entry after it, so that a crash of the machine does not leave
    an empty or partial file under ``path``. An ``OSError`` while writing (a full disk, a
    quota) is raised again naming ``path``, with the same errno, after the temporary file is
    removed; so is one that stops the temporary file from being created (a folder that is not
    writable), naming the folder rather than the hidden temporary.
    """
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, "is a directory, not a file to write", str(path))
    try:  # the folder and the temporary file: an error names the destination, not them
        path.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temporaries(path)
        fd, tmp = tempfile.mkstemp(prefix=temp_prefix(path), suffix=".tmp", dir=path.parent)
        os.close(fd)
    except OSError as exc:
        raise _with_destination(exc, path, "nothing was written") from exc
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp_path, 0o666 & ~umask)  # mkstemp creates 0600; outputs are ordinary files
        _fsync_file(tmp_path)
        os.replace(tmp_path, path)
        _fsync_dir(path.parent)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp_path.unlink(missing_ok=True)
        raise _with_destination(exc, path) from exc
    finally:
        with contextlib.suppress(OSError):
            tmp_path.unlink(missing_ok=True)


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


def parse_json(text: str, what: str, way_out: str, error: type[Exception] = ValueError) -> Any:
    """Parse the JSON ``text``; a syntax error raises ``error`` saying that ``what`` (the file,
    or the part of it, that holds the text) "is not valid JSON", why, and ``way_out``."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise error(f"{what} is not valid JSON ({exc}); {way_out}") from exc


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
