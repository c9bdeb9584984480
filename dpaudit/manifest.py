"""Tamper evidence of results: each pipeline job records the SHA-256 of what it read and wrote.

Snakemake decides what to rerun by modification times (and, for inputs under 1 MB, by the
checksums of ``.snakemake/metadata``, which it uses only to *skip* a rerun); it records no
checksum of an output. A score file rewritten with its old mtime restored therefore reads as
up to date, and a downstream job reads whatever the file now holds. This module closes that
gap with a small sidecar record beside every output of a pipeline job
(``.<name>.manifest.json``, hidden, written atomically by :func:`record_outputs`)::

    {"format": 1, "file": "seed0.shard0.npz", "size": 81234, "sha256": "...",
     "rule": "train", "inputs": {"resources/datasets/x.npz": "<sha256>", ...}}

* :func:`start_job`, the first line of every ``scripts/*.py`` adapter, opens the job's log
  (:func:`dpaudit.joblog.job_log`), checks that every output can be written before any work
  (:func:`dpaudit.io.check_writable`: a training job learns of an unwritable score folder in
  its first second, not after the training), refuses an input whose content no longer matches
  the record its producer wrote (:func:`check_inputs`: a :class:`ManifestError` naming the file
  and the way out) and, when the job's script ends without an error, records its outputs.
* :func:`verify_tree` (``dpaudit verify results/``) checks a whole tree: every file whose
  content changed since it was written, every recorded file that is gone, every result made
  from an input that has changed since, and the files that carry no record.

The record is evidence against accidents and careless edits (a file rewritten, cut, copied
over another), not a signature: whoever edits a file and its record together is not caught.
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import os
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from dpaudit.io import TEMP_MARKER, check_writable, parse_json, write_json
from dpaudit.joblog import job_log

#: Version of the record's layout.
FORMAT = 1
#: Suffix of a record: ``<dir>/.<name>.manifest.json`` records ``<dir>/<name>``.
SUFFIX = ".manifest.json"
#: The way out of a changed file: Snakemake does not rebuild a missing intermediate of an
#: up-to-date target, so the file itself is asked for first.
WAY_OUT = (
    "delete it, run Snakemake with it as the target (snakemake ... <file>), then your usual "
    "target, which rebuilds what was made from it"
)


def way_out(path: str | Path) -> str:
    """:data:`WAY_OUT` for ``path``."""
    return WAY_OUT.replace("<file>", str(path))


class ManifestError(ValueError):
    """A file whose content differs from what the job that wrote it recorded."""


def sidecar(path: str | Path) -> Path:
    """The record of ``path``: ``.<name>.manifest.json`` in the same folder."""
    path = Path(path)
    return path.parent / f".{path.name}{SUFFIX}"


def is_sidecar(path: str | Path) -> bool:
    """Whether ``path`` is a record (:func:`sidecar`) rather than a result."""
    name = Path(path).name
    return name.startswith(".") and name.endswith(SUFFIX) and len(name) > len(SUFFIX) + 1


def recorded_file(record_path: str | Path) -> Path:
    """The file a record (:func:`sidecar`) speaks about."""
    record_path = Path(record_path)
    return record_path.parent / record_path.name[1 : -len(SUFFIX)]


def sha256(path: str | Path) -> str:
    """The SHA-256 of a file's bytes, as hex."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_record(path: str | Path) -> dict[str, Any] | None:
    """The record of ``path`` (None where it has none); a damaged record is an error naming it."""
    record_path = sidecar(path)
    try:
        text = record_path.read_text()
    except FileNotFoundError:
        return None
    what = f"{record_path}: the record of {path}"
    record = parse_json(text, what, way_out(path), ManifestError)
    if not isinstance(record, dict) or not isinstance(record.get("sha256"), str):
        raise ManifestError(f"{record_path}: not a dpaudit record of {path}; {way_out(path)}")
    return record


def change(path: str | Path, record: Mapping[str, Any], digest: str | None = None) -> str | None:
    """How ``path`` differs from its ``record`` (None: it does not); ``digest``: its SHA-256
    if already known."""
    path = Path(path)
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return "it was written and is now gone"
    who = f"the {record['rule']} job" if record.get("rule") else "the job that wrote it"
    if size != record.get("size"):
        return (
            f"{who} recorded {record.get('size')} bytes, the file now holds {size}: it was cut, "
            "extended or rewritten after it was written"
        )
    now = digest or sha256(path)
    if now != record["sha256"]:
        return (
            f"its content changed since {who} recorded it (SHA-256 {record['sha256'][:12]}..., "
            f"now {now[:12]}...): it was edited, replaced or damaged after it was written"
        )
    return None


def _files(paths: Iterable[str | Path]) -> list[Path]:
    """The regular files among ``paths`` (a folder output or input is not hashed)."""
    return [Path(p) for p in paths if Path(p).is_file()]


