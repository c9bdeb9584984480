"""Line figures from tidy tables: simulation and train-grid audit tables, closed-form analysis
tables. Drawn in the package style (:mod:`dpaudit.plots.style`) with display names
(:mod:`dpaudit.plots.labels`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dpaudit.plots import pyplot
from dpaudit.plots.labels import column_label
from dpaudit.plots.series import (
    draw_paper_values,
    estimator_labels,
    select_rows,
    series_label,
    y_label,
)
from dpaudit.plots.style import (
    CLAIMED,
    CONTROL,
    CONTROL_LABEL,
    MARKERS,
    REFERENCE,
    UNCORRECTED,
    assign_colors,
    legend,
    save,
    styled,
    title,
)

__all__ = ["REFERENCE_LABELS", "draw_table", "plot_table", "select_rows"]

#: Legend labels of known ``reference_<name>`` columns (others: the name with spaces).
REFERENCE_LABELS = {"shuffle_lower_bound": "shuffle lower bound (Chua et al.)"}


def _plot_claimed(ax: Any, table: pd.DataFrame, x: str) -> None:
    """The claimed epsilon in grey: a line along ``x`` where it has one value per ``x`` (x is
    the target epsilon, or a swept mechanism parameter), else one horizontal line per value."""
    finite = table[np.isfinite(table["claimed_epsilon"].astype(float))]
    per_x = finite.groupby(x)["claimed_epsilon"].nunique()
    if len(per_x) and (per_x <= 1).all():
        claimed = finite.groupby(x)["claimed_epsilon"].mean().sort_index()
        ax.plot(claimed.index, claimed.to_numpy(), label="claimed ε", **CLAIMED)
        return
    for i, value in enumerate(sorted(finite["claimed_epsilon"].round(6).unique())):
        label = "claimed ε" if i == 0 else None
        ax.axhline(value, ls=":", label=label, **CLAIMED)


def _controls(table: pd.DataFrame) -> pd.Series:
    """Rows of the no-noise control (claimed epsilon infinite)."""
    if "claimed_epsilon" not in table.columns:
        return pd.Series(False, index=table.index)
    return ~np.isfinite(pd.to_numeric(table["claimed_epsilon"], errors="coerce").fillna(0.0))


def draw_table(table: pd.DataFrame, fig: Mapping[str, Any]) -> Any:
    """Draw ``fig['y']`` against ``fig['x']``, one line per value of the ``series`` columns, and
    return the matplotlib figure.

    Simulation and train tables are aggregated over seeds (mean, bars one standard error).
    Lines are coloured by estimator (a fixed colour per method) or by the first series column,
    with a marker per value of the other series columns. Rows with ``valid == False`` make
    dashed, lighter lines labelled "(uncorrected)"; no-noise controls are thin dotted lines
    with one legend entry; with ``claimed`` the claimed epsilon is drawn in grey, with
    ``references`` every ``reference_<name>`` column (from the score files'
    ``meta["references"]``) in black, and every value the paper prints (``marks``: the
    experiment's ``reproduce`` rows) as a hollow star. Legend names come from ``labels``
    (column -> value -> name) and ``estimator_labels`` (block -> name), else the library's.
    """
    plt = pyplot()

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
    overrides = fig.get("labels") or {}
    names = estimator_labels(table, fig.get("estimator_labels"))
    color_col = "estimator" if "estimator" in series else (series[0] if series else None)
    marker_cols = [c for c in series if c != color_col]

    with styled():
        figure, ax = plt.subplots()
        groups = list(table.groupby(series, sort=True)) if series else [((), table)]
        keyed = []
        for key, grp in groups:
            key = key if isinstance(key, tuple) else (key,)
            keyed.append((dict(zip(series, key, strict=True)), key, grp))
        color_keys = []
        for values, _, grp in keyed:
            method = grp["method"].iloc[0] if "method" in grp and color_col == "estimator" else None
            color_keys.append((values.get(color_col), method))
        colors = assign_colors(color_keys)
        marker_values = sorted({tuple(v[c] for c in marker_cols) for v, _, _ in keyed})
        has_controls = False
        for values, key, grp in keyed:
            valid = bool(grp["valid"].astype(bool).all()) if "valid" in grp else True
            control = _controls(grp)
            style = {
                "color": colors[values.get(color_col)],
                "marker": MARKERS[
                    marker_values.index(tuple(values[c] for c in marker_cols)) % len(MARKERS)
                ],
            }
            main, ctrl = grp[~control], grp[control]
            if len(main):
                agg = main.groupby(x)[y].agg(["mean", "std", "count"]).sort_index()
                se = (agg["std"].fillna(0.0) / np.sqrt(agg["count"])).to_numpy()
                ax.errorbar(
                    agg.index.to_numpy(),
                    agg["mean"].to_numpy(),
                    yerr=se if kind in ("simulate", "train") else None,
                    label=series_label(series, key, names, overrides, valid),
                    **style,
                    **({} if valid else UNCORRECTED),
                )
            if len(ctrl):
                has_controls = True
                mean = ctrl.groupby(x)[y].mean().sort_index()
                xs = pd.to_numeric(pd.Series(mean.index), errors="coerce").to_numpy()
                if len(mean) > 1 and np.isfinite(xs).all():
                    ax.plot(mean.index, mean.to_numpy(), **style, **CONTROL)
                else:
                    ax.axhline(float(mean.mean()), color=style["color"], **CONTROL)
        if has_controls:
            ax.plot([], [], color="#7f7f7f", marker="o", label=CONTROL_LABEL, **CONTROL)
        finite = table[~_controls(table)]
        claimed = fig.get("claimed", True) and "claimed_epsilon" in table
        if kind in ("simulate", "train") and claimed:
            _plot_claimed(ax, finite, x)
        refs = [c for c in table.columns if c.startswith("reference_")]
        for j, col in enumerate(sorted(refs) if fig.get("references", True) else []):
            ref = finite.groupby(x)[col].mean().dropna().sort_index()
            if len(ref):
                name = col[len("reference_") :]
                ax.plot(
                    ref.index,
                    ref.to_numpy(),
                    ls=(0, (1, 1 + j)),
                    label=REFERENCE_LABELS.get(name, name.replace("_", " ")),
                    **REFERENCE,
                )
        draw_paper_values(ax, finite, fig.get("marks") or [], x, y)
        if fig.get("logx"):
            ax.set_xscale("log")
        if fig.get("logy"):
            ax.set_yscale("log")
        ax.set_xlabel(fig.get("xlabel") or column_label(x))
        ax.set_ylabel(y_label(fig, y, table, column_label(y)))
        title(ax, fig.get("title") or "")
        legend(figure, ax)
    return figure


def plot_table(table: pd.DataFrame, fig: Mapping[str, Any], outputs: Sequence[str | Path]) -> None:
    """:func:`draw_table`, written to each of ``outputs`` (pdf, png)."""
    save(draw_table(table, fig), outputs)
