"""Audit estimators: from per-canary scores to lower bounds on epsilon.

One module per family holds the math; its ``*_audit.py`` holds the runner that reads a score
file, and :mod:`.registry` lists every runner by name.
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
