"""MNIST, FashionMNIST, CIFAR-10 and SVHN: our downloader fetches, torchvision parses.

The URLs and MD5 checksums are read at call time from the torchvision dataset classes themselves
(``MNIST.mirrors``/``MNIST.resources``, ``CIFAR10.url``/``tgz_md5``, ``SVHN.split_list``), so the
published values stay torchvision's. :func:`dpaudit.data.download.fetch` fetches each raw file
(honouring ``mirror``), verifies its MD5, and places it where torchvision expects it:

===============  ===========================================================================
MNIST            ``<root>/MNIST/raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]``
FashionMNIST     ``<root>/FashionMNIST/raw/...`` (same file names as MNIST)
CIFAR-10         ``<root>/cifar-10-python.tar.gz``, extracted to ``<root>/cifar-10-batches-py``
SVHN             ``<root>/{train,test}_32x32.mat``
===============  ===========================================================================

Decompression (gzip) and extraction (tar, with the ``"data"`` safety filter) write into
temporaries that are renamed into place, so an interrupted run never leaves a partial file.
torchvision then parses the files with ``download=False`` (and re-checks the CIFAR batch and SVHN
``.mat`` MD5s itself).

:func:`load_vision` returns uint8 images in NCHW layout and int64 labels; :func:`to_float` turns
images into float32 in [0, 1], optionally standardised per channel.
"""

from __future__ import annotations

import contextlib
import fcntl
import gzip
import os
import shutil
import tarfile
import tempfile
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dpaudit.data.catalog import of_kind
from dpaudit.data.download import fetch
from dpaudit.io import atomic_path
from dpaudit.opacus_import import import_torchvision

#: Data set names handled here, mapped to the torchvision class name (the catalog's).
VISION_DATASETS: dict[str, str] = {
    n: str(e.torchvision_class) for n, e in of_kind("vision").items()
}
#: Number of classes of each data set (the catalog's).
NUM_CLASSES: dict[str, int] = {n: int(e.classes or 0) for n, e in of_kind("vision").items()}

Mirror = str | os.PathLike | Sequence[str | os.PathLike] | None


@dataclass(frozen=True)
class Resource:
    """One raw file: where it is published, its MD5, and where it goes under ``root``."""

    urls: tuple[str, ...]
    filename: str
    md5: str
    dest: str  # path relative to root


class RawDataError(ValueError):
    """A raw data file cannot be read; the message names it and says how to fix it."""


def _delete_hint(path: Path) -> str:
    return f"delete {path} and rerun to fetch it again (and check the checksum it was given)"


def _tv_class(name: str):
    tvd = import_torchvision().datasets

    if name not in VISION_DATASETS:
        raise ValueError(f"unknown vision data set {name!r}; known: {sorted(VISION_DATASETS)}")
    return getattr(tvd, VISION_DATASETS[name])


def vision_resources(name: str) -> list[Resource]:
    """The raw files of data set ``name``, as torchvision's class attributes publish them."""
    cls = _tv_class(name)
    if name in ("mnist", "fashionmnist"):
        raw = f"{cls.__name__}/raw"
        return [
            Resource(tuple(m + fn for m in cls.mirrors), fn, md5, f"{raw}/{fn}")
            for fn, md5 in cls.resources
        ]
    if name == "cifar10":
        return [Resource((cls.url,), cls.filename, cls.tgz_md5, cls.filename)]
    # svhn: the 'extra' split is not used.
    return [
        Resource((url,), fn, md5, fn)
        for split, (url, fn, md5) in cls.split_list.items()
        if split in ("train", "test")
    ]


def _gunzip_atomic(src: Path, dest: Path) -> None:
    try:
        with atomic_path(dest) as tmp:
            with gzip.open(src, "rb") as fin, open(tmp, "wb") as fout:
                shutil.copyfileobj(fin, fout, 1 << 20)
            os.chmod(tmp, 0o644)
    except (OSError, EOFError, zlib.error) as exc:
        raise RawDataError(f"{src}: cannot decompress ({exc}); {_delete_hint(src)}") from exc


