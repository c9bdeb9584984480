"""One training entry point (dpaudit.training.job.train_job) for every engine."""

from __future__ import annotations

import numpy as np
import pytest

from dpaudit.data.synthetic import make_synthetic
from dpaudit.scores import read, write
from dpaudit.training.job import JobId, checkpoint_path, observations_path, train_job
from dpaudit.training.vectorized import TrainingDiverged

JOB = {"experiment": "e", "setting": "eps8", "seed": 1}


@pytest.fixture(scope="module")
def data():
    return make_synthetic(n_train=120, n_test=40, n_features=10, n_classes=3, seed=0)


def _spec(engine: str, **train) -> dict:
    return {
        "design": "one_run",
        "threat_model": "black_box_loss",
        "model": {"name": "mlp", "hidden": [8]},
        "canaries": {"type": "random_input", "m": 12, "scale": 6.0, "seed": 0},
        "train": {
            "engine": engine,
            "epochs": 1,
            "batch_size": 40,
            "lr": 0.5,
            "max_grad_norm": 1.0,
            "delta": 1e-5,
            "models_per_shard": 2,
            **train,
        },
        "target_epsilon": 8.0,
    }


def _same(a, b) -> None:
    for key in ("score", "membership", "canary_id"):
        assert np.array_equal(getattr(a, key), getattr(b, key)), key
    assert a.meta == b.meta


@pytest.mark.slow
def test_opacus_engine_writes_what_run_setting_computes(data, tmp_path):
    """train.engine opacus is the Opacus reference engine, byte for byte."""
    from dpaudit.training.opacus_engine import run_setting

    spec = _spec("opacus")
    out = tmp_path / "o.npz"
    sf = train_job(data, **JOB, shard=0, run_spec=spec, out=out, device="cpu")
    want = run_setting(data, JobId(**JOB), spec, device="cpu")
    write(tmp_path / "want.npz", want)
    assert out.read_bytes() == (tmp_path / "want.npz").read_bytes()
    _same(sf, want)
    assert sf.n_trials == 1 and "engine" not in sf.meta


@pytest.mark.parametrize("engine", ["auto", "stacked", "func"])
def test_vectorised_engines_write_what_run_shard_computes(data, tmp_path, engine):
    """The vectorised engines: the score file of run_shard, the checkpoint gone."""
    from dpaudit.training.shard import run_shard

    spec = _spec(engine)
    out = tmp_path / "v.npz"
    sf = train_job(data, **JOB, shard=1, run_spec=spec, out=out, device="cpu")
    want = run_shard(data, JobId(**JOB, shard=1), spec, device="cpu").score_file
    _same(read(out), want)
    _same(sf, want)
    assert sf.n_trials == 2 and sf.meta["engine"] == ("func" if engine == "func" else "stacked")
    assert not checkpoint_path(out).exists() and checkpoint_path(out).name == "v.npz.ckpt"


def test_observations_are_written_on_request(data, tmp_path):
    spec = _spec("auto")
    spec.update(design="multi_run", threat_model="per_step_dot")
    spec["canaries"] = {"type": "random_gradient"}
    out = tmp_path / "p.npz"
    train_job(data, **JOB, shard=0, run_spec=spec, out=out, device="cpu")
    assert not observations_path(out).exists()
    sf = train_job(data, **JOB, shard=0, run_spec=spec, out=out, observations=True)
    obs = np.load(observations_path(out))["step_dots"]
    assert observations_path(out).name == "p.observations.npz"
    assert np.allclose(obs.sum(-1), sf.score)


@pytest.mark.parametrize(
    ("edit", "shard", "match"),
    [
        ({"design": "lidp"}, 0, "run spec key design: 'lidp' needs train.engine auto"),
        ({"threat_model": "white_box_dot"}, 0, "run spec key threat_model"),
        ({"canaries": {"type": "dirac", "m": 4}}, 0, "run spec key canaries.type"),
        ({"train": {"engine": "opacus", "steps": 3}}, 0, "run spec key train.steps"),
        ({}, 1, "run spec key shard: 1: train.engine opacus trains one shard"),
        ({"train": {"engine": "gpu"}}, 0, r"train.engine 'gpu'; allowed: \['opacus'"),
        ({"desgn": "one_run"}, 0, r"unknown key\(s\) \['desgn'\]"),
    ],
)
def test_a_spec_the_engine_cannot_run_names_the_key_and_writes_nothing(
    data, tmp_path, edit, shard, match
):
    spec = {**_spec("opacus"), **edit}
    out = tmp_path / "x.npz"
    with pytest.raises(ValueError, match=match):
        train_job(data, **JOB, shard=shard, run_spec=spec, out=out, device="cpu")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("engine", ["opacus", "auto"])
