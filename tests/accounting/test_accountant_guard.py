"""Resource guard of the PRV and PLD accountants (issue 30, point 8).

``dpaudit accountant --noise-multiplier 0.1 --sample-rate 1 --steps 1000`` grew to 22 GB: PRV
discretised on about 1.1e9 points and PLD on tens of millions. Both grids are now computed
first and a grid above the limit fails at once with its size, its memory and the way out.
Everything that could allocate runs in a subprocess under an address-space limit (RLIMIT_AS,
set after torch is loaded) of 3 GiB more than it already maps, so a broken guard fails the test
with a MemoryError instead of taking the machine's memory.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

PRELUDE = textwrap.dedent(
    """
    import resource, warnings
    warnings.simplefilter("ignore")
    import opacus  # torch maps much address space: load it before the limit
    import dp_accounting.pld.privacy_loss_distribution
    from dpaudit.accounting import dpsgd
    with open("/proc/self/status") as fh:
        vm = next(int(l.split()[1]) * 1024 for l in fh if l.startswith("VmSize"))
    resource.setrlimit(resource.RLIMIT_AS, (vm + (3 << 30), vm + (3 << 30)))
    """
)


def _run(code: str, *args: str, timeout: float = 120) -> tuple[subprocess.CompletedProcess, float]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    env.pop("DPAUDIT_ACCOUNTANT_MAX_GRID_POINTS", None)
    start = time.monotonic()
    out = subprocess.run(
        [sys.executable, *args] if not code else [sys.executable, "-c", PRELUDE + code, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=REPO,
    )
    return out, time.monotonic() - start


def _assert_clear(message: str, accountant: str) -> None:
    assert f"{accountant} accountant (noise multiplier 0.01, sample rate 1, 1000 steps)" in message
    assert "points (about" in message and "GiB)" in message
    assert "above the limit of 33,554,432 points" in message
    assert "--max-grid-points" in message and "DPAUDIT_ACCOUNTANT_MAX_GRID_POINTS" in message
    assert "train.accountant" in message


LIBRARY = textwrap.dedent(
    """
    import json, os
    out = {}
    for name, call in [
        ("pld", lambda: dpsgd.epsilon_pld(0.01, 1.0, 1000, 1e-5)),
        ("prv", lambda: dpsgd.epsilon_prv(0.01, 1.0, 1000, 1e-5)),
        ("poisson_epsilon", lambda: dpsgd.poisson_epsilon(0.01, 1.0, 1000, 1e-5, "prv")),
        ("calibrate", lambda: dpsgd.calibrate_noise(1e6, 1e-5, 1.0, 1000, "prv")),
    ]:
        if name == "calibrate":  # a low limit: the bisection's grids below it stay small
            os.environ[dpsgd.MAX_GRID_ENV] = "1000000"
        try:
            call()
            out[name] = "no error"
        except dpsgd.GridTooLargeError as exc:
            out[name] = str(exc)
    os.environ.pop(dpsgd.MAX_GRID_ENV)
    table = dpsgd.accountant_table(0.01, 1.0, 1000, 1e-5)
    out["table"] = {r.accountant: [r.epsilon == r.epsilon, r.error] for r in table.itertuples()}
    print(json.dumps(out))
    """
)


@pytest.mark.slow
def test_library_functions_fail_fast_with_the_grid_size_and_the_fix():
    out, seconds = _run(LIBRARY)
    assert out.returncode == 0, out.stderr[-3000:]
    res = json.loads(out.stdout.strip().splitlines()[-1])
    _assert_clear(res["pld"], "pld")
    assert "one step's privacy-loss grid would have 119,490,952 points" in res["pld"]
    _assert_clear(res["prv"], "prv")
    _assert_clear(res["poisson_epsilon"], "prv")
    # the calibration's bisection reaches a tiny noise level: the guard, not a memory error
    # nor Opacus' "privacy budget is too low" reworded
    assert "prv accountant (noise multiplier" in res["calibrate"]
    assert "above the limit of 1,000,000 points" in res["calibrate"]
    # the table degrades: pld and prv report why, rdp still answers
    table = res["table"]
    assert table["rdp"] == [True, ""]
    assert not table["pld"][0] and "above the limit" in table["pld"][1]
    assert not table["prv"][0] and "above the limit" in table["prv"][1]
    assert seconds < 60


@pytest.mark.slow
def test_cli_reports_the_guard_and_still_answers_with_rdp():
    out, _ = _run(
        "",
        "-m",
        "dpaudit.cli",
        "accountant",
        "--noise-multiplier",
        "0.01",
        "--sample-rate",
        "1",
        "--steps",
        "1000",
        "--delta",
        "1e-5",
        "--json",
    )
    assert out.returncode == 0, out.stderr[-3000:]
    res = json.loads(out.stdout)
    assert res["epsilon"] is None and res["epsilon_rdp"] > 1e5
    _assert_clear(res["errors"]["pld"], "pld")
    _assert_clear(res["errors"]["prv"], "prv")


def test_limit_is_an_option_and_an_environment_variable(monkeypatch):
    from dpaudit.accounting import dpsgd

    # an ordinary setting is refused under a tiny limit (checked before any grid is built) ...
    with pytest.raises(dpsgd.GridTooLargeError, match="above the limit of 1,000 points"):
        dpsgd.epsilon_pld(1.0, 0.01, 100, 1e-5, max_grid_points=1000)
    monkeypatch.setenv(dpsgd.MAX_GRID_ENV, "1000")
    with pytest.raises(dpsgd.GridTooLargeError, match="above the limit of 1,000 points"):
        dpsgd.epsilon_prv(1.0, 0.01, 100, 1e-5)
    monkeypatch.setenv(dpsgd.MAX_GRID_ENV, "lots")
    with pytest.raises(ValueError, match="DPAUDIT_ACCOUNTANT_MAX_GRID_POINTS must be an integer"):
        dpsgd.epsilon_prv(1.0, 0.01, 100, 1e-5)
    monkeypatch.delenv(dpsgd.MAX_GRID_ENV)
    with pytest.raises(ValueError, match="max_grid_points must be an integer >= 1"):
        dpsgd.accountant_table(1.0, 0.01, 100, 1e-5, max_grid_points=0)
    # ... and answers as before under the default limit
    assert dpsgd.epsilon_pld(1.0, 0.01, 100, 1e-5) == pytest.approx(
        dpsgd.epsilon_prv(1.0, 0.01, 100, 1e-5), abs=0.02
    )


def test_pld_grid_estimate_matches_dp_accounting():
    """The size computed without building the grid is the size dp_accounting builds."""
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    from dpaudit.accounting import dpsgd

    for sigma, q in [(1.0, 0.01), (2.0, 1.0), (0.8, 0.05)]:
        pld = pld_lib.from_gaussian_mechanism(
            standard_deviation=sigma, value_discretization_interval=1e-4, sampling_prob=q
        )
        built = max(len(pld._pmf_remove._probs), len(pld._pmf_add._probs))
        assert abs(dpsgd.pld_grid_points(sigma, q) - built) <= 2


@pytest.mark.slow
def test_the_issues_command_fails_fast_not_with_22_gb():
    """The exact command of the issue (sigma 0.1, q 1, 1000 steps): PLD's one-step grid is
    built (3 million points, seconds), its 1000-fold FFT grid (53 million) refused."""
    out, seconds = _run(
        textwrap.dedent(
            """
            import json
            t = dpsgd.accountant_table(0.1, 1.0, 1000, 1e-5)
            print(json.dumps({r.accountant: r.error for r in t.itertuples()}))
            """
        )
    )
    assert out.returncode == 0, out.stderr[-3000:]
    errors = json.loads(out.stdout.strip().splitlines()[-1])
    assert "FFT grid would have 53,102,704 points" in errors["pld"]
    assert "1,128,670,868 points" in errors["prv"]
    assert errors["rdp"] == ""
    assert seconds < 120
