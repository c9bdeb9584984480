"""Multi-layer perceptron with ReLU activations.

LiDP (Pillutla et al. 2023, App. F) uses 784 -> 256 -> 256 -> 10 on FMNIST and
600 -> 256 -> 256 -> 100 on Purchase-100; "To Shuffle or not to Shuffle" (Annamalai et al.,
App. C) uses one hidden layer of 32 units on Purchase-100 (``hidden=[32]``).
"""

from __future__ import annotations

from collections.abc import Sequence

from torch import nn


class MLP(nn.Sequential):
    """``in_features -> hidden[0] -> ... -> n_classes`` with ReLU between layers.

    An ``nn.Sequential`` (Flatten, Linear, ReLU, ..., Linear), so the stacked engine of
    :mod:`dpaudit.training.stacked` trains many of them at once.
    """

    def __init__(self, in_features: int, n_classes: int, hidden: Sequence[int] = (256, 256)):
        layers: list[nn.Module] = [nn.Flatten()]
        width = in_features
        for h in hidden:
            layers += [nn.Linear(width, int(h)), nn.ReLU()]
            width = int(h)
        layers.append(nn.Linear(width, n_classes))
        super().__init__(*layers)
