"""The conformance checks as a test in the user's own CI (issue 37, item 6):
:func:`dpaudit.attach.check_conformance` and the ``dpaudit_conformance`` pytest fixture of
:mod:`dpaudit.attach.testing`, run on ``examples/test_my_training.py``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import dpaudit.attach
from dpaudit.attach import ConformanceError, GradientCanaries, check_conformance

ROOT = Path(__file__).resolve().parents[2]

SHUFFLED = '''
from test_my_training import DELTA, make_training, train

pytest_plugins = ["dpaudit.attach.testing"]


def test_shuffled_batches_accounted_as_poisson(dpaudit_conformance):
    model, optimizer, loader, engine = make_training(poisson_sampling=False)
    auditor = dpaudit_conformance.opacus(optimizer, data_loader=loader)
    train(model, optimizer, loader, epochs=2)
    dpaudit_conformance.check(auditor, engine.get_epsilon(DELTA), delta=DELTA, accountant="rdp")
'''


@pytest.mark.slow
def test_issue37_item6_example_passes_and_a_shuffled_loader_fails_the_build(tmp_path) -> None:
    """pytest on the example (correct Poisson Opacus training, 8 steps) passes; the same test
    on a shuffled fixed-size loader that Opacus accounts as Poisson fails, with the report
    naming the sampling stage."""
    shutil.copy(ROOT / "examples" / "test_my_training.py", tmp_path)
    (tmp_path / "test_shuffled.py").write_text(SHUFFLED)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )
    out = run.stdout + run.stderr
    assert run.returncode == 1, out
    assert "1 failed, 1 passed" in out, out
    assert "ConformanceError" in out and "DEPARTS from the claim at sampling" in out
    assert "per-epoch regularity" in out


def _hand_written(kind: str, steps: int = 8) -> GradientCanaries:
    c, rng = GradientCanaries(10, 50, 0.25, 1.0), np.random.default_rng(0)
    perm = rng.permutation(300)
    for t in range(steps):
        if kind == "poisson":
            batch = np.flatnonzero(rng.random(300) < 0.25)
        else:  # shuffled: each record once per epoch of 4 steps
            batch = perm[(t % 4) * 75 : (t % 4 + 1) * 75]
        c.record_batch(batch, 300)
        c.draw_step()
        c.observe(rng.standard_normal(50))
    return c


def test_issue37_item6_check_conformance_raises_with_the_report() -> None:
    rep = check_conformance(
        _hand_written("poisson"), delta=1e-5, noise_multiplier=1.0, accountant="rdp"
    )
    assert not rep.departs and "sampling" in rep.seen
    with pytest.raises(ConformanceError, match="DEPARTS from the claim at sampling"):
        check_conformance(
            _hand_written("shuffle"), delta=1e-5, noise_multiplier=1.0, accountant="rdp"
        )
    with pytest.raises(ValueError, match="saw no noisy step"):
        check_conformance(GradientCanaries(10, 50, 0.25, 1.0), delta=1e-5)
    with pytest.raises(TypeError, match="needs an attached auditor"):
        check_conformance(object(), delta=1e-5)
    assert dpaudit.attach.check_conformance is check_conformance
