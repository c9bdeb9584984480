"""Import Opacus without the logging handler it installs on the root logger.

``opacus/utils/module_utils.py`` calls ``logging.basicConfig`` when it is imported (Opacus 1.4-1.6),
which adds a stderr handler to the *root* logger of whatever process imports it. In the Snakemake
process (the workflow imports the accountants to calibrate noise while it is parsed) that handler
reprints every Snakemake log line with a timestamp, thousands of lines on the paper configs. Every
lazy ``from opacus ...`` in dpaudit calls :func:`import_opacus` first, which imports Opacus once and
removes the handlers the import added (and only those).
"""

from __future__ import annotations

import logging
import sys


def import_opacus() -> None:
    """Import Opacus (once), leaving the root logger's handlers as they were before."""
    if "opacus" in sys.modules:
        return
    root = logging.getLogger()
    before = list(root.handlers)
    import opacus  # noqa: F401

    for handler in list(root.handlers):
        if handler not in before:
            root.removeHandler(handler)
