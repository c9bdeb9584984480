"""Fetch a file by URL and verify its checksum, with an optional mirror that replaces the network.

One function does the work: :func:`fetch`. It

* resolves the *sources* to try, in order: the upstream URL(s), or -- when ``mirror`` is given --
  only the mirror(s), so that a mirror fully replaces the network (useful offline, on clusters
  without internet, and in tests). A mirror is a local directory (files found by basename) or a
  base URL (``file://``, ``http://``, ``https://``) to which the basename is appended. An optional
  ``subdir`` is tried first (``<mirror>/<subdir>/<basename>``, then ``<mirror>/<basename>``), so
  one mirror can hold data sets whose files share a basename (MNIST and FashionMNIST);
* streams each source into a temporary file beside the destination while hashing it
  (``.<name>.dpaudit-<host>-<pid>-<random>.part``; leftovers of killed fetches are removed, see
  :func:`dpaudit.io.remove_stale_temporaries`), and puts it at the destination only when the
  checksum matches;
* on a checksum mismatch or a read error, deletes the temporary file and tries the next source;
  every source is tried once, and only network (http/https) sources are tried again, cycled,
  up to ``attempts`` tries in all (a local mirror file gives the same bytes every time, so a
  wrong one is reported at once, never retried; :func:`try_order`);
* then raises :class:`ChecksumError` (some source delivered a file with the wrong checksum) or
  :class:`DownloadError` (no source could be read), naming every source tried, the expected
  checksum and, for mismatches, the actual one.

A destination that already exists with the right checksum is reused. One with the wrong checksum
is **never** deleted or overwritten: it may be the user's only copy (the data root can be the
mirror folder itself), and the likelier fault is a mistyped checksum. :class:`ChecksumError` is
raised at once, naming the file, the expected and the actual checksum, the config key the
expected one came from, and the two fixes (correct that key, or delete the file yourself). A
verified download is put in place with a hard link (``os.link``), which fails rather than replace
a file that appeared meanwhile; where links are not supported, with ``os.replace``. No code path
leaves a half-written or unverified file at the destination.

Checksums are SHA-256 by default; MD5 is accepted because it is the only checksum that
torchvision publishes for its data sets (``resources``/``tgz_md5``/``split_list``).
"""

from __future__ import annotations

import hashlib
import http.client
import logging
import os
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from dpaudit.io import remove_stale_temporaries, temp_prefix

log = logging.getLogger(__name__)

#: Hex digest lengths of the supported checksum algorithms.
ALGORITHMS: dict[str, int] = {"sha256": 64, "md5": 32}
#: Default number of tries in all (at least one per source).
DEFAULT_ATTEMPTS = 3
#: Socket timeout (seconds) for http(s) sources.
DEFAULT_TIMEOUT = 60.0
_CHUNK = 1 << 20
_RETRY_PAUSE = 2.0  # seconds before trying an http(s) source again
_USER_AGENT = "dpaudit-data/0.1 (+https://github.com/; python-urllib)"


class DownloadError(RuntimeError):
    """No source delivered a file with the expected checksum."""


class ChecksumError(DownloadError):
    """At least one source delivered a file whose checksum differs from the expected one."""


def _check_checksum(checksum: str, algorithm: str) -> str:
    if algorithm not in ALGORITHMS:
        raise ValueError(f"unknown checksum algorithm {algorithm!r}; use one of {list(ALGORITHMS)}")
    if not isinstance(checksum, str):
        raise ValueError(f"checksum must be a hex string, got {checksum!r}")
    value = checksum.strip().lower()
    n = ALGORITHMS[algorithm]
    if len(value) != n or any(c not in "0123456789abcdef" for c in value):
        raise ValueError(
            f"{algorithm} checksum must be {n} hex digits, got {checksum!r} ({len(value)} chars)"
        )
    return value


def file_digest(path: str | Path, algorithm: str = "sha256") -> str:
    """Hex digest of a file's bytes, read in 1 MiB chunks."""
    h = hashlib.new(algorithm)
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


def _is_url(s: str) -> bool:
    return urllib.parse.urlparse(s).scheme in ("file", "http", "https")


def _basename_of(url: str) -> str:
    path = urllib.parse.urlparse(url).path if _is_url(url) else url
    name = os.path.basename(urllib.parse.unquote(path).rstrip("/"))
    if not name:
        raise ValueError(f"cannot derive a file name from {url!r}")
    return name


