"""Config validation: clear errors naming the key and what is allowed; defaults filled."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from dpaudit.config import ConfigError, load_schema, validate_config

REPO = Path(__file__).resolve().parents[1]
SCHEMA = load_schema(REPO / "config" / "schema.yaml")


def load(name: str) -> dict:
    return yaml.safe_load((REPO / "config" / name).read_text())


CONFIGS = sorted(p for p in (REPO / "config").rglob("*.yaml") if p.name != "schema.yaml")


@pytest.mark.parametrize("path", CONFIGS, ids=str)
def test_every_shipped_config_is_valid(path):
    validate_config(yaml.safe_load(path.read_text()), SCHEMA)


def test_defaults_are_filled():
    cfg = {"experiments": {"x": {"kind": "train"}}, "estimators": {"o": {"method": "one_run"}}}
    validate_config(cfg, SCHEMA)
    assert cfg["data"]["mirror"] is None
    assert cfg["experiments"]["x"]["train"]["delta"] == 1e-5
    assert cfg["estimators"]["o"]["confidence"] == 0.95


def test_misspelled_key_names_key_and_allowed():
    cfg = load("test.yaml")
    cfg["experiments"]["tiny"]["train"]["epochz"] = 3
    with pytest.raises(ConfigError) as err:
        validate_config(cfg, SCHEMA)
    msg = str(err.value)
    assert "experiments.tiny.train" in msg and "'epochz'" in msg and "epochs" in msg


def test_negative_epsilon_names_key():
    cfg = load("test.yaml")
    cfg["experiments"]["tiny"]["train"]["target_epsilons"] = [-1]
    with pytest.raises(ConfigError, match=r"experiments\.tiny\.train\.target_epsilons\[0\]: -1"):
        validate_config(cfg, SCHEMA)


def test_enum_and_type_errors():
    cfg = load("test.yaml")
    cfg["estimators"]["one_run"]["confidence"] = 1.5
    cfg["experiments"]["tiny"]["model"]["name"] = "resnet9000"
    cfg["experiments"]["tiny"]["seeds"] = "0"
    with pytest.raises(ConfigError) as err:
        validate_config(cfg, SCHEMA)
    msg = str(err.value)
    assert "estimators.one_run.confidence: 1.5 is out of range" in msg
    assert "experiments.tiny.model.name: 'resnet9000' is not allowed" in msg
    assert "'lenet', 'cnn', 'wrn']" in msg
    assert "experiments.tiny.seeds" in msg and "wrong type" in msg


def test_unknown_estimator_reference():
    cfg = load("test.yaml")
    cfg["experiments"]["tiny"]["estimators"] = ["one_rnu"]
    with pytest.raises(ConfigError, match="unknown estimator 'one_rnu'"):
        validate_config(cfg, SCHEMA)


def _resolve(sub: dict) -> dict:
    if "$ref" in sub:
        return SCHEMA["$defs"][sub["$ref"].rsplit("/", 1)[-1]]
    return sub


def _leaves(schema: dict, path: str, out: list) -> None:
    props = schema.get("properties", {})
    for key, sub in props.items():
        sub = _resolve(sub)
        out.append((f"{path}.{key}", sub, key in schema.get("required", [])))
        _leaves(sub, f"{path}.{key}", out)
        if "items" in sub:
            _leaves(sub["items"], f"{path}.{key}[]", out)


def test_schema_documents_every_key():
    """Every key has a description; every optional key has a default."""
    keys: list = []
    _leaves(SCHEMA, "", keys)
    for name, sub in SCHEMA["$defs"].items():
        _leaves(sub, f"$defs.{name}", keys)
    assert len(keys) > 30
    for path, sub, required in keys:
        assert "description" in sub, path
        # Required keys have no default by nature; "estimators" lists default to all that apply.
        if not required and not path.endswith(".estimators") and "$defs.experiment." not in path:
            assert "default" in sub, path


def test_validation_does_not_touch_other_experiments():
    cfg = load("config.yaml")
    before = copy.deepcopy(cfg)
    validate_config(cfg, SCHEMA)
    assert cfg["experiments"].keys() == before["experiments"].keys()


def test_dataset_keys_must_apply_to_the_dataset():
    cfg = load("test.yaml")
    cfg["experiments"]["tiny"]["dataset"] = {"name": "location", "n_features": 10}
    with pytest.raises(ConfigError, match=r"dataset\.n_features: does not apply to dataset"):
        validate_config(cfg, SCHEMA)
    cfg["experiments"]["tiny"]["dataset"] = {"name": "purchase"}
    with pytest.raises(ConfigError, match=r"dataset\.sha256: required"):
        validate_config(cfg, SCHEMA)


def test_mechanism_and_analysis_names_are_checked():
    cfg = {"experiments": {"s": {"kind": "simulate", "mechanism": "lidp_gausian"}}}
    with pytest.raises(ConfigError, match=r"experiments\.s\.mechanism: 'lidp_gausian' is not"):
        validate_config(cfg, SCHEMA)
    cfg = {"experiments": {"a": {"kind": "analysis", "analysis": "nope"}}}
    with pytest.raises(ConfigError, match=r"allowed values: \[.*one_run_correct_guesses"):
        validate_config(cfg, SCHEMA)


def test_defaults_behind_refs_are_filled():
    cfg = {"experiments": {"a": {"kind": "analysis", "analysis": "one_run_max_attainable"}}}
    validate_config(cfg, SCHEMA)
    assert cfg["experiments"]["a"]["figure"]["y"] == "epsilon"
    assert cfg["experiments"]["a"]["reproduce"] == []
    assert cfg["experiments"]["a"]["paper_target"] is None


@pytest.mark.parametrize("where", ["params", "grid", "points"])
def test_mechanism_parameters_are_checked_before_any_job(where):
    cfg = load("paper/lidp.yaml")
    exp = cfg["experiments"]["lidp_fig3_eps_vs_d"]
    if where == "points":
        exp["points"] = [{"heldout_trails": 10}]
    else:
        exp.setdefault(where, {})["heldout_trails"] = [10] if where == "grid" else 10
    with pytest.raises(ConfigError) as err:
        validate_config(cfg, SCHEMA)
    msg = str(err.value)
    assert f"experiments.lidp_fig3_eps_vs_d.{where}" in msg and "heldout_trails" in msg
    assert "not a parameter of mechanism 'lidp_gaussian'" in msg
    assert "heldout_trials" in msg and "score_dtype" in msg  # the allowed names
