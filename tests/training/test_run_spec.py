"""The run spec (dpaudit.training.spec.RunSpec) is the one owner of the DP-SGD schedule facts:
the config check and the training job compute the canary layout, the pool size, the sample
rate and the steps from it, so they cannot drift apart; its checks name the config key."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from dpaudit.config import ConfigError, load_schema, validate_config
from dpaudit.training.spec import (
    ADVERSARIES,
    CANARY_STATISTICS,
    DESIGNS,
    GRADIENT_CANARIES,
    INPUT_CANARIES,
    INSERT,
    LIDP_DEFAULT_POOL,
    NEIGHBOURING,
    TRAINING_THREAT_MODELS,
    TUNING_NEEDS,
    RunSpec,
    SpecError,
    nominal_schedule,
)

SCHEMA = load_schema()


def _block(**over) -> dict:
    """A validated train experiment block (schema defaults filled) with blocks overridden."""
    exp = {
        "kind": "train",
        "design": "multi_run",
        "threat_model": "per_step_dot",
        "dataset": {"name": "synthetic", "n_train": 100, "n_features": 6, "n_classes": 3},
        "model": {"name": "logreg"},
        "canaries": {"type": "random_gradient", "neighbouring": "zero_out"},
        "train": {"target_epsilons": [8], "epochs": 2, "batch_size": 10},
    }
    for key, value in over.items():
        exp[key] = {**exp[key], **value} if isinstance(value, dict) else value
    estimators = {"cp": {"method": "multi_run_cp"}, "l": {"method": "lidp", "order": 1}}
    cfg = {"experiments": {"x": exp}, "estimators": estimators}
    return validate_config(cfg, SCHEMA)["experiments"]["x"]


def test_schema_enums_are_the_run_spec_constants():
    props = SCHEMA["$defs"]["train_experiment"]["properties"]
    canaries = props["canaries"]["properties"]
    assert tuple(props["design"]["enum"]) == DESIGNS
    assert tuple(props["threat_model"]["enum"]) == tuple(TRAINING_THREAT_MODELS)
    assert tuple(canaries["type"]["enum"]) == INPUT_CANARIES + GRADIENT_CANARIES
    assert tuple(canaries["neighbouring"]["enum"]) == NEIGHBOURING
    assert tuple(canaries["adversary"]["enum"]) == ADVERSARIES
    assert tuple(canaries["statistic"]["enum"]) == CANARY_STATISTICS
    assert tuple(canaries["insert"]["enum"]) == INSERT


def test_schema_enums_are_the_qualified_constants():
    """Each constant named for what it lists holds the schema enum of its key."""
    from dpaudit import likelihood_ratios
    from dpaudit.accounting.dpsgd import EPSILON_ACCOUNTANTS, OPACUS_ACCOUNTANTS
    from dpaudit.training import dpsgd, engines, job, step, tuning

    props = SCHEMA["$defs"]["train_experiment"]["properties"]
    train, tuning_block = props["train"]["properties"], props["selection"]["properties"]
    assert tuple(train["engine"]["enum"]) == job.TRAINING_ENGINES
    assert ("opacus", *engines.VECTORIZED_ENGINES) == job.TRAINING_ENGINES
    assert tuple(train["optimizer"]["enum"]) == step.TRAINING_OPTIMIZERS
    assert dpsgd.TRAINING_OPTIMIZERS == step.TRAINING_OPTIMIZERS
    assert tuple(train["accountant"]["enum"]) == OPACUS_ACCOUNTANTS
    assert set(OPACUS_ACCOUNTANTS) < set(EPSILON_ACCOUNTANTS)
    assert tuple(tuning_block["statistic"]["enum"]) == tuning.TUNING_STATISTICS
    assert tuple(tuning_block["setup"]["enum"]) == tuning.TUNING_SETUPS
    assert likelihood_ratios.SHUFFLE_STATISTICS == ADVERSARIES
    assert TUNING_NEEDS["train.engine"] == engines.VECTORIZED_ENGINES


def test_config_and_training_job_share_the_schedule():
    """The sample rate the config's reachability check uses is the one the job trains with.
    Zero-out neighbours put a record in every column, so the nominal dataset of a multi_run
    job on 100 records is 101 (the config used to count half a canary: 100)."""
    from dpaudit.data.synthetic import make_synthetic
    from dpaudit.training.shard import run_shard
    from dpaudit.training.spec import JobId

    block = _block(train={"models_per_shard": 2, "noise_multiplier": 1.0})
    q, steps = nominal_schedule(block).sample_rate, nominal_schedule(block).steps
    assert (q, steps) == (10 / 101, 20)
    data = make_synthetic(n_train=100, n_test=20, n_features=6, n_classes=3, seed=0)
    spec = RunSpec.from_block(block)
    meta = run_shard(data, JobId("x", "s", 0), spec).score_file.meta
    assert (meta["sample_rate"], meta["steps"], meta["steps_per_epoch"]) == (q, steps, 10)
    assert meta["canary_pool_size"] == spec.layout().pool_size == 1


@pytest.mark.parametrize(
    ("design", "canaries", "n_params", "want"),
    [
        ("one_run", {"type": "random_input", "m": 50}, None, (50, 50, 25.0)),
        ("one_run", {"type": "random_input", "m": 50, "insert": "none"}, None, (50, 50, 0)),
        ("lidp", {"type": "random_input", "k": 4}, None, (8, LIDP_DEFAULT_POOL, 4)),
        ("lidp", {"type": "dirac", "k": 4}, None, (8, 8, 4)),  # the cap is unknown: 2k
        ("lidp", {"type": "dirac", "k": 4}, 2**20, (8, 64, 4)),  # 2^26 entries / 2^20 params
        ("lidp", {"type": "dirac", "k": 4}, 84, (8, LIDP_DEFAULT_POOL, 4)),
        ("multi_run", {"type": "dirac"}, None, (1, 1, 0.5)),
        ("multi_run", {"type": "dirac", "neighbouring": "zero_out"}, None, (1, 1, 1)),
        (
            "lidp",
            {"type": "clipbkd", "k": 4, "first_component": 10, "last_component": 30},
            None,
            (8, 20, 4),
        ),
    ],
)
def test_canary_layout(design, canaries, n_params, want):
    tm = "white_box_dot"
    spec = RunSpec.from_run_spec({"design": design, "threat_model": tm, "canaries": canaries})
    layout = spec.layout(n_params)
    assert (layout.per_trial, layout.pool_size, layout.expected_in) == want


def test_lidp_dirac_pool_is_checked_against_the_model_at_validation():
    """LiDP's default pool of Dirac canaries is 1000 (capped by memory), which a model with 84
    parameters cannot hold distinct: the job fails on it, so validation does too (it used to
    count a pool of 2k = 8)."""
    over = {
        "design": "lidp",
        "threat_model": "white_box_dot",
        "canaries": {"type": "dirac", "k": 4, "neighbouring": "add_remove"},
        "dataset": {"n_features": 20, "n_classes": 4},
    }
    with pytest.raises(ConfigError, match=r"experiments\.x\.canaries\.k: 1000 Dirac canaries"):
        _block(**over)
    _block(**{**over, "canaries": {**over["canaries"], "pool_size": 8}})


@pytest.mark.parametrize(
    ("run_spec", "key", "words"),
    [
        ({"design": "two_run"}, "design", "unknown design 'two_run'"),
        ({"canaries": {"adversary": "partially_informed"}}, "canaries.adversary", "multi_run"),
        ({"canaries": {"statistic": "likelihood_ratio"}}, "canaries.statistic", "per_step_dot"),
        ({"canaries": {"neighbouring": "zero_out"}}, "canaries.neighbouring", "gradient"),
        ({"design": "lidp", "canaries": {"insert": "none"}}, "canaries.insert", "one_run"),
        ({"canaries": {"type": "dirac"}}, "threat_model", "does not apply to 'dirac'"),
        ({"canaries": {"type": "clipbkd"}}, "canaries.first_component", "required"),
        ({"canaries": {"m": 10, "pool_size": 5}}, "canaries.m", "holds 5"),
        ({"canaries": {"colour": 1}}, "canaries", "unknown key(s) ['colour']"),
        ({"train": {"target_epsilons": [1]}}, "train", "unknown key(s) ['target_epsilons']"),
        ({"trainer": "opacus"}, "run spec", "unknown key(s) ['trainer']"),
        ({"selection": {"setup": "etcv"}}, "design", "'one_run'; a selection (tuning) audit"),
    ],
)
def test_bad_run_spec_names_the_key(run_spec, key, words):
    with pytest.raises(SpecError) as err:
        RunSpec.from_run_spec(run_spec)
    assert err.value.key == key and words in err.value.reason
    assert str(err.value).startswith(f"{key}: ")


@pytest.mark.parametrize(
    ("run_spec", "key", "words"),
    [
        ({"design": "lidp"}, "design", "'lidp'; a selection (tuning) audit"),
        ({"threat_model": "black_box_loss"}, "threat_model", "needs one of ['white_box_dot']"),
        ({"canaries": {"type": "clipbkd"}}, "canaries.type", "'clipbkd'; a selection (tuning)"),
        ({"train": {"engine": "opacus"}}, "train.engine", "needs one of ['auto', 'stacked'"),
        ({"train": {"noise_multiplier": 1.0}}, "train.noise_multiplier", "needs one of [None]"),
    ],
)
def test_tuning_run_spec_needs_what_the_tuning_audit_takes(run_spec, key, words):
    """A run spec with ``selection`` (the tuning audit) checks TUNING_NEEDS itself, so the
    config check and the tuning job reject the same specs."""
    spec = {
        "design": "multi_run",
        "threat_model": "white_box_dot",
        "canaries": {"type": "dirac"},
        "selection": {"setup": "etcv"},
    }
    RunSpec.from_run_spec(spec)
    for name, value in run_spec.items():
        spec[name] = {**spec.get(name, {}), **value} if isinstance(value, dict) else value
    with pytest.raises(SpecError) as err:
        RunSpec.from_run_spec(spec)
    assert err.value.key == key and words in err.value.reason


def test_schedule_of_a_dataset_of_unknown_size_is_the_conservative_one():
    """Real data with n_train null: the size is known once prepared, so the config's
    reachability check takes sample rate 1 and one step per epoch (the largest epsilon at a
    given noise); synthetic data with n_train null has make_synthetic's default size."""
    from dpaudit.data.catalog import SYNTHETIC_N_TRAIN, known_n_train
    from dpaudit.training.spec import Schedule

    spec = RunSpec.from_run_spec({"train": {"epochs": 3, "batch_size": 10}})
    assert spec.nominal_schedule(None) == Schedule(1.0, 3, 1)
    assert spec.nominal_schedule(100) == spec.schedule(100)
    assert known_n_train({"name": "mnist"}) is None
    assert known_n_train({"name": "mnist", "n_train": 500}) == 500
    assert known_n_train({}) == known_n_train({"name": "synthetic"}) == SYNTHETIC_N_TRAIN


