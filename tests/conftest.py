"""Shared test fixtures."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.shared_data import ARCHIVE, REQUIRE_ENV, SHARED_ENV, shared_dir, shared_required

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


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The folder holding the real offline data (``../shared``).

    Skips with the reason on a fresh clone; fails instead when ``DPAUDIT_REQUIRE_SHARED=1``
    (CI), so the real-data tests can never pass there by skipping.
    """
    shared, tried = shared_dir()
    if shared is not None:
        return shared
    where = ", ".join(str(t) for t in tried)
    msg = f"real data not found: no {ARCHIVE} under {where} (set {SHARED_ENV} to its folder)"
    if shared_required():
        pytest.fail(f"{msg}; {REQUIRE_ENV} is set, so this is an error, not a skip")
    pytest.skip(f"{msg}; put the shared data folder beside the clone to run this test")
