"""Figures (matplotlib, Agg backend: no display needed).

matplotlib is imported on first drawing (:func:`pyplot`), not with the package: the workflow's
input functions read labels and captions from here while Snakemake builds its DAG, and on a
cluster every job's own Snakemake process does that again (docs/cluster.md), so importing
matplotlib there would cost each job a quarter of a CPU-second for nothing.
"""

from __future__ import annotations

from typing import Any

_AGG_SET = False


def pyplot() -> Any:
    """``matplotlib.pyplot``, with the Agg backend selected the first time (as importing this
    package used to do)."""
    global _AGG_SET
    import matplotlib

    if not _AGG_SET:
        matplotlib.use("Agg")
        _AGG_SET = True
    import matplotlib.pyplot as plt

    return plt
