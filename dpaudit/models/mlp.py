"""Multi-layer perceptron with ReLU activations."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn


class MLP(nn.Module):
    """``in_features -> hidden[0] -> ... -> n_classes`` with ReLU between layers."""

    def __init__(self, in_features: int, n_classes: int, hidden: Sequence[int] = (256, 256)):
        super().__init__()
        layers: list[nn.Module] = [nn.Flatten()]
        width = in_features
        for h in hidden:
            layers += [nn.Linear(width, int(h)), nn.ReLU()]
            width = int(h)
        layers.append(nn.Linear(width, n_classes))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)
