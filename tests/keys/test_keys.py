"""dpaudit.keys: the one owner of the score-file metadata keys and audit-table column names.

The strings are part of the file and table formats (read with NumPy and pandas alone), so these
tests write them as literals on purpose: a constant renamed by mistake fails here, not in a
reader's script (issue 38, Done when: ``grep -rn '"claimed_epsilon"' dpaudit`` finds one
definition)."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import numpy as np

from dpaudit import keys, scores
from dpaudit.audit import run_estimator

REPO = Path(__file__).resolve().parents[2]


def test_the_constants_are_the_format_strings():
    assert keys.CLAIMED_EPSILON == "claimed_epsilon"
    assert keys.FORMAT_VERSION_KEY == "format_version"
    assert keys.SCORE_DTYPE == "score_dtype"
    assert keys.INCLUSION_KEY == "inclusion_probability"
    assert keys.MEMBERSHIP_PVALUE == "membership_pvalue"
    assert keys.EPSILON_LOWER_BOUND == "epsilon_lower_bound"
    assert keys.CONFORMANCE_COLUMNS == (
        "conformance_departs",
        "conformance_unseen",
        "conformance_alpha",
        "conformance_first_step",
        "measured_epsilon",
        "measured_epsilon_lower",
    )
    assert keys.ID_COLUMNS == [
        "experiment",
        "setting",
        "seed",
        "design",
        "threat_model",
        "claimed_epsilon",
        "delta",
        "accountant",
        "estimator",
        "method",
        "params",
    ]


def test_the_score_file_contract_uses_the_constants():
    assert list(scores.REQUIRED_META) == [
        "format_version",
        "experiment",
        "setting",
        "seed",
        "design",
        "threat_model",
        "claimed_epsilon",
        "delta",
        "accountant",
    ]
    assert scores.STORAGE_META == ("format_version", "score_dtype")
    assert scores.INCLUSION_KEY == "inclusion_probability"  # re-exported where it is documented


def test_a_written_score_file_and_its_audit_rows_carry_the_names(tmp_path):
    """Read back with NumPy and json alone: the writer's keys are the constants' strings, and the
    audit rows of the file start with :data:`dpaudit.keys.ID_COLUMNS`."""
    rng = np.random.default_rng(0)
    sf = scores.ScoreFile(
        score=rng.normal(size=(1, 40)),
        membership=rng.integers(0, 2, size=(1, 40)),
        canary_id=np.arange(40)[None],
        meta={
            "experiment": "e",
            "setting": "eps1",
            "seed": 0,
            "design": "one_run",
            "threat_model": "black_box_loss",
            "claimed_epsilon": 1.0,
            "delta": 1e-5,
            "accountant": "rdp",
            "score_dtype": "float32",
        },
    )
    path = scores.write(tmp_path / "s.npz", sf)
    with np.load(path) as z:
        meta = json.loads(z["meta"].item())
    assert meta["format_version"] == scores.FORMAT_VERSION
    assert {keys.FORMAT_VERSION_KEY, keys.CLAIMED_EPSILON, keys.SCORE_DTYPE} <= set(meta)
    rows = run_estimator(scores.read(path), "one_run", {"method": "one_run"})
    assert list(rows.columns[: len(keys.ID_COLUMNS)]) == keys.ID_COLUMNS
    assert keys.MEMBERSHIP_PVALUE in rows.columns
    assert (rows[keys.CLAIMED_EPSILON] == 1.0).all()


def test_the_documented_audit_table_columns_are_the_id_columns():
    text = " ".join((REPO / "docs" / "architecture.md").read_text().split())
    documented = re.search(r"identity columns \(`([^`]*)`\)", text)
    assert documented, "docs/architecture.md no longer lists the audit table's identity columns"
    assert [c.strip() for c in documented.group(1).split(",")] == keys.ID_COLUMNS


def test_keys_imports_nothing_so_every_layer_may_import_it():
    tree = ast.parse((REPO / "dpaudit" / "keys.py").read_text())
    imports = [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)]
    assert [getattr(n, "module", None) for n in imports] == ["__future__"]
