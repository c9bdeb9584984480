"""Tidy audit tables: reading, concatenating, summarising."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from dpaudit.audit import ID_COLUMNS


def concat_tables(paths: list[str | Path]) -> pd.DataFrame:
    """Concatenate per-file audit CSVs (skipping empty ones), identity columns first."""
    frames = []
    for p in paths:
        frame = pd.read_csv(p)
        if not frame.empty:
            frames.append(frame)
    if not frames:
        return pd.DataFrame(columns=ID_COLUMNS)
    table = pd.concat(frames, ignore_index=True)
    rest = [c for c in table.columns if c not in ID_COLUMNS]
    return table[[c for c in ID_COLUMNS if c in table.columns] + rest]
