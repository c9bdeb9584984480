"""Models, chosen by name (all Opacus-compatible: no BatchNorm)."""

from __future__ import annotations

from typing import Any

from torch import nn

from dpaudit.models.mlp import MLP

MODELS = {"mlp": MLP}


def build_model(name: str, **kwargs: Any) -> nn.Module:
    """Instantiate model ``name`` with its keyword arguments."""
    try:
        cls = MODELS[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r}; allowed: {sorted(MODELS)}") from None
    return cls(**kwargs)
