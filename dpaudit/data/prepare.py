"""Prepare one standard dataset file per experiment (the file the training rule reads).

The file is an ``.npz`` with ``x_train, y_train, x_test, y_test`` and a JSON ``meta`` string,
written atomically.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from dpaudit.data.synthetic import make_synthetic
from dpaudit.io import atomic_path

DATASETS = ("synthetic",)


def save_dataset(out: str | Path, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
    with atomic_path(out) as tmp:
        with open(tmp, "wb") as fh:
            np.savez(fh, **arrays, meta=np.array(json.dumps(meta, sort_keys=True)))


def load_dataset(path: str | Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in ("x_train", "y_train", "x_test", "y_test")}


def prepare_dataset(
    name: str, params: dict[str, Any], root: str | None, mirror: str | None, out: str
) -> None:
    """Build dataset ``name`` with ``params`` and write it to ``out``."""
    if name == "synthetic":
        arrays = make_synthetic(**params)
    else:
        raise ValueError(f"unknown dataset {name!r}; allowed: {list(DATASETS)}")
    save_dataset(out, arrays, {"name": name, **params})
