"""The estimators an own-training verdict reads, and their confidence split.

The verdict reads only bounds that hold for every mechanism meeting the claim (no assumed
trade-off family): one-run auditing (Steinke, Nasr, Jagielski 2023, arXiv:2305.08846, Thm. 3.1
with Bonferroni guess counts) and f-DP auditing with abstention under the (epsilon, delta) null
(Mahloujifar, Melis, Chaudhuri 2025, arXiv:2410.22235). :mod:`dpaudit.attach.verdict` applies
them; :mod:`dpaudit.attach.power` computes what they can see.
"""

from __future__ import annotations

from typing import Any

from dpaudit.estimators.registry import family_free_blocks

#: The family-free estimators the verdict reads (name -> estimator block, as in a config): the
#: registry's (:func:`~dpaudit.estimators.registry.family_free_blocks`), each with the valid
#: ``bonferroni`` selection of its guess count; ``confidence`` is set by :func:`verdict_specs`.
VERDICT_ESTIMATORS: dict[str, dict[str, Any]] = {
    name: {**block, "selections": ["bonferroni"]}
    for name, block in family_free_blocks("one_run").items()
}


def verdict_specs(confidence: float) -> dict[str, dict[str, Any]]:
    """:data:`VERDICT_ESTIMATORS`, each at confidence 1 - (1 - ``confidence``) / (their
    number), so that the largest of their bounds holds at ``confidence`` (union bound)."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence!r}")
    each = 1.0 - (1.0 - confidence) / len(VERDICT_ESTIMATORS)
    return {name: {**spec, "confidence": each} for name, spec in VERDICT_ESTIMATORS.items()}
