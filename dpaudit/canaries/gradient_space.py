"""Gradient-space canaries: fixed vectors in parameter space that replace an example's gradient.

The trainer treats a gradient canary like a training example whose (clipped) per-sample gradient
is always this vector, Poisson-sampled (or shuffled) like every other example
(:class:`dpaudit.training.vectorized.ShardData`). Vectors are flat, in ``named_parameters`` order.

Dense vectors are a (K, P) tensor. Dirac canaries, one non-zero coordinate each, are kept sparse
(:class:`SparseCanaries`: a coordinate and a value per canary), so that their memory is O(K),
not O(K x P): 5000 Dirac canaries on WRN-16-4 (2.7M parameters) take 60 kB (an int64 and a
float32 each) instead of 55 GB.
The functions :func:`dots`, :func:`add_weighted`, :func:`row_norms` and :func:`clip_rows` take
either form and give the same numbers.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import torch

#: Opacus's stabiliser in the clip factor ``min(1, C / (||g|| + 1e-6))`` (:func:`clip_factor`).
CLIP_EPS = 1e-6


def clip_factor(norm: torch.Tensor, max_grad_norm: float) -> torch.Tensor:
    """The factor ``min(1, C / (||g|| + 1e-6))`` that clips a gradient of Euclidean norm
    ``norm`` (a tensor of norms, any shape) to norm at most ``C = max_grad_norm``: Opacus's
    per-sample clip factor (``DPOptimizer.clip_and_accumulate``; Abadi et al. 2016,
    arXiv:1607.00133, Algorithm 1), the one every trainer, canary and placement here uses."""
    return (max_grad_norm / (norm + CLIP_EPS)).clamp(max=1.0)


def gradient_mass(chunks: Iterable[tuple[torch.Tensor, torch.Tensor]]) -> np.ndarray | None:
    """The data's gradient mass: the mean over records (and models) of the absolute clipped
    per-example gradient ``|min(1, C / (||g_i|| + 1e-6)) g_i|``, one value per parameter (flat),
    the quantity a white-box adversary ranks coordinates by to place Dirac canaries where the
    data's gradients move least (Steinke, Nasr, Jagielski 2023, arXiv:2305.08846, Section 4.1).

    ``chunks`` yields ``(g, factor)``: per-example gradients (M, B, P) of M models on B records,
    flat, and their clip factors (M, B) (:func:`clip_factor`), in the dtype each chunk's sum is
    taken in; the chunks' sums add up in float64. None when there are no records."""
    total: torch.Tensor | None = None
    count = 0
    for g, factor in chunks:
        part = torch.einsum("mb,mbp->p", factor, g.abs()).double()
        total = part if total is None else total + part
        count += factor.numel()
    if total is None or count == 0:
        return None
    return (total / count).numpy()


@dataclass(frozen=True)
class SparseCanaries:
    """K gradient canaries with at most one non-zero coordinate each: canary ``k`` is
    ``values[k] * e_{coords[k]}`` in R^``n_params`` (a Dirac canary; a zero vector, e.g. a
    zero-out record, has value 0). The (K, P) matrix is never formed."""

    coords: torch.Tensor  # (K,) int64
    values: torch.Tensor  # (K,) float
    n_params: int

    def __post_init__(self) -> None:
        if self.coords.ndim != 1 or self.coords.shape != self.values.shape:
            raise ValueError(
                f"coords {tuple(self.coords.shape)} and values {tuple(self.values.shape)} "
                "must be two vectors of the same length"
            )
        if self.coords.numel() and (
            int(self.coords.min()) < 0 or int(self.coords.max()) >= self.n_params
        ):
            raise ValueError(f"coordinates must lie in [0, {self.n_params})")

    @property
    def shape(self) -> tuple[int, int]:
        """The shape (K, P) of the dense matrix these canaries stand for."""
        return (int(self.coords.shape[0]), self.n_params)

    def to(self, device: torch.device | str, dtype: torch.dtype) -> SparseCanaries:
        """The same canaries with values of ``dtype`` on ``device``."""
        return SparseCanaries(self.coords.to(device), self.values.to(device, dtype), self.n_params)

    def dense(self) -> torch.Tensor:
        """The (K, P) matrix (for tests and small models)."""
        v = torch.zeros(self.shape, dtype=self.values.dtype, device=self.values.device)
        v[torch.arange(self.shape[0], device=v.device), self.coords] = self.values
        return v

    def fingerprint(self) -> bytes:
        """Bytes that identify the canaries (for a checkpoint's fingerprint)."""
        return (
            self.coords.detach().cpu().numpy().tobytes()
            + self.values.detach().cpu().numpy().tobytes()
            + str(self.n_params).encode()
        )


Canaries = torch.Tensor | SparseCanaries


def dots(vectors: Canaries, x: torch.Tensor) -> torch.Tensor:
    """``x @ V^T``: the dot product of each row of ``x`` (m, P) with each canary, (m, K)."""
    if isinstance(vectors, SparseCanaries):
        return x[:, vectors.coords] * vectors.values.to(x.dtype)
    return x @ vectors.to(x.dtype).T


def add_weighted(flat: torch.Tensor, counts: torch.Tensor, vectors: Canaries) -> torch.Tensor:
    """``flat += counts @ V`` in place: each row of ``flat`` (m, P) plus its canaries weighted
    by ``counts`` (m, K)."""
    if isinstance(vectors, SparseCanaries):
        return flat.index_add_(1, vectors.coords, counts * vectors.values)
    return flat.addmm_(counts, vectors)


def row_norms(vectors: Canaries) -> torch.Tensor:
    """The Euclidean norm of each canary, (K,)."""
    if isinstance(vectors, SparseCanaries):
        return vectors.values.abs()
    return vectors.norm(dim=1)


