"""Checks of the arguments that several estimator families take, written once."""

from __future__ import annotations


def check_confidence(confidence: float) -> None:
    """A confidence level outside (0, 1) (NaN included) is an error naming it."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
