"""Line figures from tidy tables: simulation and train-grid audit tables, closed-form analysis
tables. Drawn in the package style (:mod:`dpaudit.plots.style`) with display names
(:mod:`dpaudit.plots.labels`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dpaudit.keys import CLAIMED_EPSILON
from dpaudit.plots import pyplot
from dpaudit.plots.claims import (
    claim_columns,
    claim_label,
    controls,
    plot_claimed,
    reference_label,
    y_limits,
)
from dpaudit.plots.labels import column_label, symbols, value_label, wrap_label
from dpaudit.plots.points import (
    bar_extent,
    error_bar_note,
    is_valid,
    natural_key,
    point_stats,
    repeated_rows,
    rows_with,
    se_column,
    standard_error,
)
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
    EXTRA_CLAIMED,
    MARKERS,
    PAPER_LABEL,
    REFERENCE,
    REFERENCE_STYLES,
    UNCORRECTED,
    assign_colors,
    legend,
    save,
    styled,
    title,
)

__all__ = ["draw_table", "plot_table", "select_rows"]

#: The end of the legend label of a line drawn against the right axis (``figure.right``).
RIGHT_AXIS_SUFFIX = " (right axis)"

def _value_ticks(ax: Any, xs: Sequence[float], most: int = 8) -> None:
    """Ticks of a logarithmic x axis at the data's x values, labelled plainly (1, 4, 16; 500,
    1000, 4000), without minor ticks, where there are at most ``most`` of them: matplotlib's
    decades (10^0, 10^1) or its unlabelled minor ticks would leave the points unnamed."""
    from matplotlib.ticker import FixedLocator, NullLocator

    values = sorted({float(v) for v in xs if np.isfinite(v) and v > 0})
    if not 1 < len(values) <= most:
        return
    ax.xaxis.set_major_locator(FixedLocator(values))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([f"{v:g}" for v in values])


def _dodged(xs: np.ndarray, j: int, n: int, logx: bool, span: float) -> np.ndarray:
    """x of line ``j`` of ``n`` shifted sideways so that lines on top of each other stay
    visible: by a small factor on a logarithmic axis, by a small part of ``span`` otherwise."""
    if n < 2:
        return xs
    offset = j - (n - 1) / 2
    if logx:
        return xs * 10 ** (0.02 * offset)
    return xs + 0.008 * span * offset


def _categories(series: Sequence[str]) -> tuple[list[str], list[str]]:
    """Split the series columns of a one-x figure into the rows of its dot chart (the setting:
    sampler, adversary, setup, ...) and the markers within a row (estimator, selection rule)."""
    hue = [c for c in series if c in ("estimator", "selection")]
    rows = [c for c in series if c not in hue]
    return (rows, hue) if rows else (series[:], [])


def _error_bars(
    ax: Any,
    pos: Sequence[float],
    means: np.ndarray,
    ses: np.ndarray,
    horizontal: bool,
    **style: Any,
) -> Any:
    """The points ``means`` at positions ``pos`` with ±1 s.e. bars ``ses`` (none where every
    s.e. is 0), no connecting line: values along x (a dot chart's rows, ``horizontal``) or
    along y (categories)."""
    err = ses if ses.any() else None
    if horizontal:
        return ax.errorbar(means, pos, xerr=err, ls="none", **style)
    return ax.errorbar(pos, means, yerr=err, ls="none", **style)


def _draw_dots(
    figure: Any, ax: Any, table: pd.DataFrame, fig: Mapping[str, Any], series: list[str], y: str
) -> None:
    """The figure of a table with one x value: a dot chart, one row per setting (the series
    columns other than estimator and selection), its value on the horizontal axis (mean, ±1 s.e.
    bars), one marker and colour per estimator and selection rule, each claim and reference a
    vertical line where all rows share it, else a mark on each row."""
    x = fig.get("x")
    overrides = fig.get("labels") or {}
    names = estimator_labels(table, fig.get("estimator_labels"))
    row_cols, hue_cols = _categories(series)
    row_keys = list(dict.fromkeys(map(tuple, table[row_cols].to_numpy()))) if row_cols else [()]
    hue_keys = sorted(set(map(tuple, table[hue_cols].to_numpy()))) if hue_cols else [()]
    methods = table.groupby(hue_cols)["method"].first() if hue_cols and "method" in table else {}
    colors = assign_colors(
        [(k, methods.get(k[0] if len(k) == 1 else k) if len(methods) else None) for k in hue_keys]
    )
    step = 0.6 / max(len(hue_keys), 1)
    hi, lo = -np.inf, np.inf
    for j, hk in enumerate(hue_keys):
        sel = rows_with(table, hue_cols, hk)
        if sel.empty:
            continue
        valid = is_valid(sel, y)
        pos, means, ses = [], [], []
        for i, rk in enumerate(row_keys):
            rows = rows_with(sel, row_cols, rk)
            if rows.empty:
                continue
            vals = pd.to_numeric(rows[y], errors="coerce").dropna()
            se = standard_error(vals)
            pos.append(i + (j - (len(hue_keys) - 1) / 2) * step)
            means.append(float(vals.mean()))
            ses.append(se)
        if not pos:
            continue
        means_a, ses_a, top, bottom = bar_extent(means, ses)
        hi, lo = max(hi, top), min(lo, bottom)
        label = series_label(hue_cols, hk, names, overrides, valid) if hue_cols else "ours"
        _error_bars(
            ax,
            pos,
            means_a,
            ses_a,
            True,
            color=colors[hk],
            marker=MARKERS[j % len(MARKERS)],
            label=label,
            **({} if valid else {"alpha": UNCORRECTED["alpha"]}),
        )
    tops: list[float] = [hi]
    extra = claim_columns(table)
    budget = fig.get("kind") == "train" and bool(extra)
    lines: list[tuple[str, str, dict]] = []
    if fig.get("claimed", True) and CLAIMED_EPSILON in table:
        main_label = claim_label(CLAIMED_EPSILON, budget, fig.get("claim_label"))
        lines.append((CLAIMED_EPSILON, main_label, CLAIMED))
        for k, col in enumerate(extra):
            lines.append((col, claim_label(col, True), EXTRA_CLAIMED[k % len(EXTRA_CLAIMED)]))
    if fig.get("references", True):
        for k, col in enumerate(sorted(c for c in table.columns if c.startswith("reference_"))):
            lines.append((col, reference_label(col), {**REFERENCE, **REFERENCE_STYLES[k % 4]}))
    for col, label, style in lines:
        values = pd.to_numeric(table[col], errors="coerce")
        if not np.isfinite(values).any():
            continue
        per_row = []
        for rk in row_keys:
            rows = values
            for c, value in zip(row_cols, rk, strict=True):
                rows = rows[table[c] == value]
            per_row.append(float(rows.mean()) if np.isfinite(rows).any() else np.nan)
        per_row_a = np.asarray(per_row)
        finite = per_row_a[np.isfinite(per_row_a)]
        tops.append(float(finite.max()))
        if np.allclose(finite, finite[0]):
            ax.axvline(
                finite[0],
                label=f"{label} = {finite[0]:.3g}",
                **{k: v for k, v in style.items() if k != "marker"},
            )
        else:
            ax.plot(
                per_row_a,
                np.arange(len(row_keys)),
                ls="none",
                marker=style.get("marker") or "|",
                ms=9,
                mew=1.4,
                color=style["color"],
                label=label,
            )

    def row_part(col: str, value: Any) -> str:  # an estimator by its display name (legends')
        if col == "estimator" and str(value) in names:
            return names[str(value)]
        return value_label(col, value, overrides)

    row_names = [
        wrap_label(
            ", ".join(p for p in (row_part(c, v) for c, v in zip(row_cols, rk, strict=True)) if p)
            or "all",
            30,
        )
        for rk in row_keys
    ]
    ax.set_yticks(np.arange(len(row_keys)))
    ax.set_yticklabels(row_names)
    ax.set_ylim(len(row_keys) - 0.5, -0.5)
    right = max(t for t in tops if np.isfinite(t)) if np.isfinite(tops).any() else 1.0
    left = min(0.0, lo) if np.isfinite(lo) else 0.0
    ax.set_xlim(left - 0.03 * (right - left or 1.0), right + 0.08 * (right - left or 1.0))
    ax.grid(axis="y", visible=False)
    ax.set_xlabel(y_label(fig, y, table, column_label(y)))
    value = table[x].dropna().unique()[0] if x in table else None
    xname = symbols(fig["xlabel"]) if fig.get("xlabel") else column_label(x)
    ax.set_ylabel(f"{xname} = {value_text(value)}" if value is not None else "")
    note = error_bar_note(table, [*series, x], y)
    if note:
        ax.plot([], [], ls="none", label=note)
    title(ax, fig.get("title") or "")
    legend(figure, ax, below=True)


def _draw_categories(
    figure: Any, ax: Any, table: pd.DataFrame, fig: Mapping[str, Any], series: list[str], y: str
) -> None:
    """A categorical figure (``categories``: the columns naming each group, e.g. LiDP Table 1's
    cells): one group of ticks per combination of the category columns, in table order, each
    named by their display values on lines of their own; within a group one marker per value of
    the ``series`` columns, side by side (dodged, never joined by lines: the groups are not an
    axis), with ±1 s.e. bars (the table's ``<y>_se`` column, or over repeated rows); beside
    each, hollow in the same colour, the value the paper prints for that row (``paper``:
    ``{column, label}``, e.g. Table 1's ``paper_factor``); each ``reference_<name>`` column a
    plain horizontal line (no markers: it is not data)."""
    cats = list(fig["categories"])
    missing = [c for c in [*cats, *series, y] if c not in table.columns]
    if missing:
        raise ValueError(f"figure: no column {missing}; columns: {sorted(table.columns)}")
    for col in cats:
        table[col] = table[col].fillna("").astype(str)
    overrides = fig.get("labels") or {}
    names = estimator_labels(table, fig.get("estimator_labels"))
    cat_keys = list(dict.fromkeys(map(tuple, table[cats].to_numpy())))
    hue_keys = sorted(
        set(map(tuple, table[series].to_numpy())) if series else {()},
        key=lambda t: tuple(natural_key(v) for v in t),
    )
    methods = table.groupby(series)["method"].first() if "estimator" in series else {}
    colors = assign_colors(
        [(k, methods.get(k[0] if len(k) == 1 else k) if len(methods) else None) for k in hue_keys]
    )
    paper = fig.get("paper") or {}
    paper_col = paper.get("column")
    if paper_col and paper_col not in table.columns:
        raise ValueError(f"figure.paper: no column {paper_col!r}; columns: {sorted(table.columns)}")
    slots = len(hue_keys) * (2 if paper_col else 1)
    width = 0.8 / max(slots, 1)
    repeated = repeated_rows(table, "analysis" if "seed" in table else "", [*cats, *series], y)
    hi, lo = -np.inf, 0.0
    for j, hk in enumerate(hue_keys):
        sel = rows_with(table, series, hk)
        pos, means, ses, printed = [], [], [], []
        for i, ck in enumerate(cat_keys):
            rows = rows_with(sel, cats, ck)
            vals = pd.to_numeric(rows[y], errors="coerce").dropna()
            if vals.empty:
                continue
            if repeated:
                se = standard_error(vals)
            elif f"{y}_se" in rows:
                se = float(pd.to_numeric(rows[f"{y}_se"], errors="coerce").mean())
            else:
                se = 0.0
            slot = j * (2 if paper_col else 1)
            pos.append(i + (slot - (slots - 1) / 2) * width)
            means.append(float(vals.mean()))
            ses.append(se if np.isfinite(se) else 0.0)
            if paper_col:
                value = pd.to_numeric(rows[paper_col], errors="coerce").dropna()
                printed.append(float(value.mean()) if len(value) else np.nan)
        if not pos:
            continue
        means_a, ses_a, top, bottom = bar_extent(means, ses)
        hi, lo = max(hi, top), min(lo, bottom)
        label = series_label(series, hk, names, overrides, True) if series else ""
        marker = MARKERS[j % len(MARKERS)]
        _error_bars(
            ax,
            pos,
            means_a,
            ses_a,
            False,
            color=colors[hk],
            marker=marker,
            label=f"ours, {label}" if paper_col and label else label or "ours",
        )
        if paper_col and np.isfinite(printed).any():
            printed_a = np.asarray(printed)
            hi = max(hi, float(np.nanmax(printed_a)))
            name = paper.get("label") or PAPER_LABEL
            ax.plot(
                np.asarray(pos) + width,
                printed_a,
                ls="none",
                marker=marker,
                ms=7,
                mfc="none",
                mec=colors[hk],
                mew=1.3,
                zorder=5,
                label=wrap_label(f"{name}, {label}" if label else name, 60),
            )
    refs = sorted(c for c in table.columns if c.startswith("reference_"))
    for k, col in enumerate(refs if fig.get("references", True) else []):
        values = pd.to_numeric(table[col], errors="coerce").dropna().unique()
        if len(values) == 1:
            style = {**REFERENCE, "ls": REFERENCE_STYLES[k % len(REFERENCE_STYLES)]["ls"]}
            ax.axhline(float(values[0]), label=reference_label(col), **style)
            hi = max(hi, float(values[0]))

    def tick(key: tuple) -> str:
        parts = [value_label(c, v, overrides) for c, v in zip(cats, key, strict=True)]
        return "\n".join(wrap_label(p, 22) for p in parts if p)

    ax.set_xticks(np.arange(len(cat_keys)))
    ax.set_xticklabels([tick(k) for k in cat_keys])
    ax.set_xlim(-0.5, len(cat_keys) - 0.5)
    ax.grid(axis="x", visible=False)
    if np.isfinite(hi):
        ax.set_ylim(lo, hi + 0.08 * (hi - lo or 1.0))
    if fig.get("xlabel"):
        ax.set_xlabel(symbols(fig["xlabel"]))
    ax.set_ylabel(y_label(fig, y, table, column_label(y)))
    if repeated:
        note = error_bar_note(table, [*cats, *series], y)
        if note:
            ax.plot([], [], ls="none", label=note)
    elif f"{y}_se" in table and np.isfinite(pd.to_numeric(table[f"{y}_se"])).any():
        ax.plot([], [], ls="none", label=f"error bars: ±1 s.e. (the table's {y}_se)")
    title(ax, fig.get("title") or "")
    legend(figure, ax, below=True)


def value_text(value: Any) -> str:
    """A number as the axis states it (0.4, 1e+04), anything else as it is."""
    try:
        return f"{float(value):g}"
    except (TypeError, ValueError):
        return str(value)


def draw_table(table: pd.DataFrame, fig: Mapping[str, Any]) -> Any:
    """Draw ``fig['y']`` against ``fig['x']``, one line per value of the ``series`` columns, and
    return the matplotlib figure.

    Simulation and train tables are aggregated over seeds (mean, bars one standard error; a
    legend entry says so). Lines are coloured by estimator (a fixed colour per method) or by the
    first series column, with a marker per value of the other series columns. Epsilon bounds
    with ``valid == False`` make dashed, lighter lines labelled "(uncorrected)" (no other column
    is a bound, so none other is labelled so); no-noise controls are thin dotted lines with one
    legend entry; with ``claimed`` the claimed epsilon is drawn in grey, and every further claim
    of the rows (``claimed_epsilon_<name>``, e.g. a tuned mechanism's epsilon_U) in a grey style
    of its own; with ``references`` every ``reference_<name>`` column (from the score files'
    ``meta["references"]``) in a black style of its own, and every value the paper prints
    (``marks``: the experiment's ``reproduce`` rows) as a hollow star. The y-limits bracket the
    data, the paper's values and each claim within :data:`dpaudit.plots.claims.CLAIM_SPAN` of
    the data. A table with one x value (every setting at one claimed epsilon) is drawn as a dot
    chart instead, one row per setting. Legend names come from ``labels`` (column -> value ->
    name) and ``estimator_labels`` (block -> name), else the library's.
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
    if fig.get("categories"):
        with styled():
            figure, ax = plt.subplots()
            _draw_categories(figure, ax, table, fig, series, y)
        return figure
    # colour by the configured column, else by estimator, else by the first series column that
    # varies (a column with one value, e.g. the one target epsilon, would give every line the
    # same colour)
    varying = [c for c in series if table[c].nunique() > 1]
    color_col = fig.get("color") or (
        "estimator" if "estimator" in series else (varying or series or [None])[0]
    )
    marker_cols = [c for c in series if c != color_col]
    # legends name what tells the lines apart (every column where none varies)
    label_cols = varying or series
    main_rows = table[~controls(table)]
    one_x = kind in ("simulate", "train") and len(main_rows) and main_rows[x].nunique() == 1

    with styled():
        figure, ax = plt.subplots()
        if one_x:
            _draw_dots(figure, ax, main_rows, {**fig, "x": x}, series, y)
            return figure
        groups = list(table.groupby(series, sort=False)) if series else [((), table)]
        keyed = []
        for key, grp in groups:
            key = key if isinstance(key, tuple) else (key,)
            keyed.append((dict(zip(series, key, strict=True)), key, grp))
        # numbers in numeric order (k = 1, 4, 16), in legends and in colour and marker order
        keyed.sort(key=lambda item: tuple(natural_key(v) for v in item[1]))
        color_keys = []
        for values, _, grp in keyed:
            method = grp["method"].iloc[0] if "method" in grp and color_col == "estimator" else None
            color_keys.append((values.get(color_col), method))
        colors = assign_colors(color_keys)
        marker_values = sorted(
            {tuple(v[c] for c in marker_cols) for v, _, _ in keyed},
            key=lambda t: tuple(natural_key(v) for v in t),
        )
        # lines that are not epsilon (figure.right: e.g. an accuracy) get an axis of their own
        right_values = {str(v) for v in (fig.get("right") or {}).get("series") or []}

        def on_right(values: Mapping[str, Any]) -> bool:
            return bool(right_values & {str(v) for v in values.values()})

        ax_right = ax.twinx() if any(on_right(v) for v, _, _ in keyed) else None
        has_controls = False
        lo, hi = np.inf, -np.inf
        bars = kind in ("simulate", "train")
        repeated = repeated_rows(table[~controls(table)], kind, [*series, x], y)
        logx = bool(fig.get("logx"))
        xs_all = pd.to_numeric(table[x], errors="coerce") if x in table else pd.Series([])
        span = float(xs_all.max() - xs_all.min()) if xs_all.notna().any() else 0.0
        for j, (values, _key, grp) in enumerate(keyed):
            valid = is_valid(grp, y)
            control = controls(grp)
            # one series column: each line its own marker too, so that lines on top of each
            # other are still told apart
            index = marker_values.index(tuple(values[c] for c in marker_cols)) if marker_cols else j
            style = {
                "color": colors[values.get(color_col)],
                "marker": MARKERS[index % len(MARKERS)],
            }
            main, ctrl = grp[~control], grp[control]
            right = ax_right is not None and on_right(values)
            if len(main):
                agg = point_stats(main, x, y)
                se = agg["se"].to_numpy() if repeated else se_column(main, x, y, agg.index)
                mean = agg["mean"].to_numpy(dtype=float)
                if np.isfinite(mean).any() and not right:
                    hi = max(hi, float(np.nanmax(mean + se)))
                    lo = min(lo, float(np.nanmin(mean - se)))
                at = agg.index.to_numpy()
                if fig.get("dodge"):
                    at = _dodged(at.astype(float), j, len(keyed), logx, span)
                (ax_right if right else ax).errorbar(
                    at,
                    mean,
                    yerr=se if repeated or f"{y}_se" in main else None,
                    label=series_label(
                        label_cols,
                        [values[c] for c in label_cols],
                        names,
                        overrides,
                        valid,
                    )
                    + (RIGHT_AXIS_SUFFIX if right else ""),
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
                hi = max(hi, float(np.nanmax(mean.to_numpy(dtype=float))))
        if has_controls:
            ax.plot([], [], color="#7f7f7f", marker="o", label=CONTROL_LABEL, **CONTROL)
        finite = table[~controls(table)]
        claims: list[tuple[Any, float]] = []
        claimed = fig.get("claimed", True) and CLAIMED_EPSILON in table
        if bars and claimed:
            extra = claim_columns(finite)
            columns = [(CLAIMED_EPSILON, CLAIMED)] + [
                (c, EXTRA_CLAIMED[k % len(EXTRA_CLAIMED)]) for k, c in enumerate(extra)
            ]
            for col, style in columns:
                label = claim_label(col, kind == "train" and bool(extra), fig.get("claim_label"))
                artist = plot_claimed(ax, finite, x, col, label, style)
                value = pd.to_numeric(finite[col], errors="coerce")
                if artist is not None and np.isfinite(value).any():
                    kept = value[np.isfinite(value)]
                    claims.append((artist, float(kept.min()), float(kept.max())))
        refs = [c for c in table.columns if c.startswith("reference_")]
        for j, col in enumerate(sorted(refs) if fig.get("references", True) else []):
            ref = finite.groupby(x)[col].mean().dropna().sort_index()
            if len(ref):
                ref_style = {**REFERENCE, **REFERENCE_STYLES[j % len(REFERENCE_STYLES)]}
                ax.plot(ref.index, ref.to_numpy(), label=reference_label(col), **ref_style)
                hi = max(hi, float(ref.max()))
        marks = [m for m in fig.get("marks") or [] if (m.get("column") or "epsilon") == y]

        def line_of(rows: pd.DataFrame) -> tuple[str, str] | None:
            """The legend label and colour of the one line ``rows`` belong to."""
            keys = {tuple(r) for r in rows[series].astype(str).to_numpy()} if series else set()
            if len(keys) != 1:
                return None
            (key,) = keys
            label = series_label(
                label_cols,
                [key[series.index(c)] for c in label_cols],
                names,
                overrides,
                True,
            )
            return label, colors[dict(zip(series, key, strict=True)).get(color_col)]

        draw_paper_values(ax, finite, marks, x, y, line_of)
        hi = max([hi] + [float(m["paper"]) for m in marks if m.get("paper") is not None])
        if repeated:
            note = error_bar_note(finite, [*series, x], y)
            if note:
                ax.plot([], [], ls="none", label=note)
        elif f"{y}_se" in finite and np.isfinite(pd.to_numeric(finite[f"{y}_se"])).any():
            ax.plot([], [], ls="none", label=f"error bars: ±1 s.e. (the table's {y}_se)")
        if logx:
            ax.set_xscale("log")
            _value_ticks(ax, xs_all.dropna().unique())
        if fig.get("logy"):
            ax.set_yscale("log")
        elif bars and np.isfinite(hi):
            y_limits(ax, lo, hi, claims)
        ax.set_xlabel(symbols(fig["xlabel"]) if fig.get("xlabel") else column_label(x))
        ax.set_ylabel(y_label(fig, y, table, column_label(y)))
        if ax_right is not None:
            given = (fig.get("right") or {}).get("ylabel")
            ax_right.set_ylabel(symbols(given) if given else column_label(y))
            ax_right.grid(False)
            ax_right.spines["right"].set_visible(True)
        title(ax, fig.get("title") or "")
        legend(figure, ax, others=[ax_right] if ax_right is not None else [])
    return figure


def plot_table(table: pd.DataFrame, fig: Mapping[str, Any], outputs: Sequence[str | Path]) -> None:
    """:func:`draw_table`, written to each of ``outputs`` (pdf, png)."""
    save(draw_table(table, fig), outputs)
