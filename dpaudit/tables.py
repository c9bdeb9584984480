"""Tidy audit tables: writing and checking per-setting audit CSVs, concatenating, summarising.

Every per-(estimator, setting) audit CSV the pipeline writes holds at least one row per seed and
a column :data:`ROWS_COLUMN` with the file's row count on every row, so that a file damaged
after it was written (cut to its header, cut mid-row or at a row boundary, emptied) is told
apart from a complete one: :func:`read_audit_csv` raises an :class:`AuditTableError` naming the
file and the row instead of merging a partial table.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pandas as pd

from dpaudit.audit import ID_COLUMNS

#: Column holding the number of data rows of the per-setting file (checked, then dropped).
ROWS_COLUMN = "rows_in_file"

#: Columns that must hold a value in every row of an audit table.
REQUIRED_COLUMNS = [
    "experiment",
    "setting",
    "seed",
    "design",
    "estimator",
    "method",
    "params",
    "epsilon",
    "valid",
]


class AuditTableError(ValueError):
    """An audit CSV is missing, empty, truncated or malformed."""


def with_row_count(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with :data:`ROWS_COLUMN` (its number of rows) appended, for writing."""
    return table.assign(**{ROWS_COLUMN: len(table)})


def check_rows(table: pd.DataFrame, source: str) -> None:
    """Raise if a required column is absent or holds a missing value (row = CSV line number).

    Line numbers count the header as line 1, so the first data row is line 2.
    """
    absent = [c for c in REQUIRED_COLUMNS if c not in table.columns]
    if absent:
        raise AuditTableError(
            f"{source}: not an audit table: missing column(s) {absent}; "
            f"required: {REQUIRED_COLUMNS}"
        )
    missing = table[REQUIRED_COLUMNS].isna()
    if missing.any().any():
        pos = int(missing.any(axis=1).to_numpy().argmax())
        cols = [c for c in REQUIRED_COLUMNS if missing[c].iloc[pos]]
        raise AuditTableError(
            f"{source}: line {pos + 2} (data row {pos + 1}) has no value in {cols}; "
            "the file is truncated or damaged: delete it and rerun its audit job"
        )


def read_audit_csv(path: str | Path) -> pd.DataFrame:
    """Read one per-setting audit CSV written with :func:`with_row_count` and check it whole.

    Raises :class:`AuditTableError` naming the file (and the line) if it is empty, holds only
    a header, does not end with a newline, has fewer rows than it declares, or has a missing
    value in a required column. The row-count column is dropped from the result.
    """
    path = Path(path)
    src = str(path)
    hint = "delete it and rerun its audit job"
    try:
        raw = path.read_bytes()
    except OSError as exc:
        reason = exc.strerror or exc
        raise AuditTableError(f"{src}: cannot read the audit table ({reason})") from exc
    if not raw.strip():
        raise AuditTableError(f"{src}: the audit table is empty (no header, no rows); {hint}")
    if not raw.endswith(b"\n"):
        raise AuditTableError(
            f"{src}: the audit table does not end with a newline: its last row is cut; {hint}"
        )
    try:
        table = pd.read_csv(path, keep_default_na=True)
    except (pd.errors.ParserError, UnicodeDecodeError, csv.Error) as exc:
        raise AuditTableError(f"{src}: not a readable CSV audit table ({exc}); {hint}") from exc
    if table.empty:
        raise AuditTableError(
            f"{src}: the audit table holds only a header, but every audit job writes at least "
            f"one row per seed: the file is truncated; {hint}"
        )
    if ROWS_COLUMN not in table.columns:
        raise AuditTableError(
            f"{src}: no '{ROWS_COLUMN}' column: not written by this version's audit rule, or "
            f"its header is damaged; {hint}"
        )
    check_rows(table, src)
    declared = pd.to_numeric(table[ROWS_COLUMN], errors="coerce")
    wrong = declared.isna() | (declared != len(table))
    if wrong.any():
        pos = int(wrong.to_numpy().argmax())
        raise AuditTableError(
            f"{src}: line {pos + 2} declares {table[ROWS_COLUMN].iloc[pos]} row(s) but the file "
            f"holds {len(table)}: the file is truncated or damaged; {hint}"
        )
    return table.drop(columns=ROWS_COLUMN)


def concat_tables(paths: list[str | Path]) -> pd.DataFrame:
    """Concatenate per-setting audit CSVs (each checked whole), identity columns first."""
    return concat_frames([read_audit_csv(p) for p in paths])


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
