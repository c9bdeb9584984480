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
from dpaudit.plots.labels import column_label, value_label, wrap_label
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
    REFERENCE,
    REFERENCE_STYLES,
    UNCORRECTED,
    assign_colors,
    legend,
    save,
    styled,
    title,
)

__all__ = ["REFERENCE_LABELS", "draw_table", "plot_table", "select_rows"]

#: Legend labels of known ``reference_<name>`` columns (others: the name with spaces).
REFERENCE_LABELS = {
    "shuffle_lower_bound": "shuffle lower bound (Chua et al.)",
    # Xiang, Wang, Wang (2024, arXiv:2402.13087), Section 5.1: the reduced Gaussian game
    "reduced_game_exact": "ceiling: reduced game, exact ε (Sec. 5.1)",
    "reduced_game_rdp": "upper bound ε_U-O: reduced game via RDP (Alg. 3)",
    # LiDP Table 1 (Pillutla et al. 2023, arXiv:2305.18447): a factor of 1 saves no trials
    "no_gain": "factor 1: no trials saved",
}

#: Further claims of the same rows drawn beside the main one (``claimed_epsilon_<name>``
#: columns) -> legend label. Only these: other such columns (the Opacus engine's epsilon of
#: every accountant for one run) restate the main claim and are not drawn.
CLAIM_LABELS = {
    # Xiang, Wang, Wang (2024, arXiv:2402.13087), App. A.1, Theorem 1: the tuned mechanism's
    # claim epsilon_U
    "papernot_steinke": "claim of the tuned mechanism ε_U (Papernot-Steinke)",
}

#: The main claim's label in a train table that carries the tuned mechanism's claim: there the
#: main claim is the budget of one training run (``dpaudit.training.tuning``).
BASE_CLAIM_LABEL = "claim of one training run ε_B"

#: A claim line more than this many times above the data's top is left off the y range (the
#: legend gives its value): drawn, it would squeeze the data into the bottom of the axes.
CLAIM_SPAN = 3.0


def _claim_columns(table: pd.DataFrame) -> list[str]:
    """The ``claimed_epsilon_<name>`` columns of :data:`CLAIM_LABELS` with a finite value."""
    return [
        f"claimed_epsilon_{name}"
        for name in CLAIM_LABELS
        if f"claimed_epsilon_{name}" in table.columns
        and np.isfinite(pd.to_numeric(table[f"claimed_epsilon_{name}"], errors="coerce")).any()
    ]


def _claim_label(column: str, base_is_budget: bool) -> str:
    """The legend label of a claim column (``claimed_epsilon``, or one of
    :data:`CLAIM_LABELS`); ``base_is_budget``: the main claim is one training run's epsilon_B."""
    if column == "claimed_epsilon":
        return BASE_CLAIM_LABEL if base_is_budget else "claimed ε"
    return CLAIM_LABELS[column[len("claimed_epsilon_") :]]


def _reference_label(column: str) -> str:
    name = column[len("reference_") :]
    return REFERENCE_LABELS.get(name, name.replace("_", " "))


def _plot_claimed(
    ax: Any, table: pd.DataFrame, x: str, column: str, label: str, style: dict
) -> Any:
    """One claim (``column``) in ``style``: a line along ``x`` where it has one value per ``x``
    (x is the target epsilon, or a swept mechanism parameter; a lone point gets a marker), else
    one horizontal line per value. Returns the first artist drawn (None if none)."""
    values = pd.to_numeric(table[column], errors="coerce")
    finite = table[np.isfinite(values)].assign(_claim=values[np.isfinite(values)])
    if finite.empty:
        return None
    per_x = finite.groupby(x)["_claim"].nunique()
    if (per_x <= 1).all():
        claimed = finite.groupby(x)["_claim"].mean().sort_index()
        marker = {"marker": style.get("marker") or "_", "ms": 10} if len(claimed) == 1 else {}
        (line,) = ax.plot(claimed.index, claimed.to_numpy(), label=label, **{**style, **marker})
        return line
    first = None
    for i, value in enumerate(sorted(finite["_claim"].round(6).unique())):
        line = ax.axhline(
            value, label=label if i == 0 else None, **{**style, "ls": style.get("ls", ":")}
        )
        first = first or line
    return first


def _controls(table: pd.DataFrame) -> pd.Series:
    """Rows of the no-noise control (claimed epsilon infinite)."""
    if "claimed_epsilon" not in table.columns:
        return pd.Series(False, index=table.index)
    return ~np.isfinite(pd.to_numeric(table["claimed_epsilon"], errors="coerce").fillna(0.0))


def _is_valid(grp: pd.DataFrame, y: str) -> bool:
    """Whether the rows are valid bounds. Only an epsilon bound can be uncorrected (the best of
    a grid, a threshold chosen on the same runs): any other column (test accuracy, a rate) is
    not a bound, and its line is never labelled "(uncorrected)"."""
    if y != "epsilon" or "valid" not in grp:
        return True
    return bool(grp["valid"].astype(bool).all())


