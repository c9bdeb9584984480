"""What the figures share: the display name of each line, the confidence level the axis states,
and the paper's printed values drawn beside ours."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from dpaudit.plots.labels import (
    confidence_text,
    estimator_label,
    params_confidence,
    symbols,
    value_label,
    wrap_label,
)
from dpaudit.plots.style import PAPER, PAPER_LABEL, PAPER_OTHER, PAPER_OTHER_LABEL


def select_rows(table: pd.DataFrame, where: Mapping[str, Any]) -> pd.DataFrame:
    """The rows whose columns have the given values (a value or a list of values); a column the
    table lacks is an error naming it and the columns it has."""
    keep = pd.Series(True, index=table.index)
    for col, want in where.items():
        if col not in table.columns:
            raise ValueError(f"figure.where: no column {col!r}; columns: {sorted(table.columns)}")
        values = want if isinstance(want, list) else [want]
        keep &= table[col].astype(str).isin([str(v) for v in values]) | table[col].isin(values)
    return table[keep].copy()


def estimator_labels(table: pd.DataFrame, given: Mapping[str, str] | None) -> dict[str, str]:
    """Estimator block -> display name: the config's (``given``, from each block's ``label`` or
    the library's default for the block), else made from the rows' method and parameters. Where
    blocks of one figure differ only in their confidence, the confidence joins the name."""
    if "estimator" not in table.columns:
        return {}
    names: dict[str, str] = {}
    conf: dict[str, float | None] = {}
    for name, rows in table.groupby("estimator", sort=True):
        first = rows.iloc[0]
        params = first.get("params", "{}")
        spec = json.loads(params) if isinstance(params, str) and params else {}
        method = first.get("method", name)
        method = method if isinstance(method, str) else str(name)
        names[str(name)] = (given or {}).get(str(name)) or estimator_label(
            {**spec, "method": method}
        )
        conf[str(name)] = params_confidence(params)
    for label in set(names.values()):
        same = [n for n in names if names[n] == label]
        levels = {conf[n] for n in same}
        if len(same) > 1 and len(levels) == len(same) and None not in levels:
            for n in same:
                names[n] = f"{label}, {confidence_text(conf[n])}"  # type: ignore[arg-type]
    return names


def common_confidence(table: pd.DataFrame) -> float | None:
    """The one confidence level of every row's estimator (None if they differ or state none)."""
    if "params" not in table.columns or table.empty:
        return None
    levels = {params_confidence(p) for p in table["params"].dropna().unique()}
    return levels.pop() if len(levels) == 1 else None


def y_label(fig: Mapping[str, Any], y: str, table: pd.DataFrame, default: str) -> str:
    """The y-axis label: the config's ``ylabel`` or ``default``, with the confidence level of
    the bounds when every line shares one and the label does not state it."""
    label = symbols(fig["ylabel"]) if fig.get("ylabel") else default
    level = common_confidence(table) if y == "epsilon" else None
    if level is not None and "%" not in label:
        label = f"{label} ({confidence_text(level)} confidence)"
    return label


def series_label(
    columns: Sequence[str],
    key: Sequence[Any],
    names: Mapping[str, str],
    overrides: Mapping[str, Mapping[str, str]] | None,
    valid: bool,
) -> str:
    """The legend text of one line: each series column's display value, joined by commas,
    "(uncorrected)" when its rows are not valid bounds."""
    parts = []
    for col, value in zip(columns, key, strict=True):
        if col == "estimator" and str(value) in names:
            parts.append(names[str(value)])
        else:
            parts.append(value_label(col, value, overrides))
    text = ", ".join(p for p in parts if p) or "all"
    return wrap_label(text + ("" if valid else " (uncorrected)"))


def draw_paper_values(
    ax: Any,
    table: pd.DataFrame,
    marks: Sequence[Mapping[str, Any]],
    x: str,
    y: str,
    line_of: Callable[[pd.DataFrame], tuple[str, str] | None] | None = None,
) -> int:
    """Draw each value the paper prints (``reproduce`` rows with ``paper``, whose ``column`` is
    the plotted ``y``) at the x of the rows its ``where`` selects, as a hollow black star (a
    hollow grey diamond, labelled so, where the row's ``source`` is ``not_comparable``: the
    paper's number for its own, larger setup).
    Rows naming a column this table lacks, or selecting no plotted point (or several x), are
    not about a point of this figure and draw nothing. Where the drawn values belong to
    different lines of the figure (``line_of``: the selected rows -> the legend label and colour
    of their one line, None when they span several), each is edged in its line's colour with
    a legend entry of its own ("paper (printed value): no canaries"), so that two values at
    one x are not one entry. Returns how many were drawn."""
    todo = []
    for mark in marks:
        if mark.get("paper") is None or (mark.get("column") or "epsilon") != y:
            continue
        where = mark.get("where") or {}
        if any(col not in table.columns for col in where):
            continue
        rows = select_rows(table, where)
        xs = pd.to_numeric(rows[x], errors="coerce").dropna().unique() if len(rows) else []
        xs = [v for v in xs if np.isfinite(v)]
        if len(xs) != 1:
            continue
        todo.append((mark, xs[0], line_of(rows) if line_of else None))
    lines = {line for _, _, line in todo}
    per_line = len(lines) > 1 and None not in lines
    for mark, at, line in todo:
        other = mark.get("source") == "not_comparable"
        label = PAPER_OTHER_LABEL if other else PAPER_LABEL
        style = {**PAPER, **(PAPER_OTHER if other else {})}
        if per_line and line is not None:
            label = f"{label}: {line[0]}"
            style["mec"] = line[1]
        ax.plot([at], [float(mark["paper"])], label=wrap_label(label, 60), zorder=5, **style)
    return len(todo)
