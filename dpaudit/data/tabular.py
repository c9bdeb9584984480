"""Location-30 and Purchase-100: the pre-processed tables of Shokri et al. (2017).

Both are published as gzip-compressed tar archives in the ``privacytrustlab/datasets`` GitHub
repository, each holding one comma-separated file without a header: first column the class label
(1-based, in double quotes in Location's file), then binary {0, 1} features.

=============  ==========================  =======  ========  =======  ===========================
name           archive (member)            rows     features  classes  sha256 of the archive
=============  ==========================  =======  ========  =======  ===========================
location       dataset_location.tgz        5,010    446       30       927203f85a868f8e... (below)
               (``bangkok``)
purchase       dataset_purchase.tgz        197,324  600       100      not pinned: required from
               (``dataset_purchase``)                                  the caller (``sha256``)
=============  ==========================  =======  ========  =======  ===========================

Purchase-100's SHA-256 could not be established offline when this module was written, so
:func:`load_tabular` requires it as an argument (``params["sha256"]`` in the pipeline config)
instead of trusting an unverified value. Location-30's is pinned below (verified against a real
copy of the archive).

Labels are returned 0-based (file label minus one), features as uint8 {0, 1}.
"""

from __future__ import annotations

import io
import os
import tarfile
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dpaudit.data.catalog import of_kind
from dpaudit.data.download import fetch

Mirror = str | os.PathLike | Sequence[str | os.PathLike] | None


@dataclass(frozen=True)
class TabularSpec:
    """Where a table is published and what it must look like once parsed."""

    urls: tuple[str, ...]
    filename: str
    sha256: str | None
    rows: int
    features: int
    classes: int


#: The tables, as the catalog (:mod:`dpaudit.data.catalog`) describes them.
TABULAR_DATASETS: dict[str, TabularSpec] = {
    name: TabularSpec(
        urls=e.urls,
        filename=str(e.filename),
        sha256=e.sha256,
        rows=int(e.rows or 0),
        features=int(e.shape[0]) if e.shape else 0,
        classes=int(e.classes or 0),
    )
    for name, e in of_kind("tabular").items()
}


def _spec(name: str) -> TabularSpec:
    if name not in TABULAR_DATASETS:
        raise ValueError(f"unknown tabular data set {name!r}; known: {sorted(TABULAR_DATASETS)}")
    return TABULAR_DATASETS[name]


def _read_member(archive: Path) -> bytes:
    """Bytes of the single regular file inside a (gzip) tar archive; an unreadable archive
    raises ``ValueError`` naming it."""
    try:
        with tarfile.open(archive, "r:*") as tar:
            files = [m for m in tar.getmembers() if m.isfile()]
            if len(files) != 1:
                raise ValueError(
                    f"{archive}: expected exactly one data file in the archive, found "
                    f"{[m.name for m in files]}"
                )
            fh = tar.extractfile(files[0])
            assert fh is not None
            return fh.read()
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
        raise ValueError(
            f"{archive}: not a readable (gzip) tar archive ({type(exc).__name__}: {exc}); "
            "delete it and rerun to fetch it again, and check the sha256 it was given"
        ) from exc


def parse_table(
    archive: str | os.PathLike, features: int, classes: int, rows: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Parse a Shokri-style table archive into ``(x uint8 (n, features), y int64 in [0, classes))``.

    Checks the column count, that features are binary, that labels are exactly ``1..classes``, and
    (if given) the row count; any violation raises ``ValueError`` naming the file.
    """
    import pandas as pd

    archive = Path(archive)
    raw = _read_member(archive)
    try:
        frame = pd.read_csv(io.BytesIO(raw), header=None, dtype=np.int16)  # overflow raises
    except (ValueError, pd.errors.ParserError) as exc:
        raise ValueError(f"{archive}: not a comma-separated table of integers ({exc})") from exc
    table = frame.to_numpy()
    if table.shape[1] != features + 1:
        raise ValueError(
            f"{archive}: {table.shape[1]} columns, expected 1 label + {features} features"
        )
    if rows is not None and table.shape[0] != rows:
        raise ValueError(f"{archive}: {table.shape[0]} rows, expected {rows}")
    labels = table[:, 0]
    x = table[:, 1:]
    if not np.isin(x, (0, 1)).all():
        raise ValueError(f"{archive}: features are not all 0/1")
    present = np.unique(labels)
    if not np.array_equal(present, np.arange(1, classes + 1)):
        raise ValueError(
            f"{archive}: labels should be exactly 1..{classes}; found {present.size} distinct "
            f"values in [{present.min()}, {present.max()}]"
        )
    return x.astype(np.uint8), labels.astype(np.int64) - 1


def load_tabular(
    name: str,
    root: str | os.PathLike,
    mirror: Mirror = None,
    sha256: str | None = None,
) -> dict[str, Any]:
    """Fetch (if needed) and parse table ``name`` (``"location"`` or ``"purchase"``).

    The archive goes to ``<root>/<name>/<filename>``. ``sha256`` overrides the pinned checksum
    and is required for ``purchase``. Returns ``x`` (uint8), ``y`` (int64), ``classes`` and
    ``sources`` (provenance).
    """
    spec = _spec(name)
    checksum = sha256 if sha256 is not None else spec.sha256
    if checksum is None:
        raise ValueError(
            f"{name}: no SHA-256 is pinned for {spec.filename}; pass its sha256 "
            f"(config: datasets params 'sha256') after checking the file you trust"
        )
    dest = Path(root) / name / spec.filename
    key = (
        "the config key experiments.<experiment>.dataset.sha256"
        if sha256 is not None
        else f"the SHA-256 pinned in dpaudit for {name} (override: dataset.sha256)"
    )
    fetch(list(spec.urls), dest, checksum, "sha256", mirror, subdir=name, checksum_key=key)
    x, y = parse_table(dest, spec.features, spec.classes, spec.rows)
    return {
        "x": x,
        "y": y,
        "classes": [str(i + 1) for i in range(spec.classes)],
        "sources": [{"file": spec.filename, "url": spec.urls[0], "sha256": checksum}],
    }