def _stats(grp: pd.DataFrame, by: str, y: str) -> pd.DataFrame:
    """Mean, standard error of the mean and count of ``y`` per value of ``by``."""
    agg = grp.groupby(by)[y].agg(["mean", "std", "count"]).sort_index()
    agg["se"] = agg["std"].fillna(0.0) / np.sqrt(agg["count"])
    return agg


def _se_column(main: pd.DataFrame, x: str, y: str, index: pd.Index) -> np.ndarray:
    """The error bars an analysis table states itself: its ``<y>_se`` column (e.g. LiDP Table
    1's jackknife ``factor_se``) per ``x``, 0 where absent or undefined."""
    if f"{y}_se" not in main:
        return np.zeros(len(index))
    se = pd.to_numeric(main[f"{y}_se"], errors="coerce").groupby(main[x]).mean()
    return se.reindex(index).fillna(0.0).to_numpy(dtype=float)


def error_bar_note(table: pd.DataFrame, by: Sequence[str], y: str) -> str | None:
    """The legend entry that says what the error bars are ("error bars: ±1 s.e. of the mean over
    8 audits per point"), the points being the groups of ``by`` (the series columns and x), or
    None where every point is a single audit (no bars)."""
    by = [c for c in by if c in table.columns]
    if table.empty or not by:
        return None
    counts = table.groupby(by)[y].count()
    low, high = int(counts.min()), int(counts.max())
    if high <= 1:
        return None
    n = f"{low}" if low == high else f"{low}-{high}"
    return f"error bars: ±1 s.e. of the mean over {n} audits per point (models × seeds)"


def _y_limits(ax: Any, lo: float, hi: float, claims: Sequence[tuple[Any, float, float]]) -> None:
    """y-limits that bracket the data (``lo``..``hi``, error bars and the paper's values
    included) and each claim (``artist, lowest, highest`` of its values) whose lowest value lies
    within :data:`CLAIM_SPAN` of the data's top, drawn whole (a claim that rises along x, e.g.
    with the target epsilon, is never cut off at the top of the axes); a claim wholly further
    above keeps its lines out of view and its legend entry says so, with its largest value."""
    if not np.isfinite(hi):
        return
    top = hi
    for artist, lowest, highest in claims:
        if hi <= 0 or lowest <= CLAIM_SPAN * hi:
            top = max(top, highest)
        elif artist is not None:
            artist.set_label(f"{artist.get_label()} = {highest:g} (above the axis)")
    bottom = min(0.0, lo)
    pad = 0.08 * (top - bottom) if top > bottom else 1.0
    ax.set_ylim(bottom - (pad if bottom < 0 else 0.0), top + pad)


