"""What a point of a line figure stands for: the mean of an audit column over repeated rows
(seeds, models) with its standard error of the mean, whether the rows are valid bounds, the
legend note on the error bars, and the natural order of series values
(:func:`dpaudit.plots.lines.draw_table` draws them)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd


def is_valid(grp: pd.DataFrame, y: str) -> bool:
    """Whether the rows are valid bounds. Only an epsilon bound can be uncorrected (the best of
    a grid, a threshold chosen on the same runs): any other column (test accuracy, a rate) is
    not a bound, and its line is never labelled "(uncorrected)"."""
    if y != "epsilon" or "valid" not in grp:
        return True
    return bool(grp["valid"].astype(bool).all())


def point_stats(grp: pd.DataFrame, by: str, y: str) -> pd.DataFrame:
    """Mean, standard error of the mean and count of ``y`` per value of ``by``."""
    agg = grp.groupby(by)[y].agg(["mean", "std", "count"]).sort_index()
    agg["se"] = agg["std"].fillna(0.0) / np.sqrt(agg["count"])
    return agg


def se_column(main: pd.DataFrame, x: str, y: str, index: pd.Index) -> np.ndarray:
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


def natural_key(value: Any) -> tuple[int, float, str]:
    """Sort key of a series or category value: numbers by value (1, 4, 16; the table holds
    them as text, "1", "16", "4" in string order), before any text, text in its own order."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return (1, 0.0, str(value))
    return (0, number, "") if np.isfinite(number) else (1, 0.0, str(value))


def repeated_rows(table: pd.DataFrame, kind: str, by: Sequence[str], y: str) -> bool:
    """Whether each point is a mean over repeated rows with standard-error bars: a simulate or
    train table (seeds, models), or an analysis table that gathers audit rows and keeps their
    ``seed`` column (the LiDP bound-vs-K and accuracy-vs-K tables: one row per seed)."""
    if kind in ("simulate", "train"):
        return True
    by = [c for c in by if c in table.columns]
    if kind != "analysis" or "seed" not in table.columns or table.empty or not by:
        return False
    return bool(table.groupby(by)[y].count().max() > 1)


def rows_with(table: pd.DataFrame, columns: Sequence[str], key: Sequence[Any]) -> pd.DataFrame:
    """The rows of ``table`` whose ``columns`` hold the values ``key`` (one per column)."""
    for col, value in zip(columns, key, strict=True):
        table = table[table[col] == value]
    return table


def standard_error(values: pd.Series) -> float:
    """The standard error of the mean of ``values`` (sample standard deviation over the square
    root of their number); 0 for a single value."""
    return float(values.std() / np.sqrt(len(values))) if len(values) > 1 else 0.0


def bar_extent(
    means: Sequence[float], ses: Sequence[float]
) -> tuple[np.ndarray, np.ndarray, float, float]:
    """The points' means and standard errors as arrays, and the top and bottom of their error
    bars (mean + s.e., mean - s.e.)."""
    means_a, ses_a = np.asarray(means), np.asarray(ses)
    return means_a, ses_a, float((means_a + ses_a).max()), float((means_a - ses_a).min())