def _gzip_size(src: Path) -> int:
    """The uncompressed size modulo 2**32 that a (single-member) gzip file records last."""
    with open(src, "rb") as fh:
        fh.seek(-4, os.SEEK_END)
        return int.from_bytes(fh.read(4), "little")


def _decompressed_ok(src: Path, plain: Path) -> bool:
    """``plain`` is a complete decompression of ``src``: newer, and of the recorded size."""
    if not plain.is_file() or plain.stat().st_mtime < src.stat().st_mtime:
        return False
    return plain.stat().st_size % 2**32 == _gzip_size(src)


def _cifar_extracted_ok(cls, root: Path) -> bool:
    import_torchvision()
    from torchvision.datasets.utils import check_integrity

    folder = root / cls.base_folder
    files = [*cls.train_list, *cls.test_list, [cls.meta["filename"], cls.meta["md5"]]]
    return all(check_integrity(str(folder / fn), md5) for fn, md5 in files)


def _untar_atomic(archive: Path, root: Path, folder: str) -> None:
    """Extract ``archive`` into a temporary folder under ``root``; move ``folder`` into place."""
    tmpdir = Path(tempfile.mkdtemp(prefix=".extract.", dir=root))
    try:
        try:
            with tarfile.open(archive, "r:*") as tar:
                tar.extractall(tmpdir, filter="data")
        except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
            raise RawDataError(
                f"{archive}: not a readable tar archive ({exc}); {_delete_hint(archive)}"
            ) from exc
        extracted = tmpdir / folder
        if not extracted.is_dir():
            raise RuntimeError(f"{archive} does not contain the folder {folder!r}")
        target = root / folder
        if target.exists():
            shutil.rmtree(target)
        os.replace(extracted, target)
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)


@contextlib.contextmanager
def root_lock(root: Path, name: str) -> Iterator[None]:
    """Exclusive advisory lock (``flock``) on ``<root>/.<name>.lock`` while files are placed.

    Parallel jobs sharing a root then never extract over each other; each fetch is atomic anyway.
    """
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f".{name}.lock", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def ensure_vision_files(
    name: str,
    root: str | os.PathLike,
    mirror: Mirror = None,
    checksums: dict[str, str] | None = None,
) -> list[dict[str, str]]:
    """Fetch, verify and place the raw files of ``name`` under ``root``; return their provenance.

    ``checksums`` maps a file name to an MD5 that replaces torchvision's (for tests and for
    re-published copies); by default torchvision's published MD5s are used.
    """
    root = Path(root)
    checksums = dict(checksums or {})
    resources = vision_resources(name)
    unknown = set(checksums) - {r.filename for r in resources}
    if unknown:
        raise ValueError(
            f"checksums given for file(s) {sorted(unknown)} that {name} does not use; "
            f"its files are {[r.filename for r in resources]}"
        )
    cls = _tv_class(name)
    provenance = []
    with root_lock(root, name):
        for r in resources:
            provenance.append(_place(name, cls, root, r, checksums.get(r.filename, r.md5), mirror))
    return provenance


def _place(name: str, cls, root: Path, r: Resource, md5: str, mirror: Mirror) -> dict[str, str]:
    """Fetch one raw file and decompress/extract it where torchvision looks."""
    record = {"file": r.filename, "url": r.urls[0], "md5": md5}
    dest = root / r.dest
    if name == "cifar10" and _cifar_extracted_ok(cls, root):
        return record
    key = (
        f"the config key experiments.<experiment>.dataset.checksums[{r.filename!r}]"
        if md5 != r.md5
        else f"torchvision's published MD5 (override: dataset.checksums[{r.filename!r}])"
    )
    fetch(list(r.urls), dest, md5, "md5", mirror, subdir=cls.__name__, checksum_key=key)
    if name in ("mnist", "fashionmnist"):
        plain = dest.with_suffix("")
        if not _decompressed_ok(dest, plain):  # absent, stale, or truncated
            _gunzip_atomic(dest, plain)
    elif name == "cifar10":
        _untar_atomic(dest, root, cls.base_folder)
    return record