def mirror_sources(
    mirror: str | os.PathLike | Sequence[str | os.PathLike],
    filename: str,
    subdir: str | None = None,
) -> list[str]:
    """The ordered candidate sources for ``filename`` under one or more mirrors.

    For each mirror (in order): ``<mirror>/<subdir>/<filename>`` (when ``subdir`` is given; for a
    local directory only if that file exists), then ``<mirror>/<filename>``. A mirror is a base URL
    if it has a ``file``/``http``/``https`` scheme, else a local directory, which must exist.
    """
    mirrors = [mirror] if isinstance(mirror, str | os.PathLike) else list(mirror)
    if not mirrors:
        raise ValueError("mirror list is empty")
    out: list[str] = []
    for m in mirrors:
        m = os.fspath(m)
        if not m:
            raise ValueError("mirror is an empty string")
        if _is_url(m):
            base = m.rstrip("/")
            quoted = urllib.parse.quote(filename)
            if subdir:
                out.append(f"{base}/{urllib.parse.quote(subdir)}/{quoted}")
            out.append(f"{base}/{quoted}")
        else:
            if "://" in m:
                raise ValueError(
                    f"mirror {m!r} has an unsupported URL scheme; use file, http or https"
                )
            d = Path(m).expanduser()
            if not d.is_dir():
                raise FileNotFoundError(f"mirror directory {str(d)!r} does not exist")
            # The sub-folder candidate is listed only when it exists, so a flat mirror does not
            # spend tries on it; the flat path is always listed, so a miss is reported by name.
            if subdir and (d / subdir / filename).is_file():
                out.append(str(d / subdir / filename))
            out.append(str(d / filename))
    return out


def _is_network(source: str) -> bool:
    return urllib.parse.urlparse(source).scheme in ("http", "https")


def try_order(sources: Sequence[str], attempts: int) -> list[str]:
    """The sources to try, in order: each once, then the network (http/https) sources again,
    cycled, until ``attempts`` tries in all.

    Only a network download is retried: a transient fault may not recur. A local file (a mirror
    directory's file, a ``file://`` URL) gives the same bytes every time, so it is read once.
    """
    order = list(sources)
    network = [s for s in sources if _is_network(s)]
    while network and len(order) < attempts:
        order.append(network[(len(order) - len(sources)) % len(network)])
    return order


def _copy_source(source: str, fh, algorithm: str, timeout: float) -> str:
    """Stream ``source`` into the open binary file ``fh``; return the hex digest of its bytes."""
    h = hashlib.new(algorithm)
    if _is_url(source):
        req = urllib.request.Request(source, headers={"User-Agent": _USER_AGENT})
        ctx = urllib.request.urlopen(req, timeout=timeout)
    else:
        ctx = open(source, "rb")
    with ctx as src:
        while True:
            chunk = src.read(_CHUNK)
            if not chunk:
                break
            h.update(chunk)
            fh.write(chunk)
    return h.hexdigest()


def _existing_mismatch(dest: Path, algorithm: str, expected: str, actual: str, key: str) -> str:
    return (
        f"checksum mismatch: {dest} already exists, but its {algorithm} is {actual} and "
        f"{expected} was expected "
        f"({key}). The file was left as it is (it may be your only copy). If the file is the "
        f"right one, correct {key} to {actual}; if it is not, delete {dest} yourself and rerun "
        "to fetch it again."
    )


def _check_existing(dest: Path, algorithm: str, expected: str, key: str) -> None:
    """Return if ``dest`` has the expected checksum, else raise :class:`ChecksumError` (the
    file is not touched)."""
    actual = file_digest(dest, algorithm)
    if actual != expected:
        raise ChecksumError(_existing_mismatch(dest, algorithm, expected, actual, key))


def _place_new(tmp: Path, dest: Path, algorithm: str, expected: str, key: str) -> None:
    """Put the verified ``tmp`` at ``dest`` without ever replacing a file already there.

    ``os.link`` fails if ``dest`` exists (another job, or the user, put one there meanwhile):
    then that file is checked like a pre-existing one. A file system without hard links falls
    back to ``os.replace`` (atomic; it could replace a file created in the instant since the
    caller found none).
    """
    try:
        os.link(tmp, dest)
    except FileExistsError:
        _check_existing(dest, algorithm, expected, key)
    except OSError:
        os.replace(tmp, dest)


