"""LeNet-5 with tanh activations, as in "To Shuffle or not to Shuffle" (Annamalai et al.), App. C,
Table 3: conv6-5x5 (s1, p2) -> avgpool 2x2 -> conv16-5x5 -> avgpool 2x2 -> FC120 -> FC84 -> FC k.

For a 1x28x28 input and 2 classes it has 61,026 parameters (Annamalai et al. App. C, Table 3).
Only layers Opacus can compute per-sample gradients for (Conv2d, Linear; pooling has none).
"""

from __future__ import annotations

from collections import OrderedDict

from torch import nn

from dpaudit.models.image import flat_size, image_channels


class LeNet5(nn.Sequential):
    """LeNet-5 (tanh), an ``nn.Sequential`` (features, classifier) so the stacked engine runs it.

    ``input_shape`` is (channels, height, width).
    """

    def __init__(self, input_shape: tuple[int, ...] = (1, 28, 28), num_classes: int = 10):
        c = image_channels("LeNet5", input_shape)
        features = nn.Sequential(
            nn.Conv2d(c, 6, kernel_size=5, stride=1, padding=2),
            nn.Tanh(),
            nn.AvgPool2d(2),
            nn.Conv2d(6, 16, kernel_size=5, stride=1),
            nn.Tanh(),
            nn.AvgPool2d(2),
        )
        n_flat = flat_size(features, input_shape)
        classifier = nn.Sequential(
            nn.Flatten(),
            nn.Linear(n_flat, 120),
            nn.Tanh(),
            nn.Linear(120, 84),
            nn.Tanh(),
            nn.Linear(84, num_classes),
        )
        super().__init__(OrderedDict(features=features, classifier=classifier))
