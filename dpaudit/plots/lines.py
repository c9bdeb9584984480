"""Line figures from tidy tables: simulation audit tables and closed-form analysis tables."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import dpaudit.plots  # noqa: F401  (selects the Agg backend)
from dpaudit.io import atomic_path


def _series_label(key: Any, columns: Sequence[str]) -> str:
    key = key if isinstance(key, tuple) else (key,)
    parts = [str(v) for v in key if str(v) not in ("", "nan")]
    return ": ".join(parts) if parts else "all"


#: Legend labels of known ``reference_<name>`` columns (others: the name with spaces).
REFERENCE_LABELS = {"shuffle_lower_bound": "shuffle lower bound (Chua et al.)"}


def select_rows(table: pd.DataFrame, where: dict[str, Any]) -> pd.DataFrame:
    """The rows whose columns have the given values (a value or a list of values); a column the
    table lacks is an error naming it and the columns it has."""
    keep = pd.Series(True, index=table.index)
    for col, want in where.items():
        if col not in table.columns:
            raise ValueError(f"figure.where: no column {col!r}; columns: {sorted(table.columns)}")
        values = want if isinstance(want, list) else [want]
        keep &= table[col].astype(str).isin([str(v) for v in values]) | table[col].isin(values)
    return table[keep].copy()


def _plot_claimed(ax: Any, table: pd.DataFrame, x: str) -> None:
    """The claimed epsilon in grey: a line along ``x`` where it has one value per ``x`` (x is
    the target epsilon, or a swept mechanism parameter), else one horizontal line per value."""
    finite = table[np.isfinite(table["claimed_epsilon"].astype(float))]
    per_x = finite.groupby(x)["claimed_epsilon"].nunique()
    if len(per_x) and (per_x <= 1).all():
        claimed = finite.groupby(x)["claimed_epsilon"].mean().sort_index()
        ax.plot(claimed.index, claimed.to_numpy(), color="grey", lw=1.2, label="claimed epsilon")
        return
    for i, value in enumerate(sorted(finite["claimed_epsilon"].round(6).unique())):
        label = "claimed epsilon" if i == 0 else None
        ax.axhline(value, color="grey", lw=1.0, ls=":", label=label)


def plot_table(table: pd.DataFrame, fig: dict[str, Any], outputs: Sequence[str | Path]) -> None:
    """Plot ``fig['y']`` against ``fig['x']``, one line per value of the ``series`` columns.

    Simulation tables are aggregated over seeds (mean, bars one standard error); rows with
    ``valid == False`` make dashed lines labelled "(uncorrected)"; with ``claimed`` the claimed
    epsilon is drawn in grey, and with ``references`` (default) every ``reference_<name>``
    column (from the score files' ``meta["references"]``) as a dotted black line.
    """
    import matplotlib.pyplot as plt

    kind = fig.get("kind", "analysis")
    table = select_rows(table, fig.get("where") or {})
    y = fig.get("y") or "epsilon"
    if y not in table.columns and "y" in table.columns:
        y = "y"
    x = fig.get("x") or ("x" if "x" in table.columns else "setting")
    default_series = [c for c in ("estimator", "selection") if c in table.columns] or (
        ["series"] if "series" in table.columns else []
    )
    series = list(fig.get("series") or default_series)
    for col in series:
        table[col] = table[col].fillna("").astype(str)
    fig_, ax = plt.subplots(figsize=(6.4, 4.6))
    groups = table.groupby(series, sort=True) if series else [((), table)]
    for i, (key, grp) in enumerate(groups):
        valid = bool(grp["valid"].astype(bool).all()) if "valid" in grp else True
        label = _series_label(key, series) + ("" if valid else " (uncorrected)")
        agg = grp.groupby(x)[y].agg(["mean", "std", "count"]).sort_index()
        se = (agg["std"].fillna(0.0) / np.sqrt(agg["count"])).to_numpy()
        ax.errorbar(
            agg.index.to_numpy(),
            agg["mean"].to_numpy(),
            yerr=se if kind in ("simulate", "train") else None,
            fmt="o-" if valid else "o--",
            color=f"C{i % 10}",
            ms=3,
            capsize=2,
            label=label,
        )
    if kind in ("simulate", "train") and fig.get("claimed", True) and "claimed_epsilon" in table:
        _plot_claimed(ax, table, x)
    refs = [c for c in table.columns if c.startswith("reference_")]
    for j, col in enumerate(sorted(refs) if fig.get("references", True) else []):
        ref = table.groupby(x)[col].mean().dropna().sort_index()
        if len(ref):
            name = col[len("reference_") :]
            ax.plot(
                ref.index,
                ref.to_numpy(),
                color="black",
                lw=1.0,
                ls=(0, (1, 1 + j)),
                label=REFERENCE_LABELS.get(name, name.replace("_", " ")),
            )
    if fig.get("logx"):
        ax.set_xscale("log")
    if fig.get("logy"):
        ax.set_yscale("log")
    ax.set_xlabel(fig.get("xlabel") or x)
    ax.set_ylabel(fig.get("ylabel") or y)
    if fig.get("title"):
        ax.set_title(fig["title"], fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig_.tight_layout()
    for out in outputs:
        with atomic_path(out) as tmp:
            fig_.savefig(tmp, format=Path(out).suffix.lstrip("."), dpi=150)
    plt.close(fig_)
