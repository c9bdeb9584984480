"""Audit estimators: from per-canary scores to lower bounds on epsilon.

Importing this package registers every estimator family in :mod:`.registry`.
"""

import dpaudit.estimators.fdp_one_run_audit  # noqa: F401  (registers "fdp_one_run")
import dpaudit.estimators.lidp_audit  # noqa: F401  (registers "lidp")
import dpaudit.estimators.multi_run_audit  # noqa: F401  (registers multi_run_cp, gdp_fit)
import dpaudit.estimators.one_run_audit  # noqa: F401  (registers "one_run")
from dpaudit.estimators.registry import METHODS, get, register

__all__ = ["METHODS", "get", "register"]
