"""Checks of the arguments that several estimator families take, written once."""

from __future__ import annotations

import numpy as np


def check_confidence(confidence: float) -> None:
    """A confidence level outside (0, 1) (NaN included) is an error naming it."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")


def check_integers(**counts: object) -> None:
    """Each of ``counts`` (name = value) must be a Python or NumPy integer; the first that is
    not is a ``TypeError`` naming it."""
    for name, val in counts.items():
        if not isinstance(val, int | np.integer):
            raise TypeError(f"{name} must be an integer, got {val!r}")
