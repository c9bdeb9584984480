"""``--delta`` of the bounds computed from counts lies in [0, 1), as the multi-run bound and the
estimators require (issue 30, point 9: ``one-run-bound --delta 1`` printed a bound)."""

from __future__ import annotations

import pytest

from dpaudit.cli import main

COUNTS = {
    "one-run-bound": ["--m", "100", "--r", "10", "--correct", "9"],
    "fdp-one-run-bound": ["--n", "100", "--r", "10", "--wrong", "1", "--family", "gdp"],
    "multi-run-bound": [
        *("--false-pos", "1", "--nonmembers", "100", "--false-neg", "1", "--members", "100"),
    ],
}


@pytest.mark.parametrize("command", sorted(COUNTS))
@pytest.mark.parametrize("delta", ["1", "1.5", "-0.1", "nan", "abc"])
def test_delta_outside_zero_one_is_rejected(command, delta, capsys):
    with pytest.raises(SystemExit) as exit_:
        main([command, *COUNTS[command], "--delta", delta])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "argument --delta" in err and "[0, 1)" in err and delta in err


@pytest.mark.parametrize("command", sorted(COUNTS))
def test_delta_zero_and_small_are_accepted(command, capsys):
    for delta in ("0", "1e-5"):
        assert main([command, *COUNTS[command], "--delta", delta]) == 0
    assert "epsilon >=" in capsys.readouterr().out