def _categories(series: Sequence[str]) -> tuple[list[str], list[str]]:
    """Split the series columns of a one-x figure into the rows of its dot chart (the setting:
    sampler, adversary, setup, ...) and the markers within a row (estimator, selection rule)."""
    hue = [c for c in series if c in ("estimator", "selection")]
    rows = [c for c in series if c not in hue]
    return (rows, hue) if rows else (series[:], [])


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
        sel = table
        for col, value in zip(hue_cols, hk, strict=True):
            sel = sel[sel[col] == value]
        if sel.empty:
            continue
        valid = _is_valid(sel, y)
        pos, means, ses = [], [], []
        for i, rk in enumerate(row_keys):
            rows = sel
            for col, value in zip(row_cols, rk, strict=True):
                rows = rows[rows[col] == value]
            if rows.empty:
                continue
            vals = pd.to_numeric(rows[y], errors="coerce").dropna()
            se = float(vals.std() / np.sqrt(len(vals))) if len(vals) > 1 else 0.0
            pos.append(i + (j - (len(hue_keys) - 1) / 2) * step)
            means.append(float(vals.mean()))
            ses.append(se)
        if not pos:
            continue
        means_a, ses_a = np.asarray(means), np.asarray(ses)
        hi, lo = max(hi, float((means_a + ses_a).max())), min(lo, float((means_a - ses_a).min()))
        label = series_label(hue_cols, hk, names, overrides, valid) if hue_cols else "ours"
        ax.errorbar(
            means_a,
            pos,
            xerr=ses_a if ses_a.any() else None,
            ls="none",
            color=colors[hk],
            marker=MARKERS[j % len(MARKERS)],
            label=label,
            **({} if valid else {"alpha": UNCORRECTED["alpha"]}),
        )
    tops: list[float] = [hi]
    extra = _claim_columns(table)
    budget = fig.get("kind") == "train" and bool(extra)
    lines: list[tuple[str, str, dict]] = []
    if fig.get("claimed", True) and "claimed_epsilon" in table:
        lines.append(("claimed_epsilon", _claim_label("claimed_epsilon", budget), CLAIMED))
        for k, col in enumerate(extra):
            lines.append((col, _claim_label(col, True), EXTRA_CLAIMED[k % len(EXTRA_CLAIMED)]))
    if fig.get("references", True):
        for k, col in enumerate(sorted(c for c in table.columns if c.startswith("reference_"))):
            lines.append((col, _reference_label(col), {**REFERENCE, **REFERENCE_STYLES[k % 4]}))
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
    xname = fig.get("xlabel") or column_label(x)
    ax.set_ylabel(f"{xname} = {value_text(value)}" if value is not None else "")
    note = error_bar_note(table, [*series, x], y)
    if note:
        ax.plot([], [], ls="none", label=note)
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
    data, the paper's values and each claim within :data:`CLAIM_SPAN` of the data. A table with
    one x value (every setting at one claimed epsilon) is drawn as a dot chart instead, one row
    per setting. Legend names come from ``labels`` (column -> value -> name) and
    ``estimator_labels`` (block -> name), else the library's.
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
    # colour by estimator, else by the first series column that varies (a column with one
    # value, e.g. the one target epsilon, would give every line the same colour)
    varying = [c for c in series if table[c].nunique() > 1]
    color_col = "estimator" if "estimator" in series else (varying or series or [None])[0]
    marker_cols = [c for c in series if c != color_col]
    # legends name what tells the lines apart (every column where none varies)
    label_cols = varying or series
    main_rows = table[~_controls(table)]
    one_x = kind in ("simulate", "train") and len(main_rows) and main_rows[x].nunique() == 1

    with styled():
        figure, ax = plt.subplots()
        if one_x:
            _draw_dots(figure, ax, main_rows, {**fig, "x": x}, series, y)
            return figure
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
        lo, hi = np.inf, -np.inf
        bars = kind in ("simulate", "train")
        for values, _key, grp in keyed:
            valid = _is_valid(grp, y)
            control = _controls(grp)
            style = {
                "color": colors[values.get(color_col)],
                "marker": MARKERS[
                    marker_values.index(tuple(values[c] for c in marker_cols)) % len(MARKERS)
                ],
            }
            main, ctrl = grp[~control], grp[control]
            if len(main):
                agg = _stats(main, x, y)
                se = agg["se"].to_numpy() if bars else _se_column(main, x, y, agg.index)
                mean = agg["mean"].to_numpy(dtype=float)
                if np.isfinite(mean).any():
                    hi = max(hi, float(np.nanmax(mean + se)))
                    lo = min(lo, float(np.nanmin(mean - se)))
                ax.errorbar(
                    agg.index.to_numpy(),
                    mean,
                    yerr=se if bars or f"{y}_se" in main else None,
                    label=series_label(
                        label_cols,
                        [values[c] for c in label_cols],
                        names,
                        overrides,
                        valid,
                    ),
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
        finite = table[~_controls(table)]
        claims: list[tuple[Any, float]] = []
        claimed = fig.get("claimed", True) and "claimed_epsilon" in table
        if bars and claimed:
            extra = _claim_columns(finite)
            columns = [("claimed_epsilon", CLAIMED)] + [
                (c, EXTRA_CLAIMED[k % len(EXTRA_CLAIMED)]) for k, c in enumerate(extra)
            ]
            for col, style in columns:
                label = _claim_label(col, kind == "train" and bool(extra))
                artist = _plot_claimed(ax, finite, x, col, label, style)
                value = pd.to_numeric(finite[col], errors="coerce")
                if artist is not None and np.isfinite(value).any():
                    kept = value[np.isfinite(value)]
                    claims.append((artist, float(kept.min()), float(kept.max())))
        refs = [c for c in table.columns if c.startswith("reference_")]
        for j, col in enumerate(sorted(refs) if fig.get("references", True) else []):
            ref = finite.groupby(x)[col].mean().dropna().sort_index()
            if len(ref):
                ref_style = {**REFERENCE, **REFERENCE_STYLES[j % len(REFERENCE_STYLES)]}
                ax.plot(ref.index, ref.to_numpy(), label=_reference_label(col), **ref_style)
                hi = max(hi, float(ref.max()))
        marks = [m for m in fig.get("marks") or [] if (m.get("column") or "epsilon") == y]
        draw_paper_values(ax, finite, marks, x, y)
        hi = max([hi] + [float(m["paper"]) for m in marks if m.get("paper") is not None])
        if bars:
            note = error_bar_note(finite, [*series, x], y)
            if note:
                ax.plot([], [], ls="none", label=note)
        elif f"{y}_se" in finite and np.isfinite(pd.to_numeric(finite[f"{y}_se"])).any():
            ax.plot([], [], ls="none", label=f"error bars: ±1 s.e. (the table's {y}_se)")
        if fig.get("logx"):
            ax.set_xscale("log")
        if fig.get("logy"):
            ax.set_yscale("log")
        elif bars and np.isfinite(hi):
            _y_limits(ax, lo, hi, claims)
        ax.set_xlabel(fig.get("xlabel") or column_label(x))
        ax.set_ylabel(y_label(fig, y, table, column_label(y)))
        title(ax, fig.get("title") or "")
        legend(figure, ax)
    return figure


def plot_table(table: pd.DataFrame, fig: Mapping[str, Any], outputs: Sequence[str | Path]) -> None:
    """:func:`draw_table`, written to each of ``outputs`` (pdf, png)."""
    save(draw_table(table, fig), outputs)
