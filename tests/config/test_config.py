"""Config validation: clear errors naming the key and what is allowed; defaults filled."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
import yaml

from dpaudit.config import ConfigError, load_schema, validate_config

REPO = Path(__file__).resolve().parents[2]
SCHEMA = load_schema()


def load(name: str) -> dict:
    return yaml.safe_load((REPO / "config" / name).read_text())


CONFIGS = sorted(p for p in (REPO / "config").rglob("*.yaml") if p.name != "schema.yaml")


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_shipped_config_is_valid(path):
    """Each shipped config as Snakemake reads it: merged into config/config.yaml (the
    Snakefile's configfile) by ``--configfile`` (snakemake.utils.update_config)."""
    from snakemake.utils import update_config

    config = load("config.yaml")
    update_config(config, yaml.safe_load(path.read_text()))
    schema_only = copy.deepcopy(config)
    validate_config(config, SCHEMA)
    # a cluster job's Snakemake process skips the cross-key checks (rules/common.smk): it must
    # still see the very config the main process checked
    assert validate_config(schema_only, SCHEMA, cross_checks=False) == config


def test_cross_checks_can_be_skipped_but_run_by_default():
    cfg = {
        "experiments": {"x": {"kind": "train", "estimators": ["missing"]}},
        "estimators": {"o": {"method": "one_run"}},
    }
    validate_config(copy.deepcopy(cfg), SCHEMA, cross_checks=False)
    with pytest.raises(ConfigError, match="unknown estimator 'missing'"):
        validate_config(cfg, SCHEMA)


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
    # keys that one branch of a oneOf / anyOf or an if-then requires are required when chosen
    required = set(schema.get("required", []))
    for branch in schema.get("oneOf", []) + schema.get("anyOf", []):
        required |= set(branch.get("required", []))
    for rule in schema.get("allOf", []):
        then = rule.get("then", {})
        required |= set(then.get("required", []))
        for branch in then.get("oneOf", []):
            required |= set(branch.get("required", []))
    for key, sub in props.items():
        sub = _resolve(sub)
        out.append((f"{path}.{key}", sub, key in required))
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


# ------------------------------------------------------------------ issue 9 items


def exp_cfg(exp: dict, estimators: dict | None = None) -> dict:
    return {
        "experiments": {"x": exp},
        "estimators": estimators or {"o": {"method": "one_run"}, "l": {"method": "lidp"}},
    }


def test_estimator_that_does_not_apply_to_the_design_is_rejected():
    cfg = exp_cfg({"kind": "train", "design": "one_run", "estimators": ["o", "l"]})
    with pytest.raises(ConfigError) as err:
        validate_config(cfg, SCHEMA)
    msg = str(err.value)
    assert "experiments.x.estimators" in msg and "estimator 'l'" in msg
    assert "estimators.l" in msg and "'one_run'" in msg and "apply: ['o']" in msg


def test_experiment_with_no_applicable_estimator_is_rejected():
    cfg = exp_cfg({"kind": "train"}, {"l": {"method": "lidp"}})
    with pytest.raises(ConfigError, match=r"experiments\.x: no estimator block applies"):
        validate_config(cfg, SCHEMA)


def test_missing_kind_gives_one_clear_message():
    with pytest.raises(ConfigError) as err:
        validate_config({"experiments": {"x": {"design": "one_run"}}}, SCHEMA)
    msg = str(err.value)
    assert "(1 problem(s))" in msg
    assert "experiments.x: missing required key 'kind'" in msg
    assert "['train', 'simulate', 'analysis']" in msg and "trainer" not in msg


def test_missing_method_gives_one_clear_message():
    cfg = {
        "experiments": {"a": {"kind": "analysis", "analysis": "one_run_max_attainable"}},
        "estimators": {"e": {"confidence": 2}},
    }
    with pytest.raises(ConfigError) as err:
        validate_config(cfg, SCHEMA)
    msg = str(err.value)
    assert "(1 problem(s))" in msg and "estimators.e: missing required key 'method'" in msg


def test_messages_are_not_repeated():
    cfg = load("test.yaml")
    cfg["estimators"]["one_run"]["confidence"] = 1.5
    with pytest.raises(ConfigError) as err:
        validate_config(cfg, SCHEMA)
    lines = [ln for ln in str(err.value).splitlines() if ln.startswith("  - ")]
    assert len(lines) == len(set(lines)) == 1


@pytest.mark.parametrize("empty", [None, {}])
def test_empty_experiments_block_is_an_error(empty):
    with pytest.raises(ConfigError, match=r"config key experiments: is empty"):
        validate_config({"experiments": empty}, SCHEMA)


def test_estimators_only_config_is_allowed_when_experiments_are_not_required():
    cfg = {"estimators": {"o": {"method": "one_run"}}}
    validate_config(cfg, SCHEMA, require_experiments=False)
    with pytest.raises(ConfigError, match="config key experiments: missing"):
        validate_config({"estimators": {}}, SCHEMA)


def test_yaml_syntax_error_names_file_and_line(tmp_path):
    from dpaudit.config import load_config_file

    bad = tmp_path / "bad.yaml"
    bad.write_text("experiments:\n  x:\n    kind: [train\n")
    where = r"line \d+, column \d+"
    with pytest.raises(ConfigError, match=rf"config file {bad}: not valid YAML \({where}: "):
        load_config_file(bad)
    bad.write_text("- a\n- b\n")
    mapping = "a config must be a mapping of keys, got list"
    with pytest.raises(ConfigError, match=rf"config file {bad}: {mapping}"):
        load_config_file(bad)


def test_audit_config_errors_name_the_file(tmp_path):
    """``dpaudit audit --config``: a YAML error names file and line; a schema error the file."""
    from dpaudit.commands.audit import estimator_specs

    bad = tmp_path / "bad.yaml"
    bad.write_text("estimators:\n  o: {method: one_run\n")
    with pytest.raises(ConfigError, match=rf"config file {bad}: not valid YAML \(line 3, "):
        estimator_specs([], str(bad))
    bad.write_text("estimators:\n  o: {method: one_rnu}\n")
    with pytest.raises(ConfigError, match=rf"(?s)config file {bad}: .*estimators\.o\.method"):
        estimator_specs([], str(bad))
    bad.write_text("estimators:\n  o: {method: one_run}\n")
    assert estimator_specs([], str(bad))["o"]["confidence"] == 0.95


def test_canaries_beyond_the_dataset_pool_are_rejected():
    exp = {
        "kind": "train",
        "canaries": {"type": "mislabeled", "m": 100},
        "dataset": {"canary_pool": 50},
    }
    with pytest.raises(ConfigError) as err:
        validate_config(exp_cfg(exp), SCHEMA)
    msg = str(err.value)
    assert "experiments.x.dataset.canary_pool: 50" in msg and "pool of 100" in msg
    assert "canaries.m" in msg
    exp["dataset"]["canary_pool"] = 100
    validate_config(exp_cfg(exp), SCHEMA)


def test_canaries_beyond_the_pool_size_are_rejected():
    exp = {"kind": "train", "design": "lidp", "canaries": {"k": 8, "pool_size": 10}}
    with pytest.raises(ConfigError, match=r"experiments\.x\.canaries\.k: design 'lidp' needs 16"):
        validate_config(exp_cfg(exp), SCHEMA)


#: What the run spec says of a Dirac canary under the default threat model (black_box_loss):
#: the job would fail on it, so validation does (dpaudit.training.spec.RunSpec).
_DIRAC_LOSS = "experiments.x.threat_model: threat model 'black_box_loss' does not apply to 'dirac'"


@pytest.mark.parametrize(
    ("exp", "key", "vectorised"),
    [
        ({"design": "lidp"}, "experiments.x.design: 'lidp' needs train.engine auto", None),
        (
            {"canaries": {"type": "dirac"}},
            "experiments.x.canaries.type: 'dirac' needs",
            _DIRAC_LOSS,
        ),
        ({"train": {"sampler": "shuffle"}}, "experiments.x.train.sampler: 'shuffle' needs", None),
        ({"train": {"steps": 5}}, "experiments.x.train.steps: only for train.engine auto", None),
        ({"shards": 2}, "experiments.x.shards: 2: train.engine opacus trains one model", None),
    ],
)
def test_opacus_engine_takes_only_what_it_can_train(exp, key, vectorised):
    """train.engine opacus: one shard, one_run, random_input, black_box_loss, Poisson; the
    vectorised engine (the default) takes the same block, unless the run spec rejects it."""
    block = {"kind": "train", **exp}
    block["train"] = {"engine": "opacus", **exp.get("train", {})}
    with pytest.raises(ConfigError, match=re.escape(key)):
        validate_config(exp_cfg(block), SCHEMA)
    del block["train"]["engine"]
    if vectorised is None:
        validate_config(exp_cfg(block), SCHEMA)
    else:
        with pytest.raises(ConfigError, match=re.escape(vectorised)):
            validate_config(exp_cfg(block), SCHEMA)


def test_unreachable_target_epsilon_is_rejected():
    exp = {"kind": "train", "train": {"target_epsilons": [1, 0.05]}}
    with pytest.raises(ConfigError) as err:
        validate_config(exp_cfg(exp), SCHEMA)
    msg = str(err.value)
    assert "experiments.x.train.target_epsilons[1]: target epsilon 0.05 (setting eps0.05)" in msg
    assert "privacy budget is too low" in msg


def test_unreachable_target_agrees_with_the_training_calibration():
    """The validation-time check says 'unreachable' exactly where the job's calibration fails."""
    from dpaudit.accounting.dpsgd import calibrate_noise
    from dpaudit.training.reachability import reachable_epsilon_problem

    for target in (0.05, 0.15):
        problem = reachable_epsilon_problem(target, 1e-5, 0.1, 300, "rdp")
        try:
            calibrate_noise(target, 1e-5, 0.1, 300, "rdp")
            failed = False
        except ValueError as err:
            failed = "too low" in str(err)
        assert (problem is not None) == failed, target


def test_rdp_floor_bound_covers_the_accountants():
    from dpaudit.accounting.dpsgd import poisson_epsilon
    from dpaudit.training.reachability import OPACUS_LARGEST_SIGMA, rdp_floor_bound

    for delta in (1e-2, 1e-5, 1e-8):
        for acc in ("rdp", "prv"):
            floor = poisson_epsilon(OPACUS_LARGEST_SIGMA, 1.0, 1000, delta, acc)
            assert floor <= rdp_floor_bound(delta, 1000), (delta, acc)


def test_train_experiment_without_settings_is_rejected():
    exp = {"kind": "train", "train": {"target_epsilons": [], "nonprivate": False}}
    with pytest.raises(ConfigError, match=r"experiments\.x\.train\.target_epsilons: empty"):
        validate_config(exp_cfg(exp), SCHEMA)


def test_duplicate_paper_target_is_rejected():
    a = {"kind": "analysis", "analysis": "one_run_max_attainable", "paper_target": "p/f"}
    cfg = {"experiments": {"a": a, "b": dict(a)}}
    with pytest.raises(ConfigError, match=r"experiments\.b\.paper_target: 'p/f' is already"):
        validate_config(cfg, SCHEMA)


def test_schema_ships_in_the_package():
    from importlib import resources

    text = resources.files("dpaudit").joinpath("schema.yaml").read_text()
    assert yaml.safe_load(text) == load_schema() == load_schema(REPO / "config" / "schema.yaml")
    assert (REPO / "config" / "schema.yaml").resolve() == (REPO / "dpaudit" / "schema.yaml")
    import tomllib

    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "schema.yaml" in pyproject["tool"]["setuptools"]["package-data"]["dpaudit"]


def _merge(base: dict, over: dict) -> dict:
    """Snakemake's merge of --configfile into the config (snakemake.utils.update_config)."""
    from snakemake.utils import update_config

    out = copy.deepcopy(base)
    update_config(out, copy.deepcopy(over))
    return out


PAPER_CONFIGS = sorted((REPO / "config" / "paper").glob("*.yaml"))


@pytest.mark.parametrize("path", PAPER_CONFIGS, ids=lambda p: p.name)
def test_paper_config_leaves_the_default_experiments_alone(path):
    from dpaudit.pipeline.settings import applicable_estimators

    default = load("config.yaml")
    paper = yaml.safe_load(path.read_text())
    merged = _merge(default, paper)
    assert not set(paper["experiments"]) & set(default["experiments"])
    for key in ("data", "compute"):
        assert merged.get(key) == default.get(key), key
    for name, block in default["experiments"].items():
        assert merged["experiments"][name] == block, name
    for name, block in default["estimators"].items():
        assert merged["estimators"][name] == block, name
    validate_config(merged, SCHEMA)
    ref = validate_config(default, SCHEMA)
    for name, block in default["experiments"].items():
        if block["kind"] == "analysis":
            continue  # closed-form tables: no estimator runs on them
        assert applicable_estimators(merged, name) == applicable_estimators(ref, name), name


@pytest.mark.parametrize(
    "block,key",
    [
        ({"method": "one_run", "selections": ["fixed"]}, "estimators.e.fixed"),
        ({"method": "fdp_one_run", "selections": ["fixed"]}, "estimators.e.r"),
        ({"method": "fdp_one_run", "family": "subsampled_gaussian"}, "estimators.e.q"),
        ({"method": "fdp_abstention", "selections": ["fixed"]}, "estimators.e.r"),
    ],
)
def test_estimator_keys_that_need_another_key(block, key):
    cfg = {
        "experiments": {"a": {"kind": "analysis", "analysis": "one_run_max_attainable"}},
        "estimators": {"e": block},
    }
    with pytest.raises(ConfigError, match=rf"config key {key}: "):
        validate_config(cfg, SCHEMA)


def test_abstention_subsampled_gaussian_may_leave_q_and_steps_to_the_score_file():
    """fdp_abstention reads a null q and steps from each score file (its runner errors, naming
    the file, where one lacks them); fdp_one_run still needs q in the config."""
    cfg = {
        "experiments": {"a": {"kind": "analysis", "analysis": "one_run_max_attainable"}},
        "estimators": {"e": {"method": "fdp_abstention", "family": "subsampled_gaussian"}},
    }
    validate_config(cfg, SCHEMA)


def test_lidp_order_above_the_canary_count_is_rejected():
    est = {"l2": {"method": "lidp", "order": 2}}
    exp = {"kind": "train", "design": "lidp", "canaries": {"k": 1}}
    with pytest.raises(ConfigError, match=r"estimator 'l2' has order 2 but canaries\.k has only 1"):
        validate_config(exp_cfg(exp, est), SCHEMA)
    sim = {
        "kind": "simulate",
        "mechanism": "lidp_gaussian",
        "params": {"n": 64, "d": 10, "epsilon": 2.0, "delta": 1e-5},
        "grid": {"K": [1, 4]},
    }
    with pytest.raises(ConfigError, match=r"setting K1 has only 1"):
        validate_config(exp_cfg(sim, est), SCHEMA)
    est["l2"]["below_order"] = "skip"
    validate_config(exp_cfg(sim, est), SCHEMA)


def test_lidp_trials_beyond_the_models_of_a_seed_are_rejected():
    """Table 1 bounds at n trials (estimator ``trials``) need n evaluation trials per seed:
    shards x models_per_shard, half of them tuning trials with a held-out threshold."""
    exp = {
        "kind": "train",
        "design": "lidp",
        "threat_model": "white_box_dot",  # black_box_loss scores no gradient canary
        "canaries": {"type": "random_gradient", "k": 4},
        "shards": 2,
        "train": {"models_per_shard": 64},
    }
    est = {"w": {"method": "lidp", "order": 1, "trials": [16, 65]}}
    with pytest.raises(ConfigError) as err:
        validate_config(exp_cfg(exp, est), SCHEMA)
    msg = str(err.value)
    assert "estimators.w.trials: asks for 65" in msg and "64 of them for evaluation" in msg
    est["w"]["trials"] = [16, 64]
    validate_config(exp_cfg(exp, est), SCHEMA)
    est["w"].update(trials=[128], threshold=0.0)  # a fixed threshold uses every trial
    validate_config(exp_cfg(exp, est), SCHEMA)


def test_clipbkd_k_beyond_the_tail_components_is_rejected():
    """LiDP draws 2K distinct ClipBKD canaries per model from the tail components."""
    exp = {
        "kind": "train",
        "design": "lidp",
        "canaries": {"type": "clipbkd", "k": 16, "first_component": 40, "last_component": 64},
    }
    with pytest.raises(ConfigError, match=r"canaries\.k: design 'lidp' needs 32 .* holds 24"):
        validate_config(exp_cfg(exp, {"w": {"method": "lidp"}}), SCHEMA)


def test_analysis_inputs_must_be_score_experiments_and_only_for_table_analyses():
    est = {"w": {"method": "lidp"}}
    train = {
        "kind": "train",
        "design": "lidp",
        "threat_model": "white_box_dot",
        "canaries": {"type": "random_gradient"},
    }
    info = {"x": {"paper_row": "FMNIST/Linear", "canary": "random_gradient"}}
    params = {
        "experiments": info,
        "n_ref": 64,
        "baseline_estimator": "w",
        "lidp_estimators": {"w": 2},
    }
    table1 = {"kind": "analysis", "analysis": "lidp_table1", "params": params}
    cfg = {"experiments": {"x": train, "t": {**table1, "inputs": ["x"]}}, "estimators": est}
    validate_config(cfg, SCHEMA)
    cfg["experiments"]["t"]["inputs"] = ["nope"]
    with pytest.raises(ConfigError, match=r"experiments\.t\.inputs: 'nope' is not a train"):
        validate_config(cfg, SCHEMA)
    cfg["experiments"]["t"]["inputs"] = []
    with pytest.raises(ConfigError, match=r"experiments\.t\.inputs: analysis 'lidp_table1' reads"):
        validate_config(cfg, SCHEMA)
    closed = {"kind": "analysis", "analysis": "selection_table4", "inputs": ["x"]}
    cfg["experiments"]["t"] = closed
    with pytest.raises(ConfigError, match=r"experiments\.t\.inputs: analysis 'selection_table4'"):
        validate_config(cfg, SCHEMA)


def test_reproduce_takes_a_printed_number_or_a_claim_never_both_nor_neither():
    def cfg(check):
        return {
            "experiments": {
                "a": {
                    "kind": "analysis",
                    "analysis": "one_run_randomized_response",
                    "params": {"epsilon": 4.0, "delta": 1.0e-5},
                    "reproduce": [check],
                }
            }
        }

    validate_config(cfg({"quantity": "q", "paper": 1.0}), SCHEMA)
    validate_config(cfg({"quantity": "q", "claim": {"test": "increasing", "x": "x"}}), SCHEMA)
    validate_config(cfg({"quantity": "q", "claim": {"test": "at_least", "value": 0.5}}), SCHEMA)
    for bad in (
        {"quantity": "q"},
        {"quantity": "q", "paper": 1.0, "claim": {"test": "flat", "x": "x"}},
        {"quantity": "q", "claim": {"test": "increasing"}},  # along which column?
        {"quantity": "q", "claim": {"test": "at_most"}},  # than what?
        {"quantity": "q", "claim": {"test": "bigger", "x": "x"}},
    ):
        with pytest.raises(ConfigError, match="reproduce"):
            validate_config(cfg(bad), SCHEMA)


# ------------------------------------------------------------------ issue 11 items


def test_dirac_canaries_beyond_the_parameter_count_are_rejected():
    """Dirac canaries take distinct coordinates: m above the model's parameter count on the
    data (digits, MLP 64-8-10: 610 parameters) is an error naming canaries.m, before any job."""
    exp = {
        "kind": "train",
        "threat_model": "white_box_dot",
        "dataset": {"name": "digits"},
        "model": {"name": "mlp", "hidden": [8]},
        "canaries": {"type": "dirac", "m": 611},
        "train": {"target_epsilons": [4], "nonprivate": False},
    }
    with pytest.raises(ConfigError) as err:
        validate_config(exp_cfg(exp), SCHEMA)
    msg = str(err.value)
    assert "experiments.x.canaries.m: 611 Dirac canaries" in msg and "610 parameters" in msg
    exp["canaries"]["m"] = 610
    validate_config(exp_cfg(exp), SCHEMA)
    # in a grid, the point is named
    exp["grid"] = {"canaries.m": [10, 1000]}
    with pytest.raises(ConfigError, match="canaries.m: 1000 Dirac .* grid point 'm1000'"):
        validate_config(exp_cfg(exp), SCHEMA)


MULTI_RUN_CP = {"m": {"method": "multi_run_cp"}}


def test_dirac_coordinate_is_checked_against_the_model_and_the_canary_type():
    """canaries.dirac_coordinate (Xiang, Wang, Wang 2024, Section 4.1: Z_D on the first
    coordinate) must leave the pool inside the model's parameters (digits, logreg: 650) and
    needs canaries.type dirac; both errors name the key and the allowed values."""
    exp = {
        "kind": "train",
        "design": "multi_run",
        "threat_model": "white_box_dot",
        "dataset": {"name": "digits"},
        "model": {"name": "logreg"},
        "canaries": {"type": "dirac", "dirac_coordinate": 650},
        "train": {"target_epsilons": [4], "nonprivate": False},
    }
    with pytest.raises(ConfigError) as err:
        validate_config(exp_cfg(exp, MULTI_RUN_CP), SCHEMA)
    msg = str(err.value)
    assert "experiments.x.canaries.dirac_coordinate: 650" in msg and "0..649" in msg
    for ok in (0, 649, None):
        exp["canaries"]["dirac_coordinate"] = ok
        validate_config(exp_cfg(exp, MULTI_RUN_CP), SCHEMA)
    exp["canaries"] = {"type": "in_distribution", "dirac_coordinate": 0}
    exp["dataset"]["canary_pool"] = 10
    with pytest.raises(ConfigError, match="canaries.dirac_coordinate: set to 0 .* allowed: null"):
        validate_config(exp_cfg(exp, MULTI_RUN_CP), SCHEMA)
    exp["canaries"] = {"type": "dirac", "dirac_coordinate": -1}
    with pytest.raises(ConfigError, match="dirac_coordinate"):
        validate_config(exp_cfg(exp, MULTI_RUN_CP), SCHEMA)


@pytest.mark.parametrize(
    ("dataset", "model", "why"),
    [
        ({"name": "digits"}, {"name": "lenet"}, "does not fit the data"),  # 8x8 is too small
        ({"name": "location"}, {"name": "cnn"}, "needs image inputs"),
    ],
)
def test_a_model_that_does_not_fit_the_data_is_rejected(dataset, model, why):
    exp = {"kind": "train", "dataset": dataset, "model": model, "train": {"target_epsilons": [4]}}
    with pytest.raises(ConfigError) as err:
        validate_config(exp_cfg(exp), SCHEMA)
    msg = str(err.value)
    assert f"experiments.x.model: {model['name']!r}" in msg and why in msg


def test_one_run_fixed_fraction_satisfies_the_fixed_selection():
    est = {"o": {"method": "one_run", "selections": ["fixed"], "fixed_fraction": 0.5}}
    validate_config(exp_cfg({"kind": "train"}, est), SCHEMA)
    est["o"]["fixed"] = [1, 1]
    with pytest.raises(ConfigError, match="estimators.o.fixed_fraction: set fixed or"):
        validate_config(exp_cfg({"kind": "train"}, est), SCHEMA)


_CP = {"cp": {"method": "multi_run_cp"}, "or": {"method": "one_run"}}
_TUNING = {
    "kind": "train",
    "design": "multi_run",
    "threat_model": "white_box_dot",
    "canaries": {"type": "dirac"},
    "train": {"nonprivate": False, "target_epsilons": [4]},
    "selection": {"setup": "etcv"},
}


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"design": "one_run"}, "experiments.x.design: 'one_run'; a selection (tuning) audit"),
        ({"threat_model": "black_box_loss"}, "experiments.x.threat_model: 'black_box_loss'"),
        ({"canaries": {"type": "clipbkd"}}, "experiments.x.canaries.type: 'clipbkd'"),
        ({"train": {"nonprivate": True}}, "experiments.x.train.nonprivate: True"),
        ({"train": {"nonprivate": False, "noise_multiplier": 1.0}}, "train.noise_multiplier"),
        ({"train": {"nonprivate": False, "engine": "opacus"}}, "needs train.engine auto"),
    ],
)
def test_selection_audit_needs_a_tuning_design(change, key):
    """selection (the tuning audit): multi_run, white_box_dot, a dirac or natural canary, the
    vectorised engine, noise calibrated to each target epsilon; the valid block passes."""
    validate_config(exp_cfg(_TUNING, _CP), SCHEMA)
    with pytest.raises(ConfigError, match=re.escape(key)):
        validate_config(exp_cfg({**_TUNING, **change}, _CP), SCHEMA)