def fetch(
    url: str | Sequence[str],
    dest: str | os.PathLike,
    checksum: str,
    algorithm: str = "sha256",
    mirror: str | os.PathLike | Sequence[str | os.PathLike] | None = None,
    *,
    subdir: str | None = None,
    attempts: int = DEFAULT_ATTEMPTS,
    timeout: float = DEFAULT_TIMEOUT,
    checksum_key: str = "the checksum passed to fetch",
) -> Path:
    """Make ``dest`` hold the file published at ``url`` with checksum ``checksum``; return its path.

    Parameters
    ----------
    url:
        Upstream URL, or a list of equivalent upstream URLs tried in order (e.g. torchvision's
        MNIST ``mirrors``). Its basename names the file in a mirror.
    dest:
        Destination file path. Parent directories are created.
    checksum, algorithm:
        Expected hex digest and its algorithm (``"sha256"`` or ``"md5"``).
    mirror:
        ``None`` to use the network, or a local directory / base URL (or a list of them) that
        replaces the upstream URLs; see :func:`mirror_sources`.
    subdir:
        Sub-folder tried first inside each mirror.
    attempts:
        Number of tries in all when network sources are involved: every source is tried once,
        then the http(s) sources are cycled until ``attempts`` tries; local files (mirror
        directories, ``file://``) are never retried. Must be >= 1.
    timeout:
        Socket timeout in seconds for http(s) sources.
    checksum_key:
        Where ``checksum`` came from (a config key), named in errors as the thing to correct.

    Raises
    ------
    ChecksumError
        If ``dest`` already exists with another checksum (it is left as it is), or if some source
        delivered bytes with the wrong checksum and none delivered the right ones.
    DownloadError
        If no source could be read at all.
    """
    expected = _check_checksum(checksum, algorithm)
    if int(attempts) < 1:
        raise ValueError(f"attempts must be >= 1, got {attempts!r}")
    urls = [url] if isinstance(url, str) else list(url)
    if not urls:
        raise ValueError("no URL given")
    dest = Path(dest)
    filename = _basename_of(urls[0])

    if dest.is_file():
        _check_existing(dest, algorithm, expected, checksum_key)
        log.debug("%s already present with the expected %s", dest, algorithm)
        return dest

    sources = urls if mirror is None else mirror_sources(mirror, filename, subdir)
    dest.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(dest, ".part")  # left by a fetch killed with SIGKILL
    order = try_order(sources, int(attempts))
    failures: list[str] = []
    mismatch = False
    for i, source in enumerate(order):
        if i >= len(sources):
            time.sleep(_RETRY_PAUSE)  # a repeated network try: give a transient fault a moment
        fd, tmp_name = tempfile.mkstemp(prefix=temp_prefix(dest), suffix=".part", dir=dest.parent)
        tmp = Path(tmp_name)
        try:
            try:
                with os.fdopen(fd, "wb") as fh:
                    actual = _copy_source(source, fh, algorithm, timeout)
                    fh.flush()
                    os.fsync(fh.fileno())
            except (OSError, urllib.error.URLError, http.client.HTTPException, ValueError) as exc:
                failures.append(f"try {i + 1}: {source}: could not read ({exc})")
                log.warning("fetch %s failed: %s", source, exc)
                continue
            if actual != expected:
                mismatch = True
                local = "" if _is_network(source) else " (a local file: not retried)"
                failures.append(
                    f"try {i + 1}: {source}: checksum mismatch, expected {algorithm} {expected}, "
                    f"got {actual}{local}"
                )
                log.warning("fetch %s: %s mismatch (got %s)", source, algorithm, actual)
                continue
            os.chmod(tmp, 0o644)  # mkstemp creates 0600
            _place_new(tmp, dest, algorithm, expected, checksum_key)
            log.info("fetched %s -> %s (%s ok)", source, dest, algorithm)
            return dest
        finally:
            if tmp.exists():
                tmp.unlink()

    n_tries = len(order)
    kind = ChecksumError if mismatch else DownloadError
    fix = (
        "\nEither the source is damaged (replace it) or the expected checksum is wrong: "
        f"check {checksum_key}."
        if mismatch
        else ""
    )
    raise kind(
        f"could not obtain {filename!r} for {str(dest)!r} with {algorithm} {expected} "
        f"after {n_tries} {'try' if n_tries == 1 else 'tries'}:\n  " + "\n  ".join(failures) + fix
    )


__all__ = [
    "ALGORITHMS",
    "ChecksumError",
    "DownloadError",
    "fetch",
    "file_digest",
    "mirror_sources",
]