def check_inputs(paths: Iterable[str | Path]) -> dict[str, str]:
    """SHA-256 of each input file; raise :class:`ManifestError` naming the first input whose
    content no longer matches the record its producer wrote (an input without a record, e.g.
    a config file, is hashed and accepted)."""
    digests = {}
    for path in _files(paths):
        digest = sha256(path)
        record = read_record(path)
        problem = None if record is None else change(path, record, digest)
        if problem:
            raise ManifestError(f"{path}: {problem}; refusing to read it: {way_out(path)}")
        digests[str(path)] = digest
    return digests


def forget(paths: Iterable[str | Path]) -> None:
    """Delete the records of ``paths`` (a job about to rewrite its outputs)."""
    for path in paths:
        sidecar(path).unlink(missing_ok=True)


def record_outputs(
    outputs: Iterable[str | Path], inputs: Mapping[str, str], rule: str | None = None
) -> list[Path]:
    """Write the record of every output file (:func:`sidecar`, atomically): its size, its
    SHA-256, the ``rule`` that wrote it and the SHA-256 of each input it read; return the
    records written."""
    written = []
    for path in _files(outputs):
        record = {
            "format": FORMAT,
            "file": path.name,
            "size": path.stat().st_size,
            "sha256": sha256(path),
            "rule": rule,
            "inputs": dict(sorted(inputs.items())),
        }
        write_json(sidecar(path), record)
        written.append(sidecar(path))
    return written


def _named(files: Any) -> list[str]:
    """The paths of a Snakemake ``input`` / ``output`` object (or any iterable of paths)."""
    return [str(f) for f in (files or [])]


def start_job(snakemake: Any) -> logging.Logger:
    """Begin a pipeline job (the first line of each ``scripts/*.py``): its log
    (:func:`dpaudit.joblog.job_log`), every output checked writable before any work, every
    input checked against its record (:func:`check_inputs`), and the outputs' records written
    when the script ends without an error (:func:`record_outputs`). Returns the job's logger."""
    log = job_log(snakemake.log[0] if snakemake.log else None)
    outputs = _named(snakemake.output)
    for path in outputs:
        check_writable(path)
    forget(outputs)  # the job rewrites them: an old record would speak of old content
    inputs = check_inputs(_named(snakemake.input))
    rule = getattr(snakemake, "rule", None)
    failed: list[BaseException] = []
    previous = sys.excepthook

    def hook(kind: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
        failed.append(exc)
        previous(kind, exc, tb)

    sys.excepthook = hook

    def finish() -> None:
        if failed or not all(os.path.exists(p) for p in outputs):
            return
        try:
            record_outputs(outputs, inputs, rule)
        except BaseException as exc:  # an error at exit would not change the exit status
            log.error("could not record the outputs %s: %r", outputs, exc)
            forget(outputs)
            sys.stderr.flush()
            os._exit(1)  # the job fails: Snakemake removes its unrecorded outputs

    atexit.register(finish)
    return log


@dataclass
class Verification:
    """What :func:`verify_tree` found: ``changed`` (file, why), ``missing`` (recorded, gone),
    ``stale`` (file, the input that changed since it was made), ``unrecorded`` (files without a
    record) and the number of recorded files ``checked``."""

    checked: int = 0
    changed: list[tuple[str, str]] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    stale: list[tuple[str, str]] = field(default_factory=list)
    unrecorded: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """No file changed, none is gone, none was made from an input that changed since."""
        return not (self.changed or self.missing or self.stale)


def verify_tree(*roots: str | Path) -> Verification:
    """Check every record under ``roots`` (files or folders) against its file, and every
    input a record names (a path relative to the working directory, as the job read it)
    against the SHA-256 the job recorded when it read it."""
    found = Verification()
    digests: dict[Path, str] = {}

    def digest(path: Path) -> str:
        if path not in digests:
            digests[path] = sha256(path)
        return digests[path]

    files: list[Path] = []
    for root in map(Path, roots):
        if root.is_file():
            files.append(root)
            if not is_sidecar(root) and sidecar(root).is_file():
                files.append(sidecar(root))
            continue
        if not root.is_dir():
            raise FileNotFoundError(2, "no such file or folder to verify", str(root))
        for folder, _, names in os.walk(root):
            files.extend(Path(folder, n) for n in sorted(names))
    records = {recorded_file(p): p for p in files if is_sidecar(p)}
    for path in files:
        if not is_sidecar(path) and path not in records and TEMP_MARKER not in path.name:
            found.unrecorded.append(str(path))
    for path in sorted(records):
        found.checked += 1
        try:
            record = read_record(path)
        except ManifestError as exc:
            found.changed.append((str(path), str(exc)))
            continue
        if record is None:  # the record vanished while we walked
            continue
        if not path.exists():
            found.missing.append(str(path))
            continue
        problem = change(path, record, digest(path))
        if problem:
            found.changed.append((str(path), problem))
            continue
        for name, was in (record.get("inputs") or {}).items():
            source = Path(name)
            if source.is_file() and digest(source) != was:
                found.stale.append((str(path), name))
                break
    return found
