"""Shared test fixtures."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# One thread per test process: the suite must stay fast on a 2-core machine.
os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(autouse=True, scope="session")
def _torch_threads():
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:  # pragma: no cover - torch is a hard dependency
        pass
