"""results/reproduction.{md,csv}: the paper's value, ours, the difference, and whether the
reference value is printed in the paper or our own computation (dpaudit/reproduction.py)."""

from __future__ import annotations

import pandas as pd
import pytest

from dpaudit import reproduction


@pytest.fixture
def table() -> pd.DataFrame:
    return pd.DataFrame(
        {"setting": ["a", "a", "b"], "epsilon": [1.0, 2.0, 5.0], "sigma": [0.9, 0.9, 0.7]}
    )


def test_check_combines_the_selected_rows(table):
    row = reproduction.check(
        table, {"quantity": "q", "paper": 1.4, "where": {"setting": "a"}}, "exp"
    )
    assert row["ours"] == pytest.approx(1.5)
    assert row["difference"] == pytest.approx(0.1)
    assert row["agrees"] is False  # default tolerance 0.01
    assert row["rows"] == 2
    assert row["source"] == "printed"


def test_values_not_printed_in_the_paper_are_marked(table):
    printed = reproduction.check(
        table, {"quantity": "printed", "paper": 5.0, "where": {"setting": "b"}}, "exp"
    )
    ours = reproduction.check(
        table,
        {"quantity": "computed", "paper": 0.7, "column": "sigma", "where": {"setting": "b"},
         "source": "ours"},
        "exp",
    )
    md = reproduction.to_markdown(pd.DataFrame([printed, ours]))
    lines = {line.split(" | ")[1]: line for line in md.splitlines() if line.startswith("| exp")}
    assert "| 5 |" in lines["printed"] and "5*" not in lines["printed"]
    assert "| 0.7* |" in lines["computed"]
    assert "not printed in the paper" in md


def test_unknown_column_names_the_columns(table):
    with pytest.raises(KeyError, match="columns"):
        reproduction.check(table, {"quantity": "q", "paper": 1, "where": {"nope": 1}}, "exp")
