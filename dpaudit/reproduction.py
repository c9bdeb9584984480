"""Compare numbers printed in the papers with ours (results/reproduction.{md,csv}).

Each check (from an experiment's ``reproduce`` block) selects rows of the experiment's table by
column filters, combines one column with a statistic, and records the paper's value, ours, the
difference, whether they agree within the tolerance, and a note.

A check may state a paper's *qualitative* claim instead of a printed number (``claim:``; the
CPU-scale real-data configs, where the paper's numbers cannot be expected): the bound rises or
falls along a column, is flat, is not monotone, or is at least / at most another selection of
rows or a number. The row records the claim, what we measured and whether it holds; a claim
that does not hold is reported, never hidden.
"""

from __future__ import annotations

import math
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


#: The claim tests and what each states, for the table's "claim" column.
CLAIM_TESTS = {
    "increasing": "rises with {x}",
    "decreasing": "falls as {x} grows",
    "flat": "does not depend on {x}",
    "not_monotone": "is not monotone in {x}",
    "at_least": "is at least {other}",
    "at_most": "is at most {other}",
}


def _claim_holds(test: str, ys: np.ndarray, tol: float, concave: bool) -> bool:
    steps = np.diff(ys)
    if test == "increasing":
        holds = bool(np.all(steps >= -tol) and ys[-1] - ys[0] > tol)
        # diminishing returns: each increment at most the previous one (within tolerance)
        return holds and (not concave or bool(np.all(np.diff(steps) <= tol)))
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
        holds = len(ys) >= 2 and _claim_holds(test, ys, tol, bool(claim.get("concave")))
        measured = ", ".join(f"{x}={_fmt_x(k)}: {v:.3g}" for k, v in series.items()) or "no rows"
        statement = CLAIM_TESTS[test].format(x=x)
        if test == "increasing" and claim.get("concave"):
            statement += ", with diminishing returns"
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
    return {
        "experiment": experiment,
        "quantity": spec["quantity"],
        "paper": paper,
        "ours": ours,
        "difference": ours - paper,
        "tolerance": tol,
        "agrees": bool(abs(ours - paper) <= tol),
        "rows": len(rows),
        "note": spec.get("note", ""),
        "source": spec.get("source", "printed"),
    }


def check_all(checks: dict[str, dict[str, Any]]) -> pd.DataFrame:
    """``checks``: experiment -> {"table": csv path, "checks": [spec, ...]}."""
    out = []
    for experiment, block in checks.items():
        table = pd.read_csv(block["table"])
        out += [check(table, spec, experiment) for spec in block["checks"]]
    return pd.DataFrame(out)


def to_markdown(table: pd.DataFrame) -> str:
    lines = [
        "# Reproduction of the papers' printed numbers",
        "",
        "Generated by the `reproduction` rule. A disagreement is a finding, not a failure: the",
        "note says why (ambiguity in the paper, a different convention, or an error we found).",
        "A value marked * is not printed in the paper: it is our own independent computation",
        "(a regression check), not a reproduction.",
        "",
        "| experiment | quantity | paper | ours | difference | agrees | note |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    claims = table[table["source"] == "claim"] if "source" in table else table.iloc[:0]
    for r in table.drop(claims.index).itertuples():
        mark = "*" if getattr(r, "source", "printed") == "ours" else ""
        lines.append(
            f"| {r.experiment} | {r.quantity} | {r.paper:.4g}{mark} | {r.ours:.4g} | "
            f"{r.difference:+.3g} | {'yes' if r.agrees else 'NO'} | {r.note} |"
        )
    if len(claims):
        lines += [
            "",
            "## The papers' qualitative claims (reduced-scale configs)",
            "",
            "| experiment | quantity | claim | measured | holds | note |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for r in claims.itertuples():
            lines.append(
                f"| {r.experiment} | {r.quantity} | {r.claim} | {r.measured} | "
                f"{'yes' if r.agrees else 'NO'} | {r.note} |"
            )
    return "\n".join(lines) + "\n"
