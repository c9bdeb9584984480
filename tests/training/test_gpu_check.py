"""benchmarks/gpu_check.py (run first on a new GPU machine) on the CPU against the CPU: the
``--quick`` path passes, and a perturbed run is reported as a mismatch (the check can fail)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_check.py"


@pytest.fixture(scope="module")
def gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check", PATH)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["gpu_check"] = mod  # dataclasses look their module up while it executes
    try:
        spec.loader.exec_module(mod)
        yield mod
    finally:
        del sys.modules["gpu_check"]


@pytest.mark.slow
def test_quick_cpu_against_cpu_passes(gpu_check, capsys):
    """Every engine (stacked, func, Opacus), input and Dirac canaries, both samplers, with and
    without max_physical_batch: exit status 0 and every case reported ok."""
    quick = gpu_check.cases(quick=True)
    assert {c.engine for c in quick} == {"stacked", "func", "opacus"}
    assert {c.canary for c in quick} == {"random_input", "dirac"}
    assert {c.sampler for c in quick} == {"poisson", "shuffle"}
    assert {c.max_physical_batch for c in quick} == {None, 8}
    argv = ["--device", "cpu", "--reference-device", "cpu", "--quick", "--repeats", "1"]
    rc = gpu_check.main(argv)
    out = capsys.readouterr().out
    assert rc == 0, out
    assert f"{len(quick)} of {len(quick)} cases agree (cpu vs cpu)" in out
    assert "MISMATCH" not in out


@pytest.mark.slow
def test_repeated_runs_on_one_device_are_compared_with_each_other(gpu_check, monkeypatch):
    """--repeats 2 (the default): each side trains twice, and the runs agree on the CPU; a
    second run that drifts from the first is reported as not reproducible."""
    case = gpu_check.cases(quick=True)[1]  # stacked, Dirac canaries, max_physical_batch 8
    (outcome,) = gpu_check.run_check("cpu", "cpu", selected=[case], repeats=2)
    assert outcome.ok, outcome.problems
    real, calls = gpu_check.train_once, []

    def drifting(*args):
        run = real(*args)
        calls.append(1)
        if len(calls) == 2:  # the device side's second run
            run.params = run.params + 1e-2
        return run

    monkeypatch.setattr(gpu_check, "train_once", drifting)
    (outcome,) = gpu_check.run_check("cpu", "cpu", selected=[case], repeats=2)
    assert any("two runs on cpu differ by up to 0.01" in p for p in outcome.problems)
    with pytest.raises(ValueError, match="repeats must be >= 1"):
        gpu_check.run_check("cpu", "cpu", selected=[case], repeats=0)


@pytest.mark.slow
def test_a_perturbed_run_is_a_mismatch_naming_engine_setting_and_difference(gpu_check, capsys):
    """Another run seed on the checked side: every engine's case mismatches, and the report
    names the engine, the setting and the largest difference."""
    quick = gpu_check.cases(quick=True)
    picked = [next(c for c in quick if c.engine == e) for e in ("stacked", "func", "opacus")]
    outcomes = gpu_check.run_check("cpu", "cpu", seed=0, device_seed=1, selected=picked, repeats=1)
    assert [o.ok for o in outcomes] == [False, False, False]
    for o in outcomes:
        assert o.param_diff > 1e-3  # far over the tolerance, not a rounding difference
    text = gpu_check.report(outcomes, "cpu", "cpu")
    for c in picked:
        assert (
            f"MISMATCH: engine {c.engine}, setting {c.name}: final parameters differ by up" in text
        )
    assert "0 of 3 cases agree" in text


def test_order_flips_count_only_pairs_clear_of_the_tolerance(gpu_check):
    """Two scores closer than their tolerances may swap; a clear pair may not."""
    ref = np.array([0.0, 1.0, 1.0005])
    tol = np.full(3, 1e-3)
    assert gpu_check.order_flips(np.array([0.0, 1.0005, 1.0]), ref, tol) == 0
    assert gpu_check.order_flips(np.array([1.1, 1.0, 1.0005]), ref, tol) == 2


def test_a_small_difference_is_within_tolerance_and_a_nan_is_not(gpu_check):
    case = gpu_check.cases(quick=True)[0]
    p0 = torch.zeros(4)
    params = torch.tensor([1.0, -2.0, 0.5, 3.0])
    scores = np.array([[0.2, -0.1, 0.4]])

    def run(p, s):
        return gpu_check.Run(p0, p, s, {}, 1, 1.0, None)

    near = gpu_check.compare(
        case, run(params * (1 + 5e-5), scores * (1 + 5e-5)), run(params, scores)
    )
    assert near.ok, near.problems
    far = gpu_check.compare(case, run(params * (1 + 1e-3), scores), run(params, scores))
    assert not far.ok and "final parameters differ by up to 0.003" in far.problems[0]
    nan = gpu_check.compare(case, run(params, np.array([[0.2, np.nan, 0.4]])), run(params, scores))
    assert any("canary scores differ by up to inf" in p for p in nan.problems)
