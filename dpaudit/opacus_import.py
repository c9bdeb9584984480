"""Import Opacus without the logging handler it installs on the root logger, and torchvision with
a one-line error when it was built for another torch.

``opacus/utils/module_utils.py`` calls ``logging.basicConfig`` when it is imported (Opacus 1.4-1.6),
which adds a stderr handler to the *root* logger of whatever process imports it. In the Snakemake
process (the workflow imports the accountants to calibrate noise while it is parsed) that handler
reprints every Snakemake log line with a timestamp, thousands of lines on the paper configs. Every
lazy ``from opacus ...`` in dpaudit calls :func:`import_opacus` first, which imports Opacus once and
removes the handlers the import added (and only those).

torchvision is built against one torch release: beside another (a CPU wheel of torch from one
index, torchvision from another) its import fails deep inside, with "operator torchvision::nms
does not exist". Every import of torchvision in dpaudit goes through :func:`import_torchvision`,
which turns that failure into one line naming both versions and the fix.
"""

from __future__ import annotations

import logging
import sys
from importlib import metadata
from types import ModuleType


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


#: What to run when torch and torchvision do not match (README, "Quick start").
TORCH_PAIR_FIX = (
    "install them as a matching pair, in one command from one index: "
    "`pip install --force-reinstall torch torchvision` (README, Quick start)"
)


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def import_torchvision() -> ModuleType:
    """``import torchvision``; a torchvision that cannot load beside the installed torch (a
    ``RuntimeError`` or ``ImportError`` raised inside its import) is an :class:`ImportError` of one
    line naming both versions, the error and :data:`TORCH_PAIR_FIX`. A torchvision that is not
    installed at all raises Python's own ``ModuleNotFoundError``."""
    try:
        import torchvision
    except ModuleNotFoundError as exc:
        if exc.name == "torchvision":
            raise
        cause: Exception = exc
    except (RuntimeError, ImportError, AttributeError) as exc:
        cause = exc
    else:
        return torchvision
    first = (str(cause).strip().splitlines() or [type(cause).__name__])[0]
    raise ImportError(
        f"torchvision {_version('torchvision')} cannot be imported beside torch "
        f"{_version('torch')} ({type(cause).__name__}: {first}): it was built for another torch; "
        f"{TORCH_PAIR_FIX}"
    ) from None
