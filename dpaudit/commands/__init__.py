"""Subcommands of the ``dpaudit`` CLI, one a module: its docstring the description, ``HELP``,
``arguments(parser)`` and ``run(args)`` (:mod:`dpaudit.cli` says how they are read).

:mod:`dpaudit.cli` finds them with ``pkgutil`` (one layer above this package); what the
subcommands share lives here, so that they never import :mod:`dpaudit.cli`.
"""

from __future__ import annotations

import argparse
import json
from typing import Any


def emit(result: dict[str, Any], as_json: bool, text: str) -> None:
    """Print ``result`` as one JSON object (``--json``) or ``text`` for people."""
    print(json.dumps(result, sort_keys=True) if as_json else text)


def add_json_argument(p: argparse.ArgumentParser) -> None:
    """``--json``: print the result as one JSON object (:func:`emit`)."""
    p.add_argument("--json", action="store_true", help="print one JSON object")


def claim_delta(text: str) -> float:
    """argparse type of ``--delta`` for a claim audited from counts: a number in [0, 1) (0 is
    pure DP; 1 would claim nothing). The accountant, which needs delta > 0, checks (0, 1)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"delta must be a number in [0, 1), got {text!r}"
        ) from None
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"delta must lie in [0, 1), got {text}")
    return value


def add_claim_arguments(p: argparse.ArgumentParser, estimator: str, joint: bool = False) -> None:
    """``--delta`` (required), ``--confidence`` with the config schema's default for
    ``estimator`` (so the CLI and the pipeline share one default) and ``--json``: the options of
    a bound computed from counts. ``joint``: the confidence covers two bounds at once."""
    from dpaudit.defaults import estimator_defaults

    p.add_argument(
        "--delta", type=claim_delta, required=True, help="delta of the audited claim, in [0, 1)"
    )
    p.add_argument(
        "--confidence",
        type=float,
        default=estimator_defaults(estimator)["confidence"],
        help=("joint; " if joint else "") + "default: %(default)s (the config schema's)",
    )
    add_json_argument(p)
