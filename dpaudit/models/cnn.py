"""The shallow tanh CNN of "To Shuffle or not to Shuffle" (Annamalai et al.), App. C, Table 2
(after Dörmann et al. / Tramèr & Boneh):

conv32-3x3 (s1, p1) -> conv32 -> maxpool 2x2 -> conv64 -> conv64 -> maxpool -> conv128 -> conv128
-> maxpool -> FC128 -> FC k, tanh after every conv and the hidden FC layer.

For a 3x32x32 input and 2 classes it has 549,538 parameters (Annamalai et al. App. C, Table 2).
"""

from __future__ import annotations

from collections import OrderedDict

from torch import nn

from dpaudit.models.image import flat_size, image_channels


class SmallTanhCNN(nn.Sequential):
    """Shallow tanh CNN, an ``nn.Sequential`` (features, classifier).

    ``input_shape`` is (channels, height, width).
    """

    def __init__(self, input_shape: tuple[int, ...] = (3, 32, 32), num_classes: int = 10):
        c = image_channels("SmallTanhCNN", input_shape)
        layers: list[nn.Module] = []
        for width in (32, 64, 128):
            layers += [
                nn.Conv2d(c, width, 3, stride=1, padding=1),
                nn.Tanh(),
                nn.Conv2d(width, width, 3, stride=1, padding=1),
                nn.Tanh(),
                nn.MaxPool2d(2, 2),
            ]
            c = width
        features = nn.Sequential(*layers)
        n_flat = flat_size(features, input_shape)
        classifier = nn.Sequential(
            nn.Flatten(), nn.Linear(n_flat, 128), nn.Tanh(), nn.Linear(128, num_classes)
        )
        super().__init__(OrderedDict(features=features, classifier=classifier))
