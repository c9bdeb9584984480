"""Closed-form analyses (theory curves and tables of the papers); the table of names is in
:mod:`dpaudit.analyses.registry`."""

from dpaudit.analyses.registry import ANALYSES, get, run

__all__ = ["ANALYSES", "get", "run"]
