"""Models by name: parameter counts of the papers' architectures, no BatchNorm, Opacus-valid."""

from __future__ import annotations

import pytest
import torch
from opacus.validators import ModuleValidator

from dpaudit.models import build_for_data


def _n(m):
    return sum(p.numel() for p in m.parameters())


@pytest.mark.parametrize(
    ("spec", "shape", "k", "params"),
    [
        ({"name": "logreg"}, (1, 28, 28), 10, 7_850),  # LiDP FMNIST linear (Pillutla et al. App. F)
        ({"name": "mlp", "hidden": [256, 256]}, (784,), 10, 269_322),  # LiDP FMNIST MLP
        ({"name": "mlp", "hidden": [256, 256]}, (600,), 100, 245_348),  # LiDP Purchase MLP
        ({"name": "mlp", "hidden": [32]}, (600,), 100, 22_532),  # shuffling P100 MLP (~22.5K)
        ({"name": "lenet"}, (1, 28, 28), 2, 61_026),  # shuffling LeNet-5 (~61K)
        ({"name": "cnn"}, (3, 32, 32), 2, 549_538),  # shuffling CNN (~550K)
        ({"name": "wrn", "depth": 16, "width": 4}, (3, 32, 32), 10, 2_748_890),  # WRN-16-4
    ],
)
def test_parameter_counts_and_opacus_compatibility(spec, shape, k, params):
    model = build_for_data(spec, shape, k)
    assert _n(model) == params
    assert ModuleValidator.validate(model, strict=False) == []
    assert model(torch.zeros(2, *shape)).shape == (2, k)


def test_keys_of_other_models_are_ignored_and_bad_names_rejected():
    assert _n(build_for_data({"name": "lenet", "hidden": [256]}, (1, 28, 28), 2)) == 61_026
    with pytest.raises(ValueError, match="unknown model"):
        build_for_data({"name": "resnet"}, (3, 32, 32), 10)
    with pytest.raises(ValueError, match="image inputs"):
        build_for_data({"name": "lenet"}, (784,), 10)
    with pytest.raises(ValueError, match="6n\\+4"):
        build_for_data({"name": "wrn", "depth": 15}, (3, 32, 32), 10)