def _split_arrays(name: str, root: Path, train: bool) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """torchvision's parse of one split; a parse failure names the folder and the fix."""
    try:
        return _parse_split(name, root, train)
    except (RuntimeError, ValueError, OSError, EOFError, KeyError, AssertionError) as exc:
        split = "train" if train else "test"
        raise RawDataError(
            f"{root}: torchvision cannot parse the {name} {split} files there "
            f"({type(exc).__name__}: {exc}); delete the data set's files under {root} and "
            "rerun to fetch them again"
        ) from exc


def _parse_split(name: str, root: Path, train: bool) -> tuple[np.ndarray, np.ndarray, list[str]]:
    cls = _tv_class(name)
    if name == "svhn":
        ds = cls(str(root), split="train" if train else "test", download=False)
        x = np.asarray(ds.data)  # torchvision already gives (N, 3, 32, 32)
        y = np.asarray(ds.labels)
        classes = [str(i) for i in range(10)]
    elif name == "cifar10":
        ds = cls(str(root), train=train, download=False)
        x = np.asarray(ds.data).transpose(0, 3, 1, 2)  # NHWC -> NCHW
        y = np.asarray(ds.targets)
        classes = list(ds.classes)
    else:
        ds = cls(str(root), train=train, download=False)
        x = ds.data.numpy()[:, None, :, :]
        y = ds.targets.numpy()
        classes = list(ds.classes)
    x = np.ascontiguousarray(x, dtype=np.uint8)
    y = np.asarray(y, dtype=np.int64)
    if x.shape[0] != y.shape[0]:
        raise RuntimeError(f"{name}: {x.shape[0]} images but {y.shape[0]} labels")
    return x, y, classes


def load_vision(
    name: str,
    root: str | os.PathLike,
    mirror: Mirror = None,
    checksums: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Fetch (if needed) and parse data set ``name``.

    Returns a dict with ``x_train``/``x_test`` (uint8, shape ``(N, C, H, W)``), ``y_train``/
    ``y_test`` (int64 in ``[0, 10)``), ``classes`` (class names) and ``sources`` (provenance:
    file, URL, MD5).
    """
    root = Path(root)
    sources = ensure_vision_files(name, root, mirror, checksums)
    x_train, y_train, classes = _split_arrays(name, root, train=True)
    x_test, y_test, _ = _split_arrays(name, root, train=False)
    k = NUM_CLASSES[name]
    for split, y in (("train", y_train), ("test", y_test)):
        if y.size and (y.min() < 0 or y.max() >= k):
            raise RuntimeError(f"{name} {split} labels outside [0, {k}): {np.unique(y)}")
    return {
        "x_train": x_train,
        "y_train": y_train,
        "x_test": x_test,
        "y_test": y_test,
        "classes": classes,
        "sources": sources,
    }


def channel_stats(x: np.ndarray) -> tuple[list[float], list[float]]:
    """Per-channel mean and standard deviation of uint8 NCHW images, on the [0, 1] scale."""
    if x.ndim != 4 or x.shape[0] == 0:
        raise ValueError(f"need a non-empty (N, C, H, W) array, got shape {x.shape}")
    xf = x.astype(np.float64) / 255.0
    mean = xf.mean(axis=(0, 2, 3))
    std = xf.std(axis=(0, 2, 3))
    if np.any(std <= 0):
        raise ValueError(f"a channel is constant (std {std.tolist()}); cannot standardise")
    return mean.tolist(), std.tolist()


def to_float(
    x: np.ndarray,
    mean: Sequence[float] | None = None,
    std: Sequence[float] | None = None,
) -> np.ndarray:
    """uint8 NCHW images -> float32 in [0, 1]; then ``(x - mean) / std`` per channel if given."""
    out = x.astype(np.float32) / np.float32(255.0)
    if (mean is None) != (std is None):
        raise ValueError("give both mean and std, or neither")
    if mean is not None:
        m = np.asarray(mean, dtype=np.float32).reshape(1, -1, 1, 1)
        s = np.asarray(std, dtype=np.float32).reshape(1, -1, 1, 1)
        if m.shape[1] != x.shape[1] or s.shape[1] != x.shape[1]:
            raise ValueError(f"mean/std need {x.shape[1]} channel values")
        out = (out - m) / s
    return out
