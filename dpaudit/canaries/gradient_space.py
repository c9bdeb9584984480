"""Gradient-space canaries: fixed vectors in parameter space that replace an example's gradient.

The trainer treats a gradient canary like a training example whose (clipped) per-sample gradient
is always this vector, Poisson-sampled (or shuffled) like every other example
(:class:`dpaudit.training.vectorized.ShardData`). Vectors are flat, in ``named_parameters`` order.
"""

from __future__ import annotations

import numpy as np


def dirac(m: int, n_params: int, norm: float, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Dirac canaries (Nasr et al. 2023; Steinke et al. 2023 §4.1): canary ``i`` is
    ``norm * e_{j_i}`` with *distinct* random coordinates ``j_i`` ("no repetitions").
    ``norm`` is the clipping norm C (so clipping leaves it unchanged; our choice [UNCLEAR in
    the paper]). Returns the vectors (m, n_params) and the coordinates (m,)."""
    if m > n_params:
        raise ValueError(
            f"{m} Dirac canaries need {m} distinct coordinates; the model has {n_params}"
        )
    coords = np.random.default_rng(seed).choice(n_params, size=m, replace=False)
    v = np.zeros((m, n_params), dtype=np.float32)
    v[np.arange(m), coords] = norm
    return v, coords


def random_direction(m: int, n_params: int, norm: float, seed: int = 0) -> np.ndarray:
    """Random-gradient canaries (Andrew et al.; LiDP App. D.2): uniform directions on the sphere
    of radius ``norm`` (= C in the authors' code; the paper says the ball), (m, n_params)."""
    g = np.random.default_rng(seed).standard_normal((m, n_params))
    return (norm * g / np.linalg.norm(g, axis=1, keepdims=True)).astype(np.float32)
