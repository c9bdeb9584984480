"""Real data sets shipped inside an installed package: offline everywhere, no download.

``digits``: the UCI optical-recognition handwritten digits test set as bundled with scikit-learn
(``sklearn.datasets.load_digits``; Alpaydin and Kaynak 1998): 1,797 real 8x8 grey-scale images of
the digits 0-9, pixel values 0..16, 174-183 images per class. It is the real image data set that
runs with no network and no mirror, so the CPU-scale real-data configs use it where the papers use
MNIST / FashionMNIST / CIFAR-10 (``docs/data.md``).

The file inside the package is checked: the SHA-256 of the pixel bytes (uint8) followed by the
labels (int64) must equal :data:`DIGITS_SHA256`, so a damaged or changed copy fails loudly.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from dpaudit.data.catalog import CATALOG

#: SHA-256 of ``images.astype(uint8).tobytes() + target.astype(int64).tobytes()``, the rows
#: and the classes of the digits: the catalog's entry (:mod:`dpaudit.data.catalog`).
DIGITS_SHA256 = str(CATALOG["digits"].sha256)
DIGITS_ROWS = int(CATALOG["digits"].rows or 0)
DIGITS_CLASSES = int(CATALOG["digits"].classes or 0)


def digits_checksum(images: np.ndarray, target: np.ndarray) -> str:
    """The checksum :data:`DIGITS_SHA256` is compared with."""
    payload = np.ascontiguousarray(images.astype(np.uint8)).tobytes()
    payload += np.ascontiguousarray(target.astype(np.int64)).tobytes()
    return hashlib.sha256(payload).hexdigest()


def load_digits(sha256: str | None = None) -> dict[str, Any]:
    """The digits as ``x`` uint8 (1797, 1, 8, 8) in 0..16, ``y`` int64 labels 0..9.

    Raises ``ValueError`` naming the package file when its content does not match the checksum
    (``sha256`` overrides the pinned value), and ``ImportError`` with the install command when
    scikit-learn is missing.
    """
    try:
        from sklearn import datasets
    except ImportError as err:  # pragma: no cover - scikit-learn is a dependency
        raise ImportError("dataset 'digits' needs scikit-learn (pip install scikit-learn)") from err
    raw = datasets.load_digits()
    images, target = np.asarray(raw.images), np.asarray(raw.target)
    where = f"{datasets.__name__}.load_digits (digits.csv.gz inside scikit-learn)"
    if images.shape != (DIGITS_ROWS, 8, 8) or target.shape != (DIGITS_ROWS,):
        raise ValueError(f"{where}: expected {DIGITS_ROWS} 8x8 images, got {images.shape}")
    want = sha256 or DIGITS_SHA256
    got = digits_checksum(images, target)
    if got != want:
        raise ValueError(f"{where}: SHA-256 {got} does not match the expected {want}")
    return {
        "x": images.astype(np.uint8)[:, None, :, :],
        "y": target.astype(np.int64),
        "classes": [str(c) for c in range(DIGITS_CLASSES)],
        "sources": [{"file": where, "sha256": got}],
    }
