"""Which canaries go into training."""

from __future__ import annotations

import numpy as np


def fair_coins(m: int, seed: int) -> np.ndarray:
    """One-run design (Steinke et al. 2023, Algorithm 1 step 3): canary i is included iff an
    independent fair coin S_i lands +1. Returns the 0/1 membership vector."""
    return np.random.default_rng(seed).integers(0, 2, size=m).astype(np.int8)
