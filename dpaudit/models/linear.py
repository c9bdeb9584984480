"""Logistic regression (a single linear layer on flattened inputs).

LiDP (Pillutla et al. 2023, §6 / App. F) audits "FMNIST / Linear": 784 -> 10, 7,850 parameters.
"""

from __future__ import annotations

import math

from torch import nn


def logistic_regression(input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    """``Flatten -> Linear(prod(input_shape), num_classes)``; trained with cross-entropy."""
    return nn.Sequential(nn.Flatten(), nn.Linear(math.prod(input_shape), num_classes))
