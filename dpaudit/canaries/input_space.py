"""Input-space canaries: examples inserted into the training set."""

from __future__ import annotations

import numpy as np


def random_inputs(
    m: int, n_features: int, n_classes: int, scale: float = 1.0, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """``m`` canaries with i.i.d. N(0, scale^2 / d) features and uniformly random labels.

    Random points with random labels are far from any class structure, so a model can only
    fit them by memorising them: the simplest black-box canary.
    """
    rng = np.random.default_rng(seed)
    x = rng.normal(0.0, scale / np.sqrt(n_features), size=(m, n_features)).astype(np.float32)
    y = rng.integers(0, n_classes, size=m).astype(np.int64)
    return x, y
