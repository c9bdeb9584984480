"""Bad training inputs give errors that name the file, the key or the job, before training."""

from __future__ import annotations

import re

import pytest

from dpaudit.accounting.dpsgd import calibrate_noise, poisson_epsilon
from dpaudit.data.synthetic import make_synthetic
from dpaudit.training.job import JobId
from dpaudit.training.shard import run_shard


def test_unreachable_target_epsilon_names_target_delta_and_steps():
    """Opacus gives up beyond noise multiplier 1e6 with only "The privacy budget is too low."
    (sample rate 1 keeps the accountant fast)."""
    with pytest.raises(ValueError, match=r"target_epsilon 1e-06 at delta 1e-05 .* 3 steps"):
        calibrate_noise(1e-6, 1e-5, 1.0, 3, "rdp")


@pytest.mark.parametrize("delta", [0.0, 1.0, 1.5, -1e-5])
def test_delta_outside_0_1_is_rejected(delta):
    with pytest.raises(ValueError, match="delta must be in"):
        calibrate_noise(1.0, delta, 0.1, 10, "rdp")
    with pytest.raises(ValueError, match="delta must be in"):
        poisson_epsilon(1.0, 0.1, 10, delta, "rdp")


def _shard(canaries=None, design="one_run", **train):
    data = make_synthetic(n_train=100, n_test=20, n_features=5, n_classes=2, seed=0)
    spec = {
        "design": design,
        "threat_model": "black_box_loss",
        "model": {"name": "logreg"},
        "canaries": canaries or {"m": 10},
        "train": {"epochs": 1, "batch_size": 50, "models_per_shard": 1, **train},
        "target_epsilon": 1.0,
    }
    return run_shard(data, JobId("e", "s", 2, 1), spec)


def test_run_shard_names_the_job_of_an_unreachable_target():
    with pytest.raises(ValueError, match=r"experiment 'e', setting 's', seed 2, shard 1: .*delta"):
        _shard(delta=2.0)


@pytest.mark.parametrize("key", ["model_chunk", "eval_examples"])
@pytest.mark.parametrize("value", [0, -1, 1.5, True])
def test_optional_counts_must_be_positive_integers(key, value):
    with pytest.raises(ValueError, match=f"train.{key} must be an integer >= 1"):
        _shard(**{key: value})


@pytest.mark.parametrize("design, canaries", [("one_run", {"m": 0}), ("lidp", {"k": 0})])
def test_no_canaries_per_trial_is_rejected_before_training(design, canaries):
    key = next(iter(canaries))
    with pytest.raises(ValueError, match=f"canaries.{key}: must be >= 1"):
        _shard(canaries=canaries, design=design)


@pytest.mark.parametrize(
    "text, match",
    [
        ("design: one_run\ncanaries: {m: 3\n", r"run\.yaml: not valid YAML \(line \d+, column \d+"),
        ("design: one_run\ntrain: 5\n", "'train' must be a mapping, got 5"),
        ("- a\n- b\n", "expected a mapping"),
    ],
)
def test_cli_train_shard_names_the_run_file(tmp_path, text, match, capsys):
    from dpaudit.cli import main

    run = tmp_path / "run.yaml"
    run.write_text(text)
    out = tmp_path / "x.npz"
    assert main(["train-shard", "--run", str(run), "--data", "synthetic", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert re.search(match, err) and str(run) in err
    assert not out.exists()


def test_config_validation_rejects_zero_eval_examples():
    """train.eval_examples 0 passed the schema, then failed after training (NaN accuracy in
    the score file's meta); the schema now asks for >= 1, as run_shard does."""
    from pathlib import Path

    import yaml

    from dpaudit.config import ConfigError, load_schema, validate_config

    repo = Path(__file__).resolve().parents[2]
    cfg = yaml.safe_load((repo / "config" / "test.yaml").read_text())
    name = next(k for k, v in cfg["experiments"].items() if "eval_examples" in v.get("train", {}))
    cfg["experiments"][name]["train"]["eval_examples"] = 0
    with pytest.raises(ConfigError, match=f"experiments.{name}.train.eval_examples"):
        validate_config(cfg, load_schema(repo / "config" / "schema.yaml"))


def test_cli_train_shard_discards_a_corrupt_checkpoint_and_says_so(tmp_path):
    """The CLI job beside a corrupt checkpoint trains afresh, names the file on stderr, and
    removes the checkpoint with the outputs written."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from dpaudit.scores import read

    run = tmp_path / "run.yaml"
    run.write_text(
        "model: {name: logreg}\ncanaries: {m: 10}\n"
        "train: {steps: 3, batch_size: 100, models_per_shard: 1}\ntarget_epsilon: null\n"
    )
    out = tmp_path / "s.npz"
    ckpt = tmp_path / "s.npz.ckpt"
    ckpt.write_bytes(b"PK\x03\x04 cut short")
    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(repo)}
    cmd = [sys.executable, "-m", "dpaudit.cli", "train-shard", "--run", str(run)]
    cmd += ["--data", "synthetic", "--out", str(out), "--no-progress"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert f"{ckpt}: discarding the checkpoint and training from step 0" in proc.stderr
    assert "cannot be read" in proc.stderr
    assert read(out).n_trials == 1 and not ckpt.exists()


def test_opacus_engine_rejects_what_it_cannot_run():
    """The Opacus engine's own checks of the run spec's train block (what DPSGDParams checked)."""
    from dpaudit.training.dpsgd import check_opacus_train
    from dpaudit.training.spec import RunSpec

    train = dict(RunSpec.from_run_spec({}).train)
    check_opacus_train(train, 1.0)
    with pytest.raises(ValueError, match=r"momentum 0.9 applies to SGD.*train.adam_betas"):
        check_opacus_train({**train, "optimizer": "adam", "momentum": 0.9}, 1.0)
    with pytest.raises(ValueError, match=r"accountant 'pld'; allowed: \['rdp', 'prv', 'gdp'\]"):
        check_opacus_train({**train, "accountant": "pld"}, 1.0)
    with pytest.raises(ValueError, match="target_epsilon must be > 0"):
        check_opacus_train(train, 0.0)
