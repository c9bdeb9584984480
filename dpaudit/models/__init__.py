"""Models, chosen by name (all Opacus-compatible: no BatchNorm).

=========  ==========================================================  ============================
name       model                                                       used by
=========  ==========================================================  ============================
logreg     logistic regression (one linear layer)                      LiDP (FMNIST linear)
mlp        MLP, ReLU, ``hidden`` widths (default [256, 256])           LiDP; shuffling ([32], P100)
lenet      LeNet-5, tanh                                               shuffling (FMNIST)
cnn        shallow tanh CNN (Dörmann et al.)                           shuffling (CIFAR-10)
wrn        Wide ResNet with GroupNorm (``depth``, ``width``; 16, 4)    one-run (WRN-16), De et al.
=========  ==========================================================  ============================
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from torch import nn

from dpaudit.models.cnn import SmallTanhCNN
from dpaudit.models.lenet import LeNet5
from dpaudit.models.linear import LogisticRegression
from dpaudit.models.mlp import MLP
from dpaudit.models.wrn import WideResNet

MODELS = {
    "logreg": LogisticRegression,
    "mlp": MLP,
    "lenet": LeNet5,
    "cnn": SmallTanhCNN,
    "wrn": WideResNet,
}
#: Models that need an image input (channels, height, width).
IMAGE_MODELS = ("lenet", "cnn", "wrn")
#: The config keys each model takes (besides its input shape and number of classes).
MODEL_KEYS = {
    "logreg": set(),
    "mlp": {"hidden"},
    "lenet": set(),
    "cnn": set(),
    "wrn": {"depth", "width", "groups"},
}


def build_model(name: str, **kwargs: Any) -> nn.Module:
    """Instantiate model ``name`` with its keyword arguments."""
    try:
        cls = MODELS[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r}; allowed: {sorted(MODELS)}") from None
    return cls(**kwargs)


def build_for_data(spec: dict[str, Any], input_shape: Sequence[int], n_classes: int) -> nn.Module:
    """Build the model of a config block ``{name: ..., **args}`` for inputs of ``input_shape``
    (one example, without the batch dimension) and ``n_classes`` classes. Keys that belong to
    other models (:data:`MODEL_KEYS`) are ignored."""
    spec = dict(spec)
    name = spec.pop("name")
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; allowed: {sorted(MODELS)}")
    # keys of *other* models (e.g. a schema default ``hidden`` next to ``name: lenet``) are
    # ignored; anything else unknown is an error
    other = set().union(*MODEL_KEYS.values()) - MODEL_KEYS[name]
    spec = {k: v for k, v in spec.items() if k not in other}
    shape = tuple(int(s) for s in input_shape)
    if name in IMAGE_MODELS:
        if len(shape) != 3:
            raise ValueError(
                f"model {name!r} needs image inputs (channels, height, width); the data has "
                f"examples of shape {shape}"
            )
        return build_model(name, input_shape=shape, num_classes=n_classes, **spec)
    return build_model(name, in_features=math.prod(shape), n_classes=n_classes, **spec)
