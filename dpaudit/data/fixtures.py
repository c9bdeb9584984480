"""Writers of small files in the data sets' real on-disk formats, for tests and offline mirrors.

Each writer produces exactly what the upstream publishes, at any size:

* :func:`write_idx_gz` -- gzip-compressed IDX (the MNIST/FashionMNIST format; LeCun et al.):
  a big-endian header ``0x00 0x00 <type 0x08 = ubyte> <ndim>``, then ``ndim`` big-endian uint32
  sizes, then the raw bytes. Images use magic 2051 (``0x00000803``), labels 2049 (``0x00000801``).
* :func:`write_cifar_tarball` -- the "python version" of CIFAR-10: a gzip tar holding
  ``cifar-10-batches-py/{data_batch_1..5,test_batch,batches.meta}``, each a pickled dict with
  ``data`` (uint8, (n, 3072), channel-major rows) and ``labels`` (list of int).
* :func:`write_svhn_mat` -- SVHN's "format 2" MATLAB file: ``X`` (32, 32, 3, n) uint8 and ``y``
  (n, 1) with the digit 0 stored as label 10.
* :func:`write_shokri_table` -- the Location/Purchase archives: a gzip tar with one header-less
  CSV member, label first (1-based; Location writes it in double quotes), then 0/1 features.

:func:`make_mirror` writes a whole mirror directory (``<dir>/<subdir>/<file>``) for one data set
and returns the checksums of the files it wrote, so a pipeline can run end to end offline.
"""

from __future__ import annotations

import gzip
import io
import os
import pickle
import struct
import tarfile
from pathlib import Path
from typing import Any

import numpy as np

from dpaudit.data.download import file_digest

IDX_IMAGES_MAGIC = 0x00000803
IDX_LABELS_MAGIC = 0x00000801


def write_idx_gz(path: str | os.PathLike, array: np.ndarray) -> Path:
    """Write a uint8 array (1-D labels or 3-D images) as gzip-compressed IDX."""
    a = np.ascontiguousarray(array, dtype=np.uint8)
    if a.ndim not in (1, 3):
        raise ValueError(f"IDX writer takes 1-D labels or 3-D images, got shape {a.shape}")
    header = struct.pack(">I", 0x00000800 | a.ndim) + struct.pack(f">{a.ndim}I", *a.shape)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wb") as f:
        f.write(header + a.tobytes())
    return path


def _tar_add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))


def write_cifar_tarball(
    path: str | os.PathLike,
    x_train: np.ndarray,
    y_train: np.ndarray,
    x_test: np.ndarray,
    y_test: np.ndarray,
    label_names: list[str],
) -> dict[str, str]:
    """Write a CIFAR-10 python tarball; return the MD5 of each member file (torchvision checks)."""
    import hashlib

    def batch(x: np.ndarray, y: np.ndarray, name: str) -> bytes:
        x = np.ascontiguousarray(x, dtype=np.uint8).reshape(len(x), -1)
        d = {
            "batch_label": name,
            "labels": [int(v) for v in y],
            "data": x,
            "filenames": [f"{name}_{i}.png" for i in range(len(x))],
        }
        return pickle.dumps(d, protocol=2)

    members: dict[str, bytes] = {}
    for i, (xs, ys) in enumerate(
        zip(np.array_split(x_train, 5), np.array_split(y_train, 5), strict=True)
    ):
        members[f"data_batch_{i + 1}"] = batch(xs, ys, f"training batch {i + 1} of 5")
    members["test_batch"] = batch(x_test, y_test, "testing batch 1 of 1")
    members["batches.meta"] = pickle.dumps(
        {"label_names": list(label_names), "num_cases_per_batch": len(x_test), "num_vis": 3072},
        protocol=2,
    )
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            _tar_add(tar, f"cifar-10-batches-py/{name}", data)
    return {name: hashlib.md5(data).hexdigest() for name, data in members.items()}


def write_svhn_mat(path: str | os.PathLike, x: np.ndarray, y: np.ndarray) -> Path:
    """Write SVHN format 2: ``x`` uint8 (n, 3, 32, 32), ``y`` digits 0..9 (0 stored as 10)."""
    import scipy.io

    x = np.asarray(x, dtype=np.uint8)
    labels = np.asarray(y, dtype=np.uint8).copy()
    labels[labels == 0] = 10
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    scipy.io.savemat(path, {"X": x.transpose(2, 3, 1, 0), "y": labels.reshape(-1, 1)})
    return path


