"""What a shard's trained models are read out on, shared by the audit designs of
:mod:`dpaudit.training.shard` and the tuning audit of :mod:`dpaudit.training.tuning`: the pool
of input canaries and every model's logits on a batch of inputs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from dpaudit.canaries import input_space
from dpaudit.training.engines import stacked_logits
from dpaudit.training.spec import INPUT_CANARIES
from dpaudit.training.stacked import StackedSequential
from dpaudit.training.stacked import supports as stacked_supports
from dpaudit.training.vectorized import ShardResult


def input_pool(
    data: dict[str, np.ndarray], canaries: Mapping[str, Any], pool_size: int, n_classes: int
) -> tuple[np.ndarray, np.ndarray]:
    """The pool of ``pool_size`` input-space canaries (inputs, labels) of the canary options
    ``canaries`` (a run spec's ``canaries`` block) on the prepared data set ``data``."""
    shape = data["x_train"].shape[1:]
    kind = canaries["type"]
    seed = canaries["seed"]
    if kind == "random_input":
        x, y = input_space.random_inputs(
            pool_size, int(np.prod(shape)), n_classes, canaries["scale"], seed
        )
        return x.reshape((pool_size, *shape)), y
    if kind in ("mislabeled", "in_distribution"):
        xp, yp = data.get("x_canary"), data.get("y_canary")
        if xp is None or len(xp) == 0:
            raise ValueError(
                f"canaries of type {kind!r} come from the dataset's held-out canary pool, which "
                "is empty: set dataset.canary_pool"
            )
        if kind == "mislabeled":
            return input_space.mislabeled(xp, yp, pool_size, n_classes, seed)
        return input_space.in_distribution(xp, yp, pool_size, seed)
    if kind == "clipbkd":
        return input_space.clipbkd(
            data["x_train"],
            pool_size,
            canaries["first_component"],
            canaries["last_component"],
            canaries["label"],
            canaries["scale"],
            seed,
            n_classes,
        )
    raise ValueError(f"unknown canary type {kind!r}; allowed: {list(INPUT_CANARIES)}")


def all_logits(template: torch.nn.Module, result: ShardResult, x: torch.Tensor) -> torch.Tensor:
    """(models, examples, classes) logits of every model of ``result`` on the inputs ``x``
    (``template``: the shard's model, on any device), 512 inputs at a time."""
    if stacked_supports(template):
        net = StackedSequential(template)
        m = next(iter(result.params.values())).shape[0]
        outs = []
        for s in range(0, x.shape[0], 512):
            xb = x[s : s + 512]
            outs.append(net.logits(result.params, xb.expand(m, *xb.shape)))
        return torch.cat(outs, dim=1)
    return stacked_logits(template, result.params, None, x)
