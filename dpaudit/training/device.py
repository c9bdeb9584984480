"""Device choice: CUDA when present, unless the config names a device."""

from __future__ import annotations

import torch


def resolve_device(device: str = "auto") -> torch.device:
    """``auto`` picks ``cuda`` when a GPU is visible, else ``cpu``; anything else is used as is."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)
