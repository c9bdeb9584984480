"""A seeded, procedurally generated classification dataset (no network needed).

Gaussian class clusters: each class c has a centre mu_c ~ N(0, separation^2 I_d / d) and
points are x = mu_c + N(0, I_d / d) (so ||x|| is O(1) whatever d), split into train and test.
"""

from __future__ import annotations

import numpy as np


def make_synthetic(
    n_train: int = 2000,
    n_test: int = 1000,
    n_features: int = 20,
    n_classes: int = 10,
    separation: float = 3.0,
    seed: int = 0,
    canary_pool: int = 0,
) -> dict[str, np.ndarray]:
    """Return ``x_train, y_train, x_test, y_test`` (float32 features, int64 labels), plus
    ``x_canary, y_canary``: ``canary_pool`` further held-out points of the same distribution
    (for in-distribution and mislabeled canaries)."""
    if min(n_train, n_test, n_features) < 1 or n_classes < 2:
        raise ValueError("need n_train, n_test, n_features >= 1 and n_classes >= 2")
    rng = np.random.default_rng(seed)
    scale = 1.0 / np.sqrt(n_features)
    centres = rng.normal(0.0, separation * scale, size=(n_classes, n_features))
    n = n_train + n_test
    y = rng.integers(0, n_classes, size=n)
    x = centres[y] + rng.normal(0.0, scale, size=(n, n_features))
    out = {
        "x_train": x[:n_train].astype(np.float32),
        "y_train": y[:n_train].astype(np.int64),
        "x_test": x[n_train:].astype(np.float32),
        "y_test": y[n_train:].astype(np.int64),
    }
    if canary_pool:
        pool = np.random.default_rng([seed, 1])  # a separate stream: train/test stay unchanged
        yc = pool.integers(0, n_classes, size=canary_pool)
        xc = centres[yc] + pool.normal(0.0, scale, size=(canary_pool, n_features))
        out["x_canary"] = xc.astype(np.float32)
        out["y_canary"] = yc.astype(np.int64)
    return out
