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


def _pick(n_pool: int, m: int, seed: int, what: str) -> np.ndarray:
    if m > n_pool:
        raise ValueError(
            f"{what}: {m} canaries asked from a pool of {n_pool} records (raise the dataset's "
            "canary_pool)"
        )
    return np.random.default_rng(seed).choice(n_pool, size=m, replace=False)


def mislabeled(
    x_pool: np.ndarray, y_pool: np.ndarray, m: int, n_classes: int, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Steinke et al. 2023 §4.2 black-box canaries (1): ``m`` held-out records (never in the
    training or test split) with their label replaced by a uniformly random *different* label."""
    idx = _pick(len(y_pool), m, seed, "mislabeled canaries")
    rng = np.random.default_rng([seed, 1])
    shift = rng.integers(1, n_classes, size=m)  # in 1..k-1, so the new label differs
    y = (y_pool[idx] + shift) % n_classes
    return x_pool[idx].astype(np.float32), y.astype(np.int64)


def in_distribution(
    x_pool: np.ndarray, y_pool: np.ndarray, m: int, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Steinke et al. 2023 §4.2 black-box canaries (2): ``m`` held-out records, labels kept."""
    idx = _pick(len(y_pool), m, seed, "in-distribution canaries")
    return x_pool[idx].astype(np.float32), y_pool[idx].astype(np.int64)


def tail_components(x_train: np.ndarray, first: int, last: int) -> tuple[np.ndarray, np.ndarray]:
    """Principal directions ``first .. last-1`` (0-based, in *descending* variance order) of the
    centred training inputs, and the mean: rows of ``V^T`` of ``X - mean = U S V^T``.

    LiDP (Pillutla et al. 2023, App. D.1) uses the tail range [500, 784) on FMNIST
    and [300, 600) on Purchase-100, as the authors' code does (sklearn PCA, centred).
    """
    x = x_train.reshape(len(x_train), -1).astype(np.float64)
    d = x.shape[1]
    if not 0 <= first < last <= d:
        raise ValueError(f"principal components [{first}, {last}) outside [0, {d}) of the inputs")
    mean = x.mean(0)
    _, _, vt = np.linalg.svd(x - mean, full_matrices=True)
    return vt[first:last], mean


def clipbkd(
    x_train: np.ndarray,
    n: int,
    first: int,
    last: int,
    label: int | None,
    scale: float = 1.0,
    seed: int = 0,
    n_classes: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Lifted ClipBKD canaries (LiDP App. D.1, after Jagielski et al. 2020): ``n`` inputs
    ``mean + scale * v_j`` with ``v_j`` drawn without replacement from the tail principal
    directions ``[first, last)``. Without replacement, so canary ids are unique within a trial
    (the paper draws i.i.d.; the difference is small when ``n`` is small against
    ``last - first``).

    Labels: ``label`` an int gives every canary that class (the authors' code; the paper's
    per-canary worst label needs ~100 extra trainings). ``label=None`` gives each canary its
    own uniformly random class of ``range(n_classes)`` (from ``seed``, a stream independent of
    the directions'): the inserted half of the pool then does not teach the model one class
    for every input near the mean, which would lower the loss of the null half too.
    """
    comps, mean = tail_components(x_train, first, last)
    idx = _pick(len(comps), n, seed, "ClipBKD canaries")
    x = (mean + scale * comps[idx]).reshape((n, *x_train.shape[1:]))
    if label is None:
        if n_classes is None or n_classes < 2:
            raise ValueError(f"ClipBKD random labels need n_classes >= 2, got {n_classes!r}")
        rng = np.random.default_rng([seed, 1])
        y = rng.integers(0, n_classes, size=n).astype(np.int64)
    else:
        y = np.full(n, int(label), dtype=np.int64)
    return x.astype(np.float32), y
