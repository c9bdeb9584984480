"""Send a pipeline job's log messages, stderr and error to its log file.

Snakemake runs each ``scripts/*.py`` in its own Python process and, when the job fails, tells
the user to "check log file(s)". :func:`job_log` makes that file hold what the user needs: every
``logging`` message and warning, everything written to stderr (by Python or by C libraries), and
the exception with its traceback when the job fails. Each script starts with::

    log = start_job(snakemake)

(:func:`dpaudit.manifest.start_job`, which calls :func:`job_log` with ``snakemake.log[0]``
and then checks the job's outputs and inputs.)

It changes the whole process (file descriptor 2, ``sys.stderr``, ``sys.excepthook``), which is
what a job's own process wants; call it once, first.
"""

from __future__ import annotations

import logging
import os
import sys
import traceback
from pathlib import Path
from types import TracebackType
from typing import IO

FORMAT = "%(asctime)s %(name)s %(levelname)s %(message)s"


def _open_log(path: str | Path) -> IO[str]:
    """The log file, truncated and line-buffered (its folder is created)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return open(path, "w", buffering=1, encoding="utf-8")  # kept open: the log of the whole job


def _log_to(stream: IO[str]) -> logging.Logger:
    """Route the root logger (and warnings) to ``stream``; the ``dpaudit`` logger."""
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter(FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    logging.captureWarnings(True)
    return logging.getLogger("dpaudit")


def write_error(
    stream: IO[str],
    exc: BaseException,
    tb: TracebackType | None,
    log_path: str | Path | None = None,
    console: IO[str] | None = None,
) -> None:
    """Write the traceback of ``exc`` to ``stream``; a one-line pointer to ``console``."""
    stream.write("".join(traceback.format_exception(type(exc), exc, tb)))
    stream.flush()
    if console is not None:
        where = f" (traceback in {log_path})" if log_path else ""
        console.write(f"dpaudit: {type(exc).__name__}: {exc}{where}\n")
        console.flush()


def job_log(path: str | Path | None) -> logging.Logger:
    """For the rest of this process, send logging, warnings, stderr and an uncaught exception
    (with its traceback) to the log file ``path``; returns the ``dpaudit`` logger.

    The console keeps one line naming the error and the log file. Without a path (a rule with
    no ``log:``) messages go to stderr as usual.
    """
    if not path:
        return _log_to(sys.stderr)
    stream = _open_log(path)
    console = os.fdopen(os.dup(2), "w", buffering=1)  # the terminal, before redirection
    sys.stderr.flush()
    os.dup2(stream.fileno(), 2)  # C libraries and child processes write to fd 2
    sys.stderr = stream
    logger = _log_to(stream)

    def hook(kind: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
        write_error(stream, exc, tb, path, console)

    sys.excepthook = hook
    return logger

