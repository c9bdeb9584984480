"""The audit table of score files (:mod:`dpaudit.audit`): what its errors name."""

from __future__ import annotations

import pytest

from dpaudit import scores
from dpaudit.audit import audit_setting
from dpaudit.cli import main
from dpaudit.estimators.lidp.xbern import XBernInputError
from dpaudit.mechanisms import lidp_gaussian
from dpaudit.mechanisms.one_run_ideal import randomized_response_score_file


def test_issue36_item8_an_estimators_bad_input_names_the_file_and_the_block(tmp_path, capsys):
    """Issue 36, item 8: "the candidate grid is empty" and "cannot split 1 trials" named
    neither the score file nor the estimator block; they name both (the pipeline's audit job
    and ``dpaudit audit``), keeping the error's type, and the grid says the way out."""
    rr = scores.write(tmp_path / "rr.npz", randomized_response_score_file(200, 2.0, 1e-6, seed=0))
    big = {"method": "one_run", "k_values": [5000]}
    with pytest.raises(ValueError) as err:
        audit_setting([[str(rr)]], {"big": big})
    assert str(err.value) == (
        f"{rr}: estimator 'big': the candidate grid is empty: no k of k_values [5000] lies in "
        "1..200 (the file's canaries); give k_values of at most 200"
    )
    one = lidp_gaussian.score_file(n=1, K=2, d=100, epsilon=2.0, delta=1e-5, seed=0)
    path = scores.write(tmp_path / "one_trial.npz", one)
    held = {"method": "lidp", "threshold": "heldout"}
    with pytest.raises(XBernInputError, match=rf"^{path}: estimator 'held': cannot split 1 tri"):
        audit_setting([[str(path)]], {"held": held})
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("estimators:\n  held: {method: lidp, threshold: heldout}\n")
    assert main(["audit", str(path), "--config", str(cfg)]) == 2
    assert f"{path}: estimator 'held': cannot split 1 trials" in capsys.readouterr().err
