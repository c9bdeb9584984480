"""Subcommands of the ``dpaudit`` CLI; each module defines ``register(subparsers)``.

:mod:`dpaudit.cli` finds them with ``pkgutil`` (one layer above this package); what the
subcommands share lives here, so that they never import :mod:`dpaudit.cli`.
"""

from __future__ import annotations

import json
from typing import Any


def emit(result: dict[str, Any], as_json: bool, text: str) -> None:
    """Print ``result`` as one JSON object (``--json``) or ``text`` for people."""
    print(json.dumps(result, sort_keys=True) if as_json else text)
