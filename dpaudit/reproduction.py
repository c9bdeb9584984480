"""Compare numbers printed in the papers with ours (results/reproduction.{md,csv}).

Each check (from an experiment's ``reproduce`` block) selects rows of the experiment's table by
column filters, combines one column with a statistic, and records the paper's value, ours, the
difference, whether they agree within the tolerance, and a note.

A check may state a paper's *qualitative* claim instead of a printed number (``claim:``; the
CPU-scale real-data configs, where the paper's numbers cannot be expected): the bound rises or
falls along a column, is flat, is not monotone, or is at least / at most another selection of
rows, a number, or another column of the same rows row by row (``column_than``: e.g. every
audited bound at most its own row's claimed epsilon). The row records the claim, what we
measured and whether it holds; a claim that does not hold is reported, never hidden.

A printed value whose setting a reduced-scale config only stands in for (``source:
not_comparable``) is listed beside ours with the difference and never judged (``agrees``
empty).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd


def _matches(column: pd.Series, value: Any) -> pd.Series:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return column.astype(str) == str(value)
    numeric = pd.to_numeric(column, errors="coerce")
    return np.isclose(numeric, float(value), rtol=1e-9, atol=0.0)


def select(table: pd.DataFrame, where: dict[str, Any]) -> pd.DataFrame:
    mask = pd.Series(True, index=table.index)
    for key, value in where.items():
        if key not in table.columns:
            raise KeyError(f"column {key!r} not in the table; columns: {list(table.columns)}")
        mask &= _matches(table[key], value)
    return table[mask]


def _combine(rows: pd.DataFrame, column: str, stat: str) -> float:
    if column not in rows.columns:
        raise KeyError(f"column {column!r} not in the table; columns: {list(rows.columns)}")
    values = pd.to_numeric(rows[column], errors="coerce").dropna()
    return float(getattr(values, stat)()) if len(values) else math.nan


def _along(rows: pd.DataFrame, x: str, column: str, stat: str) -> pd.Series:
    """The statistic of ``column`` per value of ``x``, sorted by ``x``."""
    if x not in rows.columns:
        raise KeyError(f"column {x!r} not in the table; columns: {list(rows.columns)}")
    frame = rows.assign(_y=pd.to_numeric(rows[column], errors="coerce")).dropna(subset=["_y"])
    return frame.groupby(x)["_y"].agg(stat).sort_index()


def _claim_x(index: pd.Index, claim: dict[str, Any], experiment: str) -> np.ndarray | None:
    """The x values a ``concave`` claim measures slopes along: the values of ``x``, or their
    log10 with ``logx: true`` (diminishing returns per factor of x, e.g. per decade of m);
    None (slopes = increments) when x is not numeric and ``logx`` is not asked for."""
    xs = pd.to_numeric(pd.Series(index), errors="coerce").to_numpy(dtype=float)
    if claim.get("logx"):
        if not (np.all(np.isfinite(xs)) and np.all(xs > 0)):
            raise ValueError(
                f"{experiment}: reproduce claim logx: true needs positive numeric values of "
                f"x {claim.get('x')!r}, got {list(index)}"
            )
        return np.log10(xs)
    return xs if np.all(np.isfinite(xs)) else None


#: The claim tests and what each states, for the table's "claim" column.
CLAIM_TESTS = {
    "increasing": "rises with {x}",
    "decreasing": "falls as {x} grows",
    "flat": "does not depend on {x}",
    "not_monotone": "is not monotone in {x}",
    "at_least": "is at least {other}",
    "at_most": "is at most {other}",
}


def _claim_holds(
    test: str,
    ys: np.ndarray,
    tol: float,
    concave: bool,
    xs: np.ndarray | None = None,
    eventually: bool = False,
) -> bool:
    steps = np.diff(ys)
    if test == "increasing":
        holds = bool(np.all(steps >= -tol) and ys[-1] - ys[0] > tol)
        if not concave:
            return holds
        # diminishing returns: each slope (increment per unit of x) at most the previous one,
        # within tolerance; on an evenly spaced x (xs None) the increments themselves.
        # eventually: only the last slope below the largest earlier one, by more than tol
        slopes = steps if xs is None else steps / np.diff(xs)
        if eventually:
            return holds and len(slopes) >= 2 and bool(slopes[-1] < slopes[:-1].max() - tol)
        return holds and bool(np.all(np.diff(slopes) <= tol))
    if test == "decreasing":
        return bool(np.all(steps <= tol) and ys[0] - ys[-1] > tol)
    if test == "flat":
        return bool(ys.max() - ys.min() <= tol)
    if test == "not_monotone":
        return bool(np.any(steps > tol) and np.any(steps < -tol))
    raise ValueError(f"unknown claim test {test!r}; allowed: {sorted(CLAIM_TESTS)}")


def check_claim(table: pd.DataFrame, spec: dict[str, Any], experiment: str) -> dict[str, Any]:
    """A qualitative claim (``spec["claim"]``) on the rows ``spec["where"]`` selects."""
    claim = spec["claim"]
    test = claim["test"]
    if test not in CLAIM_TESTS:
        raise ValueError(
            f"{experiment}: unknown claim test {test!r}; allowed: {sorted(CLAIM_TESTS)}"
        )
    column, stat = spec.get("column", "epsilon"), spec.get("stat", "mean")
    tol = float(spec.get("tolerance", 0.01))
    rows = select(table, spec.get("where", {}))
    if test in ("at_least", "at_most") and "column_than" in claim:
        return _row_wise_claim(rows, spec, experiment, column, tol)
    if test in ("at_least", "at_most"):
        ours = _combine(rows, column, stat)
        if "value" in claim:
            other, other_name = float(claim["value"]), f"{claim['value']:g}"
        else:
            than = select(table, {**spec.get("where", {}), **claim["than"]})
            other = _combine(than, column, stat)
            other_name = ", ".join(f"{k} = {v}" for k, v in claim["than"].items())
        sign = 1.0 if test == "at_least" else -1.0
        holds = bool(sign * (ours - other) >= -tol) if not math.isnan(ours + other) else False
        measured = f"{ours:.4g} vs {other:.4g}"
        statement = CLAIM_TESTS[test].format(other=other_name)
        difference = ours - other
    else:
        x = claim["x"]
        series = _along(rows, x, column, stat)
        ys = series.to_numpy(dtype=float)
        xs = _claim_x(series.index, claim, experiment)
        holds = len(ys) >= 2 and _claim_holds(
            test, ys, tol, bool(claim.get("concave")), xs, bool(claim.get("eventually"))
        )
        measured = ", ".join(f"{x}={_fmt_x(k)}: {v:.3g}" for k, v in series.items()) or "no rows"
        statement = CLAIM_TESTS[test].format(x=x)
        if test == "increasing" and claim.get("concave"):
            statement += (
                ", with returns that eventually diminish"
                if claim.get("eventually")
                else ", with diminishing returns"
            )
            if claim.get("logx"):
                statement += f" per factor of {x}"
        ours = float(ys[-1]) if len(ys) else math.nan
        difference = float(ys[-1] - ys[0]) if len(ys) else math.nan
    return {
        "experiment": experiment,
        "quantity": spec["quantity"],
        "paper": math.nan,
        "ours": ours,
        "difference": difference,
        "tolerance": tol,
        "agrees": bool(holds),
        "rows": len(rows),
        "note": spec.get("note", ""),
        "source": "claim",
        "claim": f"{column} {statement}",
        "measured": measured,
    }


def _row_wise_claim(
    rows: pd.DataFrame, spec: dict[str, Any], experiment: str, column: str, tol: float
) -> dict[str, Any]:
    """``at_least`` / ``at_most`` another column of the *same* rows (``column_than``), row by
    row: the claim holds when every selected row satisfies it (within ``tol``), e.g. every
    audited lower bound at most the claimed epsilon of its own row. ``ours`` and the compared
    value are the ``stat`` of each column; ``difference`` is the worst row's."""
    claim = spec["claim"]
    test, other_column = claim["test"], claim["column_than"]
    stat = spec.get("stat", "mean")
    for name in (column, other_column):
        if name not in rows.columns:
            raise KeyError(f"column {name!r} not in the table; columns: {list(rows.columns)}")
    ours_v = pd.to_numeric(rows[column], errors="coerce").to_numpy(dtype=float)
    other_v = pd.to_numeric(rows[other_column], errors="coerce").to_numpy(dtype=float)
    sign = 1.0 if test == "at_least" else -1.0
    margin = sign * (ours_v - other_v)  # >= -tol where the row satisfies the claim; NaN fails
    fails = int(np.sum(~(margin >= -tol)))
    holds = len(rows) > 0 and fails == 0
    worst = float(np.nanmin(margin)) if np.isfinite(margin).any() else math.nan
    ours, other = _combine(rows, column, stat), _combine(rows, other_column, stat)
    return {
        "experiment": experiment,
        "quantity": spec["quantity"],
        "paper": math.nan,
        "ours": ours,
        "difference": sign * worst,
        "tolerance": tol,
        "agrees": bool(holds),
        "rows": len(rows),
        "note": spec.get("note", ""),
        "source": "claim",
        "claim": f"{column} {CLAIM_TESTS[test].format(other=other_column)} in every row",
        "measured": (
            f"{stat} {ours:.4g} vs {other:.4g}; closest row {sign * worst:+.3g}; "
            f"{fails} of {len(rows)} rows fail"
        ),
    }