@pytest.mark.parametrize(
    ("selection", "key"),
    [
        ({"setup": "ntxx"}, "experiments.x.selection.setup"),
        ({"nu": 1.0}, "experiments.x.selection.nu"),
        ({"lrs": []}, "experiments.x.selection.lrs"),
        ({"trials": 0}, "experiments.x.selection.trials"),
        ({"statistic": "lambda_c"}, "experiments.x.selection.statistic"),
    ],
)
def test_selection_block_values_are_checked(selection, key):
    with pytest.raises(ConfigError, match=re.escape(key)):
        validate_config(exp_cfg({**_TUNING, "selection": selection}, _CP), SCHEMA)


@pytest.mark.parametrize(
    ("dataset", "message"),
    [
        ({"name": "digits", "n_train": 1500}, r"dataset.n_train: 1500 .* has 1438"),
        ({"name": "digits", "n_test": 300, "canary_pool": 100}, r"dataset.n_test: .* = 400 .* 359"),
        ({"name": "location", "n_train": 4500}, r"dataset.n_train: .* has 4008"),
        ({"name": "cifar10", "n_test": 9000, "canary_pool": 5000}, r"n_test \+ canary_pool"),
        ({"name": "mnist", "n_train": 70000, "classes": [0, 1]}, "before the class filter"),
    ],
)
def test_dataset_sizes_beyond_the_source_splits_are_config_errors(dataset, message):
    cfg = {
        "experiments": {"x": {"kind": "train", "dataset": dataset}},
        "estimators": {"o": {"method": "one_run"}},
    }
    with pytest.raises(ConfigError, match=message):
        validate_config(cfg, SCHEMA)