def clip_rows(vectors: Canaries, max_grad_norm: float) -> Canaries:
    """Each canary clipped as a per-sample gradient to norm at most ``max_grad_norm``
    (:func:`clip_factor`)."""
    if isinstance(vectors, SparseCanaries):
        factor = clip_factor(vectors.values.abs(), max_grad_norm)
        return SparseCanaries(vectors.coords, vectors.values * factor, vectors.n_params)
    norms = vectors.norm(dim=1, keepdim=True)
    return vectors * clip_factor(norms, max_grad_norm)


def dirac_coordinates(m: int, n_params: int, seed: int = 0, first: int | None = None) -> np.ndarray:
    """The *distinct* coordinates (m,) of ``m`` Dirac canaries ("no repetitions"): random
    (``first`` None, from ``seed``), or ``first, first + 1, ..., first + m - 1`` in the flat
    parameter vector (``first`` = 0 and m = 1 is the gradient canary ``[C, 0, ..., 0]`` of Xiang,
    Wang, Wang 2024, arXiv:2402.13087, Section 4.1)."""
    if m > n_params:
        raise ValueError(
            f"{m} Dirac canaries need {m} distinct coordinates; the model has {n_params}"
        )
    if first is not None:
        if first < 0 or first + m > n_params:
            raise ValueError(
                f"{m} Dirac canaries from coordinate {first} need coordinates {first}.."
                f"{first + m - 1}; the model has {n_params} (0..{n_params - 1})"
            )
        return np.arange(first, first + m)
    return np.random.default_rng(seed).choice(n_params, size=m, replace=False)


def lowest_mass_coordinates(mass: np.ndarray, m: int, seed: int = 0) -> np.ndarray:
    """The ``m`` distinct coordinates (m,) where the data's gradient ``mass`` (one non-negative
    value per parameter, e.g. the mean |clipped per-example gradient| of the training records,
    :func:`gradient_mass`) is smallest, lowest first; ties (such as
    the exact zeros of weights on input features that are constant in the data) are broken by
    a random permutation from ``seed``.

    A white-box adversary chooses its canary gradients (Steinke, Nasr, Jagielski 2023,
    arXiv:2305.08846, Section 4.1: "we directly control the gradient"); on coordinates that the
    other records' clipped gradients do not move, the summed score ``C (theta_0 - theta_T)[j]``
    holds only the canary and the noise. The choice uses the training records and an
    initialisation, never the canaries' membership."""
    mass = np.asarray(mass, dtype=np.float64)
    if mass.ndim != 1:
        raise ValueError(f"the gradient mass must be one value per parameter, got {mass.shape}")
    n_params = len(mass)
    if m > n_params:
        raise ValueError(
            f"{m} Dirac canaries need {m} distinct coordinates; the model has {n_params}"
        )
    if not np.isfinite(mass).all() or (mass < 0).any():
        raise ValueError("the gradient mass must be finite and non-negative")
    perm = np.random.default_rng(seed).permutation(n_params)
    return perm[np.argsort(mass[perm], kind="stable")[:m]]


def dirac_sparse(
    m: int,
    n_params: int,
    norm: float,
    seed: int = 0,
    zeros: int = 0,
    first: int | None = None,
    coords: np.ndarray | None = None,
) -> SparseCanaries:
    """The Dirac canaries of :func:`dirac` (the same coordinates; ``first`` as in
    :func:`dirac_coordinates`; or the given distinct ``coords`` (m,), e.g. from
    :func:`lowest_mass_coordinates`) kept sparse, then ``zeros`` zero vectors (zero-out
    records: value 0 on coordinate 0)."""
    if coords is None:
        coords = dirac_coordinates(m, n_params, seed, first)
    else:
        coords = np.asarray(coords, dtype=np.int64)
        if first is not None:
            raise ValueError("give the Dirac canaries' first coordinate or their coordinates")
        if coords.shape != (m,) or len(np.unique(coords)) != m:
            raise ValueError(f"{m} Dirac canaries need {m} distinct coordinates")
        if m and (coords.min() < 0 or coords.max() >= n_params):
            raise ValueError(f"Dirac coordinates must lie in 0..{n_params - 1}")
    return SparseCanaries(
        torch.from_numpy(np.concatenate([coords, np.zeros(zeros, dtype=coords.dtype)])).long(),
        torch.cat([torch.full((m,), float(norm)), torch.zeros(zeros)]),
        n_params,
    )


def dirac(m: int, n_params: int, norm: float, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Dirac canaries (Nasr et al. 2023; Steinke et al. 2023 §4.1): canary ``i`` is
    ``norm * e_{j_i}`` with *distinct* random coordinates ``j_i`` ("no repetitions").
    ``norm`` is the clipping norm C (so clipping leaves it unchanged; our choice [UNCLEAR in
    the paper]). Returns the vectors (m, n_params) and the coordinates (m,); the trainer
    uses the sparse form :func:`dirac_sparse` (same coordinates)."""
    coords = dirac_coordinates(m, n_params, seed)
    v = np.zeros((m, n_params), dtype=np.float32)
    v[np.arange(m), coords] = norm
    return v, coords


def random_direction(m: int, n_params: int, norm: float, seed: int = 0) -> np.ndarray:
    """Random-gradient canaries (Andrew et al.; LiDP App. D.2): uniform directions on the sphere
    of radius ``norm`` (= C in the authors' code; the paper says the ball), (m, n_params)."""
    g = np.random.default_rng(seed).standard_normal((m, n_params))
    return (norm * g / np.linalg.norm(g, axis=1, keepdims=True)).astype(np.float32)
