"""dpaudit.verdict: the one owner of the verdict rules, their words and the union bound, read by
the audit tables, the own-training audit and the verdict figure (issue 38, "one owner for
verdicts")."""

from __future__ import annotations

import ast
from pathlib import Path

import pandas as pd
import pytest

from dpaudit import verdict
from dpaudit.verdict import (
    FLAGGED,
    NO_CLAIM,
    NOT_FLAGGED_LEGEND,
    OUTSIDE_VERDICT,
    VERDICT_ESTIMATORS,
    familywise_confidence,
    own_training_verdict,
    split_confidence,
    verdict_specs,
)

PACKAGE = Path(verdict.__file__).resolve().parent
#: The words a verdict starts with, before its reason; a string literal that starts with one
#: writes a verdict (a column named ``flagged`` does not).
VERDICT_WORDS = ("flagged:", "not flagged:", "no verdict:", "not used by the verdict:")


def _verdict_literals(path: Path) -> list[str]:
    """The string literals of ``path`` (docstrings aside) that start with a verdict's words."""
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
        and node.value.lower().startswith(VERDICT_WORDS)
    ]


def test_issue38_the_verdict_words_are_written_in_one_module():
    """issue 38, "one owner for verdicts": no module of the library but dpaudit.verdict writes
    a verdict's words (dpaudit.audit writes the note of membership that is not a fair coin, which
    becomes the verdict of its rows: it runs before any verdict and is read here)."""
    writers = {
        str(path.relative_to(PACKAGE)): found
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "verdict.py" or path.parent != PACKAGE
        if (found := _verdict_literals(path))
    }
    assert writers == {"audit.py": [verdict.NOT_FAIR_COIN]}


def test_split_confidence_is_the_inverse_of_the_familywise_confidence():
    for confidence, parts in ((0.95, 2), (0.9, 3), (0.99, 1)):
        each = split_confidence(confidence, parts)
        assert familywise_confidence([each] * parts) == pytest.approx(confidence)
    specs = verdict_specs(0.95)
    assert set(specs) == set(VERDICT_ESTIMATORS)
    assert familywise_confidence([s["confidence"] for s in specs.values()]) == pytest.approx(0.95)


@pytest.mark.parametrize("confidence", [0.0, 1.0, -0.5, 1.5])
def test_split_confidence_rejects_a_confidence_outside_0_1(confidence):
    with pytest.raises(ValueError, match="confidence must lie in"):
        split_confidence(confidence, 2)


def test_the_figure_legend_says_the_table_verdict_in_short():
    assert NOT_FLAGGED_LEGEND == "not flagged: no evidence at these runs"
    assert verdict.FLAGGED_LEGEND.startswith(FLAGGED.partition(" ")[0])


def _rows(claim: float | None) -> pd.DataFrame:
    base = {
        "experiment": "e",
        "setting": "s",
        "seed": 0,
        "design": "one_run",
        "claimed_epsilon": claim,
        "delta": 1e-5,
        "valid": True,
        "confidence": 0.975,
        "evidence": 1000,
    }
    return pd.DataFrame(
        [
            {**base, "estimator": "one_run", "epsilon": 1.5},
            {**base, "estimator": "fdp_abstention", "epsilon": 0.5},
            {**base, "estimator": "extra", "epsilon": 3.0},  # above, but not a verdict estimator
        ]
    )


def test_own_training_verdict_flags_only_by_its_estimators():
    meta = {"experiment": "e", "setting": "s", "claimed_epsilon": 1.0, "delta": 1e-5}
    table, row = own_training_verdict(
        _rows(1.0), ["one_run", "fdp_abstention"], {**meta, "accountant": "prv"}, 0.95
    )
    assert table["in_verdict"].tolist() == [True, True, False]
    assert table["verdict"].tolist()[0] == FLAGGED and table["verdict"].iloc[2] == OUTSIDE_VERDICT
    assert table["exceeds_claim"].tolist() == [1, 0, 0]
    v = row.iloc[0]
    assert (v["estimator"], v["epsilon_lower_bound"], v["verdict"]) == ("one_run", 1.5, FLAGGED)
    assert list(row.columns[3:5]) == ["delta", "accountant"]


def test_own_training_verdict_without_a_claim_says_so():
    meta = {"experiment": "e", "setting": "s", "claimed_epsilon": None, "delta": 1e-5}
    _, row = own_training_verdict(
        _rows(None), ["one_run", "fdp_abstention"], {**meta, "accountant": "user"}, 0.95
    )
    v = row.iloc[0]
    assert (v["verdict"], v["flagged"], v["joint_confidence"]) == (NO_CLAIM, 0, 0.95)
    assert v["epsilon_lower_bound"] == 1.5 and v["claimed_epsilon"] == float("inf")
