"""Logistic regression (a single linear layer on flattened inputs).

LiDP (Pillutla et al. 2023, §6 / App. F) audits "FMNIST / Linear": 784 -> 10, 7,850 parameters.
"""

from __future__ import annotations

from torch import nn


class LogisticRegression(nn.Sequential):
    """``Flatten -> Linear(in_features, n_classes)``; trained with cross-entropy."""

    def __init__(self, in_features: int, n_classes: int):
        super().__init__(nn.Flatten(), nn.Linear(in_features, n_classes))


def logistic_regression(input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    """Logistic regression for inputs of ``input_shape``."""
    n = 1
    for s in input_shape:
        n *= int(s)
    return LogisticRegression(n, num_classes)
