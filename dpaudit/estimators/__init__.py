"""Audit estimators: from per-canary scores to lower bounds on epsilon.

Importing this package registers every estimator family in :mod:`.registry`.
"""

import dpaudit.estimators.lidp_audit  # noqa: F401  (registers "lidp")
from dpaudit.estimators import one_run_audit  # noqa: F401  (registers "one_run")
from dpaudit.estimators.registry import METHODS, get, register

__all__ = ["METHODS", "get", "register"]