def test_the_source_split_sizes_are_those_prepare_dataset_makes(tmp_path):
    """The digits split the check assumes is the split prepare_dataset writes."""
    from dpaudit.data.catalog import source_split_sizes
    from dpaudit.data.prepare import load_prepared, prepare_dataset

    out = tmp_path / "d.npz"
    prepare_dataset("digits", {"canary_pool": 9}, str(tmp_path), None, str(out))
    arrays, _ = load_prepared(out)
    n_train, n_test = source_split_sizes("digits", {})
    assert arrays["y_train"].size == n_train
    assert arrays["y_test"].size + arrays["y_canary"].size == n_test


def _shuffling_exp(**over: dict) -> dict:
    """A small shuffling audit (config/cpu/shuffling.yaml's keys) with blocks overridden."""
    exp = {
        "kind": "train",
        "design": "multi_run",
        "threat_model": "per_step_dot",
        "estimators": ["cp"],
        "dataset": {"name": "synthetic", "n_train": 99},
        "canaries": {
            "type": "random_gradient",
            "neighbouring": "zero_out",
            "adversary": "partially_informed",
            "statistic": "likelihood_ratio",
        },
        "train": {"target_epsilons": [1], "nonprivate": False, "epochs": 1, "batch_size": 10},
    }
    for block, keys in over.items():
        exp[block] = {**exp[block], **keys} if isinstance(exp.get(block), dict) else keys
    return {"experiments": {"sh": exp}, "estimators": {"cp": {"method": "multi_run_cp"}}}