def test_a_diverged_job_leaves_no_score_file(data, tmp_path, engine):
    out = tmp_path / "d.npz"
    with pytest.raises(TrainingDiverged, match="experiment 'e', setting 'eps8', seed 1"):
        train_job(data, **JOB, shard=0, run_spec=_spec(engine, lr=1e30), out=out, device="cpu")
    assert not out.exists()


def test_cli_train_alias_runs_the_opacus_engine(tmp_path, capsys):
    """``dpaudit train`` is ``dpaudit train-shard``; train.engine opacus trains one model."""
    import json

    from dpaudit.cli import main

    run = tmp_path / "run.yaml"
    run.write_text(
        "model: {name: logreg}\ncanaries: {type: random_input, m: 10}\n"
        "train: {engine: opacus, epochs: 1, batch_size: 100, lr: 0.5, max_grad_norm: 1.0, "
        "delta: 1.0e-5}\ntarget_epsilon: 8\n"
    )
    out = tmp_path / "s.npz"
    argv = ["train", "--run", str(run), "--data", "synthetic", "--out", str(out)]
    assert main([*argv, "--seed", "3"]) == 0
    line = json.loads(capsys.readouterr().out)
    sf = read(out)
    assert line["trials"] == sf.n_trials == 1 and sf.meta["accountant"] == "opacus_rdp"
    assert main([*argv, "--shard", "1"]) == 2
    assert "run spec key shard: 1" in capsys.readouterr().err


def test_both_engines_take_a_job_id_and_the_run_spec(data, tmp_path):
    """Which job is trained travels as one frozen JobId and what is trained as the run spec:
    both engines start with (data, job_id, run_spec), and train_job hands them the same
    JobId (the Opacus engine refuses a shard other than 0, naming it)."""
    import dataclasses
    import inspect

    from dpaudit.training.opacus_engine import run_setting
    from dpaudit.training.shard import run_shard

    for engine in (run_setting, run_shard):
        assert list(inspect.signature(engine).parameters)[:3] == ["data", "job_id", "run_spec"]
    job = JobId(**JOB)
    assert job.shard == 0
    with pytest.raises(dataclasses.FrozenInstanceError):
        job.seed = 2
    with pytest.raises(ValueError, match="run spec key shard: 3: train.engine opacus"):
        train_job(data, **JOB, shard=3, run_spec=_spec("opacus"), out=tmp_path / "o.npz")
    assert not (tmp_path / "o.npz").exists()


@pytest.mark.slow
def test_opacus_engine_trains_with_adam(data, tmp_path, monkeypatch):
    """train.optimizer adam on the Opacus engine: Opacus's DPOptimizer wraps torch.optim.Adam
    (with the configured betas and eps), and the run differs from SGD's."""
    import torch

    from dpaudit.training import dpsgd

    made = []
    real = dpsgd.make_optimizer
    monkeypatch.setattr(dpsgd, "make_optimizer", lambda *a: made.append(real(*a)) or made[-1])
    spec = _spec("opacus", optimizer="adam", lr=0.01, adam_betas=[0.8, 0.99], adam_eps=1e-6)
    sf = train_job(data, **JOB, shard=0, run_spec=spec, out=tmp_path / "a.npz", device="cpu")
    assert isinstance(made[0], torch.optim.Adam)
    assert made[0].defaults["betas"] == (0.8, 0.99) and made[0].defaults["eps"] == 1e-6
    assert sf.meta["optimizer"] == "adam" and np.isfinite(sf.score).all()
    sgd = train_job(data, **JOB, shard=0, run_spec=_spec("opacus", lr=0.01), out=tmp_path / "s.npz")
    assert sgd.meta["optimizer"] == "sgd" and not np.allclose(sgd.score, sf.score)


def test_vectorised_engine_trains_with_adam(data, tmp_path):
    """train.optimizer adam reaches the vectorised engine (its meta says so; scores differ)."""
    adam = train_job(
        data, **JOB, shard=0, run_spec=_spec("auto", optimizer="adam", lr=0.01), out=tmp_path / "a"
    )
    sgd = train_job(data, **JOB, shard=0, run_spec=_spec("auto", lr=0.01), out=tmp_path / "s")
    assert adam.meta["optimizer"] == "adam" and sgd.meta["optimizer"] == "sgd"
    assert not np.allclose(adam.score, sgd.score)
