"""Audit your own DP training: canaries, a score file and a verdict in one run.

Framework-neutral core (:mod:`.core`): :class:`GradientCanaries` (white box) and
:class:`InputCanaries` (black box); :func:`audit_scores` (:func:`make_score_file`) for final
scores from any framework.
Adapters: :func:`opacus` (attach to an Opacus ``DPOptimizer``) and :class:`CanaryDataset`
(wrap any map-style PyTorch dataset). The verdict reads only family-free bounds
(:data:`VERDICT_ESTIMATORS`, :mod:`.verdict`); the conformance report
(:class:`ConformanceReport`, :mod:`.conformance`) measures the training's sampling, steps, noise
and accounting against the claim; :func:`check_conformance` (and the pytest fixture of
:mod:`.testing`) runs it as a test in the user's CI. docs/own_training.md has the details.
"""

from dpaudit.attach.ci import check_conformance
from dpaudit.attach.claim import (
    VERDICT_ESTIMATORS,
    AuditResult,
    Claim,
    audit_file,
    audit_scores,
    largest_detectable_epsilon,
    make_score_file,
    resolve_claim,
)
from dpaudit.attach.conformance import ConformanceError, ConformanceReport
from dpaudit.attach.core import GradientCanaries, InputCanaries

__all__ = [
    "VERDICT_ESTIMATORS",
    "AuditResult",
    "CanaryDataset",
    "Claim",
    "ConformanceError",
    "ConformanceReport",
    "GradientCanaries",
    "InputCanaries",
    "audit_file",
    "audit_scores",
    "check_conformance",
    "largest_detectable_epsilon",
    "low_gradient_coordinates",
    "make_score_file",
    "opacus",
    "resolve_claim",
]


def __getattr__(name: str):
    """The torch adapters, imported on first use (the core needs NumPy only)."""
    if name == "opacus":
        from dpaudit.attach.opacus_adapter import opacus

        return opacus
    if name == "low_gradient_coordinates":
        from dpaudit.attach.placement import low_gradient_coordinates

        return low_gradient_coordinates
    if name == "CanaryDataset":
        from dpaudit.attach.dataset import CanaryDataset

        return CanaryDataset
    raise AttributeError(f"module 'dpaudit.attach' has no attribute {name!r}")
