"""Wide ResNet WRN-d-k (Zagoruyko & Komodakis 2016) with GroupNorm, as used for DP-SGD on CIFAR-10
by De et al. 2022 ("Unlocking high-accuracy differentially private image classification through
scale") and by Steinke et al. 2023, §4 (WRN-16; width 4 assumed). WRN-16-4 on
CIFAR-10 has 2,748,890 parameters here.

BatchNorm mixes examples of a batch and breaks per-example clipping, so every norm layer is
GroupNorm (16 groups, as in De et al.). De et al. also standardise the conv weights (Weight
Standardization); that is left out here because Opacus's per-sample-gradient hooks compute the
gradient of the raw ``nn.Conv2d`` weight, and a standardised weight would give wrong per-sample
gradients. Pre-activation residual blocks; depth 16 = 6*2 + 4, i.e. two blocks per group.
"""

from __future__ import annotations

import torch
from torch import nn


def _norm(channels: int, groups: int) -> nn.GroupNorm:
    return nn.GroupNorm(min(groups, channels), channels)


class _Block(nn.Module):
    def __init__(self, c_in: int, c_out: int, stride: int, groups: int):
        super().__init__()
        self.norm1 = _norm(c_in, groups)
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False)
        self.norm2 = _norm(c_out, groups)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, stride=1, padding=1, bias=False)
        self.act = nn.ReLU()
        self.shortcut = (
            nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False)
            if (stride != 1 or c_in != c_out)
            else None
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        o = self.act(self.norm1(x))
        y = self.conv1(o)
        y = self.conv2(self.act(self.norm2(y)))
        return y + (self.shortcut(o) if self.shortcut is not None else x)


class WideResNet(nn.Module):
    """WRN-``depth``-``width`` with GroupNorm; ``depth`` = 6n + 4."""

    def __init__(
        self,
        input_shape: tuple[int, ...] = (3, 32, 32),
        num_classes: int = 10,
        depth: int = 16,
        width: int = 4,
        groups: int = 16,
    ):
        super().__init__()
        if (depth - 4) % 6 != 0:
            raise ValueError(f"WideResNet depth must be 6n+4 (e.g. 16, 28), got {depth}")
        n = (depth - 4) // 6
        widths = [16, 16 * width, 32 * width, 64 * width]
        self.stem = nn.Conv2d(input_shape[0], widths[0], 3, padding=1, bias=False)
        blocks: list[nn.Module] = []
        c = widths[0]
        for g, stride in zip(range(1, 4), (1, 2, 2), strict=True):
            for i in range(n):
                blocks.append(_Block(c, widths[g], stride if i == 0 else 1, groups))
                c = widths[g]
        self.blocks = nn.Sequential(*blocks)
        self.head = nn.Sequential(
            _norm(c, groups),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(c, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(self.stem(x)))