@pytest.mark.parametrize(
    "over,match",
    [
        (
            {"train": {"sampler": "partial_shuffle", "buffer_size": 500}},
            r"experiments\.sh\.train\.buffer_size: 500 is larger than a model's dataset",
        ),
        (
            {"train": {"sampler": "partial_shuffle"}},
            r"experiments\.sh\.train\.buffer_size: train\.sampler partial_shuffle needs",
        ),
        (
            {"train": {"sampler": "shuffle", "buffer_size": 50}},
            r"experiments\.sh\.train\.buffer_size: only train\.sampler partial_shuffle",
        ),
        (
            {"canaries": {"neighbouring": "add_remove"}},
            r"experiments\.sh\.canaries\.adversary: 'partially_informed' needs design multi_run",
        ),
        (
            {"canaries": {"adversary": "batch_worst_case", "type": "random_input"}},
            r"experiments\.sh\.canaries\.adversary: 'batch_worst_case' needs",
        ),
        (
            {"canaries": {"statistic": "sum", "prefix_batches": 3}},
            r"experiments\.sh\.canaries\.prefix_batches: "
            r"needs canaries\.statistic likelihood_ratio",
        ),
        (
            {"threat_model": "white_box_dot"},
            r"experiments\.sh\.canaries\.statistic: scores the per-step observations",
        ),
        (
            {"train": {"nonprivate": True}},
            r"experiments\.sh\.train\.nonprivate: true, but canaries\.statistic likelihood_ratio",
        ),
        (
            {"train": {"steps": 15, "epochs": 1}},
            r"experiments\.sh\.train\.steps: 15 steps are not whole epochs of 10 steps",
        ),
        (
            {"canaries": {"prefix_batches": 11}},
            r"experiments\.sh\.canaries\.prefix_batches: 11 is more than the 10 batches",
        ),
    ],
)
def test_shuffling_audit_bad_input_names_the_key(over, match):
    cfg = _shuffling_exp(**over)
    with pytest.raises(ConfigError, match=match):
        validate_config(cfg, SCHEMA)


