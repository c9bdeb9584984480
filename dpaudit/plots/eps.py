"""Empirical lower bound vs claimed epsilon, one line per (estimator, selection rule), in the
package style (:mod:`dpaudit.plots.style`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dpaudit.keys import CLAIMED_EPSILON
from dpaudit.plots import pyplot
from dpaudit.plots.labels import column_label
from dpaudit.plots.series import draw_paper_values, estimator_labels, series_label, y_label
from dpaudit.plots.style import (
    CLAIMED,
    MARKERS,
    UNCORRECTED,
    assign_colors,
    legend,
    save,
    styled,
    title,
)


def draw_empirical_vs_claimed(table: pd.DataFrame, fig: Mapping[str, Any] | None = None) -> Any:
    """Mean lower bound over seeds (error bars: min to max) against the claimed epsilon; returns
    the matplotlib figure.

    A colour per estimator (fixed per method), a marker per selection rule; uncorrected
    (``valid == False``) rows are dashed, lighter and labelled "(uncorrected)". Settings without
    a guarantee (claimed epsilon infinite: the no-noise control) go to a narrow panel on the
    right, one marker per line in that line's colour, marker and size (mean, bars min to max),
    labelled as its legend entry, which names it (the panel adds no entries). ``fig`` may give
    ``title``, ``ylabel``, ``estimator_labels`` (block -> name), ``labels`` (column -> value ->
    name) and ``marks`` (``reproduce`` rows: the paper's printed values, hollow stars).
    """
    plt = pyplot()

    fig = dict(fig or {})
    table = table.copy()
    if "selection" not in table:
        table["selection"] = ""
    table["selection"] = table["selection"].fillna("").astype(str)
    table["valid"] = table["valid"].astype(bool)
    claimed = pd.to_numeric(table[CLAIMED_EPSILON], errors="coerce").astype(float)
    control = ~np.isfinite(claimed)
    names = estimator_labels(table, fig.get("estimator_labels"))
    overrides = fig.get("labels") or {}
    with styled():
        if control.any():
            figure, (ax, side) = plt.subplots(
                1, 2, sharey=True, gridspec_kw={"width_ratios": [6, 1]}
            )
        else:
            figure, ax = plt.subplots()
            side = None
        finite = table[~control]
        top = float(finite[CLAIMED_EPSILON].max()) if len(finite) else 1.0
        ax.plot([0, top], [0, top], label="claimed ε (y = x)", **CLAIMED)
        groups = list(table.groupby(["estimator", "selection"], sort=True))
        colors = assign_colors([(key[0], grp["method"].iloc[0]) for key, grp in groups])
        selections = sorted({key[1] for key, _ in groups})
        for i, (key, grp) in enumerate(groups):
            valid = bool(grp["valid"].all())
            style = {
                "color": colors[key[0]],
                "marker": MARKERS[selections.index(key[1]) % len(MARKERS)],
            }
            label = series_label(["estimator", "selection"], key, names, overrides, valid)
            fin = grp[np.isfinite(grp[CLAIMED_EPSILON].astype(float))]
            if len(fin):
                agg = (
                    fin.groupby("setting")
                    .agg(
                        x=(CLAIMED_EPSILON, "mean"),
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
                    label=label,
                    **style,
                    **({} if valid else UNCORRECTED),
                )
            inf = grp[~np.isfinite(grp[CLAIMED_EPSILON].astype(float))]
            if len(inf) and side is not None:
                y = inf["epsilon"].astype(float)
                mean = float(y.mean())
                side.errorbar(
                    [i],
                    [mean],
                    yerr=[[mean - float(y.min())], [float(y.max()) - mean]],
                    label=label,
                    ls="none",
                    **style,
                    **({} if valid else {"alpha": UNCORRECTED["alpha"]}),
                )
        draw_paper_values(ax, finite, fig.get("marks") or [], CLAIMED_EPSILON, "epsilon")
        ax.set_xlabel(fig.get("xlabel") or column_label(CLAIMED_EPSILON))
        ax.set_ylabel(y_label(fig, "epsilon", table, column_label("epsilon")))
        ax.set_xlim(0, top * 1.08)
        ax.set_ylim(bottom=0)
        if side is not None:
            side.set_title("no noise", fontsize=7)
            side.set_xticks([])
            side.set_xlim(-1, len(groups))
            side.set_xlabel("claimed ε = ∞\n(markers as\nin the legend)", fontsize=7)
        title(ax, fig.get("title") or "")
        legend(figure, ax)
    return figure


def plot_empirical_vs_claimed(
    table: pd.DataFrame, outputs: Sequence[str | Path], fig: Mapping[str, Any] | None = None
) -> None:
    """:func:`draw_empirical_vs_claimed`, written to each of ``outputs`` (pdf, png)."""
    save(draw_empirical_vs_claimed(table, fig), outputs)
