"""The dpaudit command line."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from dpaudit.cli import main


def test_one_run_bound_json(capsys):
    code = main(
        [
            "one-run-bound",
            "--m",
            "100000",
            "--r",
            "1510",
            "--correct",
            "1439",
            "--delta",
            "1e-5",
            "--json",
        ]
    )
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["epsilon"] == pytest.approx(2.6759, abs=1e-3)  # Steinke et al. Fig. 10


def test_one_run_bound_text_and_errors(capsys):
    assert (
        main(["one-run-bound", "--m", "100", "--r", "100", "--correct", "100", "--delta", "0"]) == 0
    )
    assert "epsilon >= 3.49" in capsys.readouterr().out
    assert main(["one-run-bound", "--m", "10", "--r", "100", "--correct", "5", "--delta", "0"]) == 2
    assert "r <= m" in capsys.readouterr().err


def test_console_script_module_entry():
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "dpaudit.cli",
            "one-run-bound",
            "--m",
            "1000",
            "--r",
            "1000",
            "--correct",
            "1000",
            "--delta",
            "1e-5",
            "--json",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(out.stdout)["epsilon"] == pytest.approx(5.78, abs=0.01)


def test_audit_command_on_score_files(tmp_path, capsys):
    from dpaudit import scores
    from dpaudit.mechanisms.one_run_ideal import randomized_response_score_file

    path = tmp_path / "rr.npz"
    scores.write(path, randomized_response_score_file(2000, 3.0, 1e-6, seed=0))
    assert main(["audit", str(path), "--estimator", "one_run", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    valid = [r for r in out["rows"] if r["valid"]]
    assert out["epsilon"] == max(r["epsilon"] for r in valid)
    assert 1.0 < out["epsilon"] < 3.0  # eps=3 randomized response: a bound below the truth
    assert main(["audit", str(path)]) == 0
    assert "bonferroni" in capsys.readouterr().out
    assert main(["audit", str(path), "--estimator", "nope"]) == 2
    assert "allowed" in capsys.readouterr().err
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"")
    assert main(["audit", str(bad)]) == 2
    assert "bad.npz: the file is empty" in capsys.readouterr().err
