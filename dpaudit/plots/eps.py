"""Empirical lower bound vs claimed epsilon, one line per (estimator, selection)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

import dpaudit.plots  # noqa: F401  (selects the Agg backend)
from dpaudit.io import atomic_path


def _label(row_key: tuple, valid: bool) -> str:
    estimator, selection = row_key
    text = f"{estimator}: {selection}" if selection else estimator
    return text if valid else f"{text} (uncorrected)"


def plot_empirical_vs_claimed(
    table: pd.DataFrame, outputs: Sequence[str | Path], title: str = ""
) -> None:
    """Mean lower bound over seeds (error bars: min to max) against the claimed epsilon.

    Settings without a guarantee (claimed epsilon infinite) are drawn as horizontal lines: the
    bound a noise-free run reaches. Uncorrected (``valid == False``) rows are dashed and
    labelled "(uncorrected)".
    """
    import matplotlib.pyplot as plt

    table = table.copy()
    if "selection" not in table:
        table["selection"] = ""
    table["selection"] = table["selection"].fillna("")
    table["valid"] = table["valid"].astype(bool)
    fig, ax = plt.subplots(figsize=(6, 4.5))
    finite = table[np.isfinite(table["claimed_epsilon"].astype(float))]
    top = float(finite["claimed_epsilon"].max()) if len(finite) else 1.0
    ax.plot([0, top], [0, top], color="grey", lw=1, label="claimed (y = x)")
    groups = table.groupby(["estimator", "selection"], sort=True)
    for i, (key, grp) in enumerate(groups):
        valid = bool(grp["valid"].all())
        color = f"C{i % 10}"
        style = "-" if valid else "--"
        fin = grp[np.isfinite(grp["claimed_epsilon"].astype(float))]
        if len(fin):
            agg = (
                fin.groupby("setting")
                .agg(
                    x=("claimed_epsilon", "mean"),
                    y=("epsilon", "mean"),
                    lo=("epsilon", "min"),
                    hi=("epsilon", "max"),
                )
                .sort_values("x")
            )
            ax.errorbar(
                agg["x"],
                agg["y"],
                yerr=[agg["y"] - agg["lo"], agg["hi"] - agg["y"]],
                fmt="o" + style,
                color=color,
                capsize=3,
                label=_label(key, valid),
            )
        inf = grp[~np.isfinite(grp["claimed_epsilon"].astype(float))]
        if len(inf):
            ax.axhline(
                float(inf["epsilon"].mean()),
                color=color,
                ls=":",
                lw=1.2,
                label=f"{_label(key, valid)}, no noise",
            )
    ax.set_xlabel("claimed epsilon (accountant)")
    ax.set_ylabel("empirical epsilon lower bound")
    ax.set_xlim(0, top * 1.08)
    ax.set_ylim(bottom=0)
    if title:
        ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, loc="upper left")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    for out in outputs:
        suffix = Path(out).suffix
        with atomic_path(out) as tmp:
            fig.savefig(tmp, format=suffix.lstrip("."), dpi=150)
    plt.close(fig)