def test_config_names_the_experiment_and_the_key():
    with pytest.raises(ConfigError, match=r"config key experiments\.x\.canaries\.insert: none"):
        _block(canaries={"insert": "none"})


def test_run_spec_is_frozen_and_round_trips():
    block = _block()
    spec = RunSpec.from_block(block, target_epsilon=8.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.design = "lidp"  # type: ignore[misc]
    with pytest.raises(TypeError):
        spec.train["lr"] = 1.0  # type: ignore[index]
    assert RunSpec.from_run_spec(spec.to_dict()) == spec
    assert RunSpec.from_run_spec(spec) is spec
    assert "target_epsilons" not in spec.train and spec.target_epsilon == 8.0
    assert np.isclose(spec.schedule(100).sample_rate, 10 / 101)


def test_experiment_spec_names_the_config_key_and_nominal_schedule_reads_the_catalog():
    """Issue 38: a train experiment's run spec and nominal schedule are built in
    training/spec.py (the config check only reads them). A bad spec's key is the config key
    ``experiments.<name>.<run-spec key>``; a dataset whose size the config does not fix (real
    data) gets the conservative schedule (sample rate 1, train.epochs steps)."""
    from dpaudit.training.spec import Schedule, experiment_spec

    block = _block()
    assert experiment_spec("x", block) == RunSpec.from_block(block)
    bad = {**block, "canaries": {**block["canaries"], "neighbouring": "add_remove"}}
    bad["canaries"]["adversary"] = "batch_worst_case"
    with pytest.raises(SpecError) as err:
        experiment_spec("x", bad)
    assert err.value.key == "experiments.x.canaries.adversary"
    assert str(err.value).startswith("experiments.x.canaries.adversary: ")
    assert nominal_schedule(block) == RunSpec.from_block(block).schedule(100)
    real = {**block, "dataset": {"name": "cifar10"}}
    assert nominal_schedule(real) == Schedule(1.0, 2, 1)
