"""What the image models (:mod:`.cnn`, :mod:`.lenet`) share: the check of their input shape and
the width of their flattened features, which sizes the first layer of the classifier."""

from __future__ import annotations

import torch
from torch import nn


def image_channels(model: str, input_shape: tuple[int, ...]) -> int:
    """The channel count C of an image input shape (C, H, W); any other shape raises
    ``ValueError`` naming ``model``."""
    if len(input_shape) != 3:
        raise ValueError(f"{model} needs an image input (C, H, W), got {input_shape}")
    return input_shape[0]


def flat_size(features: nn.Module, input_shape: tuple[int, ...]) -> int:
    """The number of values ``features`` makes of one input of ``input_shape``."""
    with torch.no_grad():
        return features(torch.zeros(1, *input_shape)).numel()
