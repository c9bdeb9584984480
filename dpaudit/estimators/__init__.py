"""Audit estimators: from per-canary scores to lower bounds on epsilon.

One subpackage per family (``one_run``, ``fdp_one_run``, ``fdp_abstention``, ``multi_run``,
``lidp``, ``attack_metrics``; ``selection``: the selection rules they share; ``common``: other
shared pieces): its modules hold the math, its ``audit.py`` the runner that reads a score file,
and :mod:`.registry` lists every runner by name.
"""

from dpaudit.estimators.registry import (
    ASSUMPTIONS,
    FAMILY_FREE,
    METHODS,
    assumes,
    block_assumes,
    family_free,
    get,
)

__all__ = [
    "ASSUMPTIONS",
    "FAMILY_FREE",
    "METHODS",
    "assumes",
    "block_assumes",
    "family_free",
    "get",
]
