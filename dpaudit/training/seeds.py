"""The independent integer seeds of each model of a shard (initialisation, batches, noise,
canaries), derived from the base seed, the setting, the shard and the model's position."""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ModelSeeds:
    """The independent integer seeds of one model: initialisation, batches, noise, canaries."""

    init: int
    sampling: int
    noise: int
    canary: int


def model_seeds(base_seed: int, setting: str, shard: int, model: int) -> ModelSeeds:
    """Seeds of model ``model`` of shard ``shard`` of a setting, from a ``numpy.SeedSequence``.

    The setting name enters through its CRC-32, so the seeds do not depend on Python's hash
    randomisation. Different (setting, shard, model) give independent streams.
    """
    if shard < 0 or model < 0:
        raise ValueError(f"shard and model must be >= 0, got shard={shard}, model={model}")
    ss = np.random.SeedSequence([int(base_seed), zlib.crc32(setting.encode()), shard, model])
    a, b, c, d = (int(v) for v in ss.generate_state(4, dtype=np.uint32))
    return ModelSeeds(init=a, sampling=b, noise=c, canary=d)
