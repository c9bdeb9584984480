"""A no-canary control's audit rows carry its accuracy but no bound (dpaudit.audit)."""

import math

import numpy as np

from dpaudit.audit import NO_CANARY_NOTE, run_estimator
from dpaudit.scores import ScoreFile


def _file(inserted: str) -> ScoreFile:
    rng = np.random.default_rng(0)
    m = 400
    member = np.zeros((1, m), dtype=np.int8)  # every canary OUT, as canaries.insert: none writes
    meta = {
        "experiment": "t",
        "setting": "s",
        "seed": 0,
        "design": "one_run",
        "threat_model": "white_box_dot",
        "claimed_epsilon": 2.0,
        "delta": 1e-5,
        "accountant": "rdp",
        "canaries_inserted": inserted,
        "test_accuracy": 0.8,
    }
    return ScoreFile(rng.normal(size=(1, m)), member, np.arange(m)[None], meta)


def test_issue36_item1_all_out_file_read_as_coins_gives_no_bound():
    """Issue 36, item 1: read as fair coins, an all-OUT file would make every "out" guess right
    (a bound above 1 on b656a52); 0 of 400 IN is no fair coin, so no row carries a bound."""
    frame = run_estimator(_file("coins"), "one_run", {"method": "one_run"})
    assert frame["epsilon"].isna().all() and not frame["valid"].any()
    assert (frame["note"] == "no verdict: membership is not a fair coin (0 of 400 IN)").all()


def test_no_canary_control_rows_have_no_bound_but_keep_accuracy():
    for method in ("one_run", "fdp_one_run"):
        frame = run_estimator(_file("none"), method, {"method": method})
        assert len(frame) >= 1
        assert all(math.isnan(e) for e in frame["epsilon"])
        assert not frame["valid"].any()
        assert (frame["note"] == NO_CANARY_NOTE).all()
        assert (frame["test_accuracy"] == 0.8).all()
        assert "selection" in frame.columns


def test_no_canary_control_rows_pass_the_audit_table_check(tmp_path):
    """The control's rows (epsilon NaN by design) are read back and concatenated; a NaN
    epsilon on a row without the control's note is still reported as damage."""
    import pytest

    from dpaudit.tables import AuditTableError, concat_tables, write_audit_csv

    frame = run_estimator(_file("none"), "one_run", {"method": "one_run"})
    frame["params"] = "{}"
    path = tmp_path / "control.csv"
    write_audit_csv(path, frame)
    back = concat_tables([path])
    assert back["epsilon"].isna().all() and (back["test_accuracy"] == 0.8).all()
    frame["note"] = ""
    write_audit_csv(path, frame)
    with pytest.raises(AuditTableError, match="has no value in .'epsilon'."):
        concat_tables([path])
