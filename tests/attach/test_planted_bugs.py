"""The planted DP-SGD bugs of dpaudit.attach.planted_bugs, audited at CI size on real data.

The digits MLP of config/cpu/own_training.yaml, reduced (64 hidden units, m = 256 canaries on
the first-layer weights of constant-zero pixels, 4 epochs of 4 steps), claimed epsilon 2 at
delta 1e-5 (rdp). The correct Opacus loop must not be flagged over 20 seeds; the blatant bugs
(batch clipping, noise scaled for the mean but added to the sum) must be flagged in one run.
"""

from __future__ import annotations

import numpy as np
import pytest

from dpaudit.attach import audit_file
from dpaudit.attach.pipeline import run_entry_point
from dpaudit.data.prepare import load_prepared, prepare_dataset
from dpaudit.training.job import complete_run_spec

pytestmark = pytest.mark.slow

SPEC = {
    "design": "one_run",
    "threat_model": "per_step_dot",
    "model": {"name": "mlp", "hidden": [64]},
    "canaries": {"type": "dirac", "m": 256},
    "train": {
        "batch_size": 360,
        "epochs": 4,
        "lr": 0.5,
        "max_grad_norm": 1.0,
        "accountant": "rdp",
        "delta": 1e-5,
    },
    "target_epsilon": 2.0,
}


@pytest.fixture(scope="module")
def digits(tmp_path_factory) -> dict[str, np.ndarray]:
    out = tmp_path_factory.mktemp("digits") / "digits.npz"
    prepare_dataset("digits", {}, str(out.parent), None, str(out))
    return load_prepared(out)[0]


def _audit(digits, name: str, seed: int):
    spec = complete_run_spec({**SPEC, "train": {**SPEC["train"]}})
    spec["train"]["entry_point"] = f"dpaudit.attach.planted_bugs:{name}"
    sf = run_entry_point(
        digits, experiment="ci", setting=name, seed=seed, shard=0, run_spec=spec, device="cpu"
    )
    return audit_file(sf, 0.95)


def test_the_correct_opacus_loop_is_not_flagged_over_20_seeds(digits) -> None:
    """Each verdict is a 95% statement: a correct loop is flagged with probability at most
    0.05 per seed; 4 or more flags in 20 would happen with probability 1.6% at exactly 0.05."""
    results = [_audit(digits, "correct", seed) for seed in range(20)]
    flags = sum(r.flagged for r in results)
    assert all(abs(r.verdict["claimed_epsilon"].iloc[0] - 2.0) < 0.02 for r in results)
    assert flags <= 3, [round(r.lower_bound, 3) for r in results]


@pytest.mark.parametrize("bug", ["batch_clipping", "noise_normalization"])
def test_the_blatant_bugs_are_flagged_in_one_run(digits, bug) -> None:
    result = _audit(digits, bug, 0)
    assert result.flagged, str(result)
    assert result.lower_bound > 2.0


def test_the_reference_loops_learn(digits) -> None:
    """The loops train real models: the hand-written reference reaches well above chance."""
    result = _audit(digits, "handwritten_correct", 0)
    assert result.score_file.meta["test_accuracy"] > 0.3
    assert not result.flagged
