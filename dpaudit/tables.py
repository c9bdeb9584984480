"""Tidy audit tables: reading, concatenating, summarising."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from dpaudit.audit import ID_COLUMNS


def concat_tables(paths: list[str | Path]) -> pd.DataFrame:
    """Concatenate per-file audit CSVs (skipping empty ones), identity columns first."""
    return concat_frames([pd.read_csv(p) for p in paths])


def concat_frames(tables: list[pd.DataFrame]) -> pd.DataFrame:
    """Concatenate audit tables (skipping empty ones), identity columns first."""
    frames = [frame for frame in tables if not frame.empty]
    if not frames:
        return pd.DataFrame(columns=ID_COLUMNS)
    table = pd.concat(frames, ignore_index=True)
    rest = [c for c in table.columns if c not in ID_COLUMNS]
    return table[[c for c in ID_COLUMNS if c in table.columns] + rest]


def add_setting_columns(table: pd.DataFrame, settings: dict[str, dict]) -> pd.DataFrame:
    """Join the parameters that define each setting (e.g. the swept n, K, d) as columns.

    Where an estimator's diagnostic has the same name as a setting parameter (the one-run
    estimator's ``m`` is the number of canaries *it used*, half of them for a sample split),
    the setting keeps the name and the diagnostic is renamed ``<name>_estimator``.
    """
    if table.empty or not settings:
        return table
    extra = pd.DataFrame.from_dict(settings, orient="index")
    extra.index.name = "setting"
    clash = [c for c in extra.columns if c in table.columns]
    table = table.rename(columns={c: f"{c}_estimator" for c in clash})
    return table.merge(extra.reset_index(), on="setting", how="left")
