"""Batch samplers for DP-SGD: which examples each step sees.

Every sampler works on one model's training set, given as an array of item ids in *dataset
order* (the order matters only for the samplers that do not fully shuffle), and draws its
randomness from a per-model ``numpy.random.Generator`` so that a shard is reproducible and any
model can be recomputed alone.

``poisson``             each item joins each step independently with probability q (the
                        sampling DP-SGD's accountants assume; Abadi et al. 2016, Opacus
                        ``UniformWithReplacementSampler`` / ``DPDataLoader``).
``shuffle``             a fresh random permutation every epoch, cut into T batches of (almost)
                        equal size B (``dataset.shuffle().batch(B)``; Annamalai et al. §7).
``partial_shuffle``     the dataset is cut into consecutive buffers of ``buffer_size`` items,
                        each buffer is shuffled, the buffers are concatenated and batched
                        (Annamalai et al. §7 / Algorithm 2; Ponomareva et al.).
``batch_then_shuffle``  batches are cut in dataset order, then only their order is shuffled
                        (``dataset.batch(B).shuffle()``, the bug audited in Annamalai et al. §7).
``no_shuffle``          batches in dataset order every epoch.

The claimed epsilon of a run is always the Poisson accountant's (the accountants used in practice
assume Poisson sampling whatever the code does); the score file records which sampler ran.

For the shuffling samplers every model takes the same number of steps per epoch,
``T = ceil(n_max / B)`` with ``n_max`` the largest training-set size in the shard, and its
permuted items are cut into T near-equal batches (``numpy.array_split``): with coin-flip canaries
the training-set sizes differ by a few items between models, and a vectorised shard needs one step
count. For a fixed-size dataset this is exactly ``dataset.shuffle().batch(B)`` with the last
partial batch spread over the others.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

SAMPLERS = ("poisson", "shuffle", "partial_shuffle", "batch_then_shuffle", "no_shuffle")


@dataclass(frozen=True)
class SamplerSpec:
    """Which sampler runs and its parameters (``buffer_size`` only for ``partial_shuffle``)."""

    name: str = "poisson"
    batch_size: int = 100
    buffer_size: int | None = None

    def __post_init__(self) -> None:
        if self.name not in SAMPLERS:
            raise ValueError(f"unknown sampler {self.name!r}; allowed: {list(SAMPLERS)}")
        if not isinstance(self.batch_size, int) or self.batch_size < 1:
            raise ValueError(
                f"sampler batch_size must be a positive integer, got {self.batch_size!r}"
            )
        if self.name == "partial_shuffle":
            if self.buffer_size is None or self.buffer_size < 1:
                raise ValueError(
                    "sampler 'partial_shuffle' needs a positive integer buffer_size, "
                    f"got {self.buffer_size!r}"
                )


def steps_per_epoch(n_max: int, batch_size: int) -> int:
    """T = ceil(n_max / B): the steps of one epoch of a shuffling sampler."""
    if n_max < 1:
        raise ValueError("a training set needs at least one item")
    return math.ceil(n_max / batch_size)


def epoch_batches(
    spec: SamplerSpec, items: np.ndarray, n_steps: int, rng: np.random.Generator
) -> list[np.ndarray]:
    """The ``n_steps`` batches of one epoch of a shuffling sampler (not ``poisson``).

    ``items`` is the model's training set in dataset order.
    """
    items = np.asarray(items)
    if spec.name == "shuffle":
        order = items[rng.permutation(len(items))]
        return np.array_split(order, n_steps)
    if spec.name == "partial_shuffle":
        k = int(spec.buffer_size)  # type: ignore[arg-type]
        parts = [items[s : s + k] for s in range(0, len(items), k)]
        order = np.concatenate([p[rng.permutation(len(p))] for p in parts]) if parts else items
        return np.array_split(order, n_steps)
    if spec.name == "batch_then_shuffle":
        batches = np.array_split(items, n_steps)
        return [batches[i] for i in rng.permutation(n_steps)]
    if spec.name == "no_shuffle":
        return np.array_split(items, n_steps)
    raise ValueError(f"epoch_batches does not handle sampler {spec.name!r}")


def poisson_batch(items: np.ndarray, sample_rate: float, rng: np.random.Generator) -> np.ndarray:
    """One Poisson-sampled batch: each item independently with probability ``sample_rate``."""
    items = np.asarray(items)
    return items[rng.random(len(items)) < sample_rate]


class ModelBatchStream:
    """The batches one model sees, step after step, as a pure function of ``(seed, step)``.

    Poisson batches draw from ``default_rng([seed, step])``, the shuffling samplers' epoch
    permutations from ``default_rng([seed, epoch])``: no generator state to checkpoint, so a
    resumed job sees exactly the batches an uninterrupted one would have seen.
    """

    def __init__(
        self, spec: SamplerSpec, items: np.ndarray, sample_rate: float, n_per_epoch: int, seed: int
    ) -> None:
        self.spec = spec
        self.items = np.asarray(items, dtype=np.int64)
        self.sample_rate = float(sample_rate)
        self.n_per_epoch = int(n_per_epoch)
        self.seed = int(seed)
        self._epoch = -1
        self._epoch_batches: list[np.ndarray] = []

    def batch(self, step: int) -> np.ndarray:
        """The item ids of the batch at ``step`` (0-based)."""
        if self.spec.name == "poisson":
            return poisson_batch(
                self.items, self.sample_rate, np.random.default_rng([self.seed, step])
            )
        epoch, pos = divmod(step, self.n_per_epoch)
        if epoch != self._epoch:
            rng = np.random.default_rng([self.seed, epoch])
            self._epoch_batches = epoch_batches(self.spec, self.items, self.n_per_epoch, rng)
            self._epoch = epoch
        return self._epoch_batches[pos]
