"""Which canaries go into training."""

from __future__ import annotations

import numpy as np


def fair_coins(m: int, seed: int) -> np.ndarray:
    """One-run design (Steinke et al. 2023, Algorithm 1 step 3): canary i is included iff an
    independent fair coin S_i lands +1. Returns the 0/1 membership vector."""
    return np.random.default_rng(seed).integers(0, 2, size=m).astype(np.int8)


def lidp_split(pool_size: int, k: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """LiDP replace-one design (Pillutla et al. 2023, App. B.2, Eq. 12): draw ``2k`` distinct
    canaries from a pool; the first ``k`` are inserted, the other ``k`` are fresh null canaries
    that are never inserted and are scored on the same model. Returns (inserted, null) ids."""
    if 2 * k > pool_size:
        raise ValueError(f"LiDP needs 2k = {2 * k} distinct canaries; the pool has {pool_size}")
    ids = np.random.default_rng(seed).choice(pool_size, size=2 * k, replace=False)
    return ids[:k], ids[k:]


def single_target_coin(seed: int) -> int:
    """Multi-run design: one target canary, included in a trial iff a fair coin lands 1."""
    return int(np.random.default_rng(seed).integers(0, 2))