def write_shokri_table(
    path: str | os.PathLike, member: str, x: np.ndarray, y: np.ndarray, quote_labels: bool
) -> Path:
    """Write a Location/Purchase-style archive: one CSV member, 1-based label then 0/1 features."""
    x = np.asarray(x, dtype=np.int64)
    lines = []
    for label, row in zip(np.asarray(y, dtype=np.int64), x, strict=True):
        lab = f'"{label}"' if quote_labels else str(label)
        lines.append(lab + "," + ",".join(map(str, row)))
    data = ("\n".join(lines) + "\n").encode()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as tar:
        _tar_add(tar, member, data)
    return path


def make_mirror(
    mirror: str | os.PathLike,
    name: str,
    n_train: int = 50,
    n_test: int = 30,
    seed: int = 0,
    features: int | None = None,
    classes: int | None = None,
) -> dict[str, Any]:
    """Write a small mirror of data set ``name`` under ``<mirror>/<subdir>/``.

    Returns ``{"checksums": {file: digest}, "algorithm": "md5" | "sha256", "subdir": ...,
    "member_md5": {...}}`` (``member_md5`` only for CIFAR-10: the batch MD5s torchvision checks).
    Labels cycle through all classes so every class is present. Tables get ``n_train + n_test``
    rows, ``features`` columns (default: the real count) and ``classes`` classes.
    """
    rng = np.random.default_rng(seed)
    mirror = Path(mirror)
    out: dict[str, Any] = {"checksums": {}, "member_md5": {}}

    def labels(n: int, k: int) -> np.ndarray:
        return rng.permutation(np.arange(n) % k)

    if name in ("mnist", "fashionmnist"):
        sub = "MNIST" if name == "mnist" else "FashionMNIST"
        for prefix, n in (("train", n_train), ("t10k", n_test)):
            imgs = write_idx_gz(
                mirror / sub / f"{prefix}-images-idx3-ubyte.gz",
                rng.integers(0, 256, (n, 28, 28), dtype=np.uint8),
            )
            labs = write_idx_gz(mirror / sub / f"{prefix}-labels-idx1-ubyte.gz", labels(n, 10))
            for p in (imgs, labs):
                out["checksums"][p.name] = file_digest(p, "md5")
        out.update(algorithm="md5", subdir=sub)
    elif name == "cifar10":
        sub = "CIFAR10"
        p = mirror / sub / "cifar-10-python.tar.gz"
        out["member_md5"] = write_cifar_tarball(
            p,
            rng.integers(0, 256, (n_train, 3, 32, 32), dtype=np.uint8),
            labels(n_train, 10),
            rng.integers(0, 256, (n_test, 3, 32, 32), dtype=np.uint8),
            labels(n_test, 10),
            [
                "airplane",
                "automobile",
                "bird",
                "cat",
                "deer",
                "dog",
                "frog",
                "horse",
                "ship",
                "truck",
            ],
        )
        out["checksums"][p.name] = file_digest(p, "md5")
        out.update(algorithm="md5", subdir=sub)
    elif name == "svhn":
        sub = "SVHN"
        for split, n in (("train", n_train), ("test", n_test)):
            p = write_svhn_mat(
                mirror / sub / f"{split}_32x32.mat",
                rng.integers(0, 256, (n, 3, 32, 32), dtype=np.uint8),
                labels(n, 10),
            )
            out["checksums"][p.name] = file_digest(p, "md5")
        out.update(algorithm="md5", subdir=sub)
    elif name in ("location", "purchase"):
        real = {"location": (446, 30), "purchase": (600, 100)}[name]
        f = features or real[0]
        k = classes or real[1]
        n = n_train + n_test
        p = write_shokri_table(
            mirror / name / f"dataset_{name}.tgz",
            "bangkok" if name == "location" else "dataset_purchase",
            rng.integers(0, 2, (n, f)),
            labels(n, k) + 1,
            quote_labels=name == "location",
        )
        out["checksums"][p.name] = file_digest(p, "sha256")
        out.update(algorithm="sha256", subdir=name)
    else:
        raise ValueError(f"no mirror writer for {name!r}")
    return out