def _fmt_x(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def check(table: pd.DataFrame, spec: dict[str, Any], experiment: str) -> dict[str, Any]:
    if "claim" in spec:
        return check_claim(table, spec, experiment)
    rows = select(table, spec.get("where", {}))
    column = spec.get("column", "epsilon")
    values = pd.to_numeric(rows[column], errors="coerce") if len(rows) else pd.Series([])
    ours = float(getattr(values, spec.get("stat", "mean"))()) if len(values) else math.nan
    paper = float(spec["paper"])
    tol = float(spec.get("tolerance", 0.01))
    source = spec.get("source", "printed")
    # a value printed for a setting this config only stands in for is shown, never judged
    agrees = None if source == "not_comparable" else bool(abs(ours - paper) <= tol)
    return {
        "experiment": experiment,
        "quantity": spec["quantity"],
        "paper": paper,
        "ours": ours,
        "difference": ours - paper,
        "tolerance": tol,
        "agrees": agrees,
        "rows": len(rows),
        "note": spec.get("note", ""),
        "source": source,
    }


def check_all(checks: dict[str, dict[str, Any]]) -> pd.DataFrame:
    """``checks``: experiment -> {"table": csv path, "checks": [spec, ...]}."""
    out = []
    for experiment, block in checks.items():
        table = pd.read_csv(block["table"])
        out += [check(table, spec, experiment) for spec in block["checks"]]
    return pd.DataFrame(out)


#: Text columns of a reproduction table, read back as written ("" where empty).
TEXT_COLUMNS = ("config", "experiment", "quantity", "claim", "measured", "note", "source")


def read_part(path: str | Path) -> pd.DataFrame:
    """One experiment's reproduction checks (``results/<experiment>/reproduction.csv``); a file
    that is not such a table is an error naming it."""
    try:
        table = pd.read_csv(path, dtype={c: str for c in TEXT_COLUMNS})
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: not a readable reproduction table ({exc})") from exc
    missing = [c for c in ("config", "experiment", "quantity", "agrees") if c not in table]
    if missing:
        raise ValueError(
            f"{path}: not a reproduction table: no column(s) {missing}; delete it and rerun the "
            "config that wrote it"
        )
    text = [c for c in TEXT_COLUMNS if c in table]
    table[text] = table[text].fillna("")
    table["agrees"] = table["agrees"].map(
        lambda v: v if isinstance(v, bool) else {"True": True, "False": False}.get(str(v))
    )
    return table


def merge_parts(own: list[str], found: list[str]) -> pd.DataFrame:
    """The reproduction table of every experiment's checks: ``own`` (this config's parts, in
    config order) first, then every other part ``found`` on disk (other configs' experiments,
    in path order), so that a user who runs two configs sees both. Each part holds the rows of
    one experiment; its ``config`` column names the config file(s) that ran it."""
    seen = {str(Path(p).resolve()) for p in own}
    others = [p for p in found if str(Path(p).resolve()) not in seen]
    frames = [read_part(p) for p in [*own, *others]]
    frames = [f for f in frames if len(f)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["config"])


INTRO = [
    "# Reproduction of the papers' printed numbers",
    "",
    "Generated by the `reproduction` rule. A disagreement is a finding, not a failure: the",
    "note says why (ambiguity in the paper, a different convention, or an error we found).",
    "A value marked * is not printed in the paper: it is our own independent computation",
    '(a regression check), not a reproduction. A row marked "not comparable" sets the',
    "paper's printed value beside ours from a reduced-scale stand-in (another data set, fewer",
    "games): shown for orientation, never judged.",
]


def to_markdown(table: pd.DataFrame) -> str:
    """The reproduction table as Markdown: with a ``config`` column, one section per config
    file (in order of first appearance: the config just run first), each with its printed
    values and its qualitative claims; without one, a single section."""
    lines = list(INTRO)
    if "config" not in table or not len(table):
        return "\n".join(lines + [""] + _section(table, "##")) + "\n"
    lines += [
        "",
        "One section per config file, from every experiment's `results/<experiment>/",
        "reproduction.csv` on disk: the config just run first, then those other runs wrote",
        "(rerun a config to refresh its section; delete an experiment's file to drop it).",
    ]
    for config in dict.fromkeys(table["config"]):
        rows = table[table["config"] == config]
        experiments = ", ".join(dict.fromkeys(rows["experiment"]))
        lines += ["", f"## `{config or 'unknown config'}`", "", f"Experiments: {experiments}."]
        lines += [""] + _section(rows, "###")
    return "\n".join(lines) + "\n"


def _section(table: pd.DataFrame, level: str) -> list[str]:
    """The printed-value table and the claims table of ``table``'s rows."""
    lines = [
        "| experiment | quantity | paper | ours | difference | agrees | note |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    claims = table[table["source"] == "claim"] if "source" in table else table.iloc[:0]
    for r in table.drop(claims.index).itertuples():
        source = getattr(r, "source", "printed")
        mark = "*" if source == "ours" else ""
        verdict = "not comparable" if source == "not_comparable" else "yes" if r.agrees else "NO"
        lines.append(
            f"| {r.experiment} | {r.quantity} | {r.paper:.4g}{mark} | {r.ours:.4g} | "
            f"{r.difference:+.3g} | {verdict} | {r.note} |"
        )
    if len(claims):
        lines += [
            "",
            f"{level} The papers' qualitative claims (reduced-scale configs)",
            "",
            "| experiment | quantity | claim | measured | holds | note |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for r in claims.itertuples():
            lines.append(
                f"| {r.experiment} | {r.quantity} | {r.claim} | {r.measured} | "
                f"{'yes' if r.agrees else 'NO'} | {r.note} |"
            )
    return lines
