"""Tidy audit tables: writing and checking per-setting audit CSVs, concatenating, summarising.

The verdicts of their rows and the ``verdict:`` table are :mod:`dpaudit.verdict`'s.

Every per-setting audit CSV the pipeline writes (:func:`write_audit_csv`) ends with
a trailer line ``# dpaudit audit table: N data rows``, so that a file damaged after it was
written (cut to its header, cut mid-row or at a row boundary, emptied) is told apart from a
complete one, including a complete one with no rows (an estimator that skips a setting by
design, e.g. LiDP's ``below_order: skip`` at K = 1): :func:`read_audit_csv` raises an
:class:`AuditTableError` naming the file and the line instead of merging a partial table.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import pandas as pd

from dpaudit.audit import ID_COLUMNS, NO_CANARY_NOTE, AuditTableError
from dpaudit.io import atomic_path
from dpaudit.verdict import check_certifiable, not_fair_coin

#: The last line of a per-setting audit CSV: its number of data rows.
TRAILER = "# dpaudit audit table: {rows} data rows"
_TRAILER = re.compile(r"# dpaudit audit table: (\d+) data rows")

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


def write_audit_csv(path: str | Path, table: pd.DataFrame) -> None:
    """Write a per-setting audit table as CSV plus the :data:`TRAILER` line, atomically.

    A table without rows (an estimator that skips the setting by design) keeps the identity
    columns as its header.
    """
    if table.empty and not len(table.columns):
        table = pd.DataFrame(columns=ID_COLUMNS)
    with atomic_path(path) as tmp:
        with open(tmp, "w", newline="") as fh:
            table.to_csv(fh, index=False)
            fh.write(TRAILER.format(rows=len(table)) + "\n")


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
    if "note" in table.columns:
        # the rows of a no-canary control and of membership that is not a fair coin carry no
        # bound by design (dpaudit.audit), not by damage
        no_bound = (table["note"] == NO_CANARY_NOTE) | not_fair_coin(table)
        missing.loc[no_bound & ~table["valid"].astype(bool), "epsilon"] = False
    if missing.any().any():
        pos = int(missing.any(axis=1).to_numpy().argmax())
        cols = [c for c in REQUIRED_COLUMNS if missing[c].iloc[pos]]
        raise AuditTableError(
            f"{source}: line {pos + 2} (data row {pos + 1}) has no value in {cols}; "
            "the file is truncated or damaged: delete it and rerun its audit job"
        )


def read_audit_csv(path: str | Path) -> pd.DataFrame:
    """Read one per-setting audit CSV written by :func:`write_audit_csv` and check it whole.

    Raises :class:`AuditTableError` naming the file (and the line) if it is empty, does not end
    with a newline, lacks its trailer line, holds another number of rows than its trailer
    declares, or has a missing value in a required column.
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
        text = raw.decode()
    except UnicodeDecodeError as exc:
        raise AuditTableError(f"{src}: not a text file ({exc.reason}); {hint}") from exc
    body, _, last = text[:-1].rpartition("\n")
    match = _TRAILER.fullmatch(last.strip())
    if match is None:
        raise AuditTableError(
            f"{src}: the audit table does not end with its row-count line "
            f"({TRAILER.format(rows='N')!r}): it is truncated, or was not written by this "
            f"version's audit rule; {hint}"
        )
    declared = int(match.group(1))
    try:
        table = pd.read_csv(io.StringIO(body + "\n"), keep_default_na=True)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, csv.Error) as exc:
        raise AuditTableError(f"{src}: not a readable CSV audit table ({exc}); {hint}") from exc
    if len(table) != declared:
        raise AuditTableError(
            f"{src}: the row-count line declares {declared} data row(s) but the file holds "
            f"{len(table)}: the file is damaged; {hint}"
        )
    if declared:
        check_rows(table, src)
        check_certifiable(table, src)
    return table


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


def order_by_estimator(table: pd.DataFrame, estimators: list[str]) -> pd.DataFrame:
    """``table``'s rows estimator by estimator in the order of ``estimators``, keeping the
    order of the rows within an estimator (stable): the per-setting audit files, concatenated
    setting by setting, give each estimator's rows setting by setting, then seed by seed.
    An estimator not in ``estimators`` is an error naming it."""
    if table.empty:
        return table
    rank = {name: i for i, name in enumerate(estimators)}
    unknown = sorted(set(table["estimator"]) - rank.keys())
    if unknown:
        raise ValueError(f"audit rows of estimator(s) {unknown} not in {estimators}")
    order = table["estimator"].map(rank).to_numpy()
    return table.iloc[order.argsort(kind="stable")].reset_index(drop=True)


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