def test_shuffling_audit_good_input_passes():
    cfg = _shuffling_exp(
        train={"sampler": "partial_shuffle", "buffer_size": 50}, canaries={"prefix_batches": 10}
    )
    validate_config(cfg, SCHEMA)


def test_dirac_placement_needs_dirac_canaries_and_no_fixed_coordinate():
    """canaries.dirac_placement: low_gradient places Dirac canaries by the data (Steinke et
    al. 2023, Section 4.1: the white-box adversary chooses its gradients); with another canary
    type or with canaries.dirac_coordinate it is an error naming the key and what is allowed;
    an unknown value is rejected by the schema."""
    exp = {
        "kind": "train",
        "design": "one_run",
        "threat_model": "white_box_dot",
        "dataset": {"name": "digits"},
        "model": {"name": "logreg"},
        "canaries": {"type": "dirac", "m": 100, "dirac_placement": "low_gradient"},
        "train": {"target_epsilons": [4], "nonprivate": False},
    }
    validate_config(exp_cfg(exp), SCHEMA)
    exp["canaries"]["dirac_coordinate"] = 0
    with pytest.raises(
        ConfigError, match="canaries.dirac_placement: 'low_gradient' .*dirac_coordinate is 0"
    ):
        validate_config(exp_cfg(exp), SCHEMA)
    exp["canaries"] = {"type": "in_distribution", "m": 100, "dirac_placement": "low_gradient"}
    exp["dataset"]["canary_pool"] = 200
    with pytest.raises(ConfigError, match="canaries.dirac_placement: set to 'low_gradient'"):
        validate_config(exp_cfg(exp), SCHEMA)
    exp["canaries"] = {"type": "dirac", "dirac_placement": "lowest"}
    with pytest.raises(ConfigError, match="dirac_placement"):
        validate_config(exp_cfg(exp), SCHEMA)


@pytest.mark.parametrize(
    ("grid", "words"),
    [
        ({"train.delta": [1e-5, 1e-6]}, "grid.train.delta: its audit-table column 'delta'"),
        ({"canaries.seed": [0, 1]}, "column 'seed' (the key's last part) is taken by the table"),
        ({"canaries.statistic": ["sum"], "selection.statistic": ["lambda_a"]}, "another grid key"),
    ],
)
def test_grid_key_whose_column_the_audit_table_has_is_an_error(grid, words):
    """A grid key's audit-table column (its last part) must not replace a column every audit
    row has (dpaudit.audit.RESERVED_COLUMNS) nor another grid key's."""
    with pytest.raises(ConfigError, match=re.escape(words)):
        validate_config(exp_cfg({"kind": "train", "grid": grid}), SCHEMA)
