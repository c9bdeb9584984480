"""Config guards (issue 30, points 7, 8 and 9): values never merged or dropped silently, a grid
too large for the DAG stopped before it is built, late failures caught at validation; each
error names the key (or the file and both lines)."""

from __future__ import annotations

import copy
import math
import re
import time

import pytest

from dpaudit.config import ConfigError, load_config_file, validate_config
from dpaudit.pipeline.settings import train_settings
from tests.config.test_config import SCHEMA, exp_cfg

_EST = {"o": {"method": "one_run"}}


def _rr(**params) -> dict:
    """A small simulate experiment (one_run randomized response)."""
    return {
        "kind": "simulate",
        "mechanism": "one_run_rr",
        "params": {"m": 100, "epsilon": 1.0, **params},
    }


def _bgm(**params) -> dict:
    return {
        "kind": "simulate",
        "mechanism": "bgm",
        "params": {"runs_per_hypothesis": 10, "steps_per_epoch": 2, "sigma": 1.0, **params},
    }


def _rejects(cfg: dict, *needles: str) -> str:
    with pytest.raises(ConfigError) as err:
        validate_config(cfg, SCHEMA)
    msg = str(err.value)
    for needle in needles:
        assert needle in msg, msg
    return msg


# ------------------------------------------------------------------ 7: duplicate YAML keys


_DUPLICATES = """\
experiments:
  a:
    kind: simulate
    mechanism: one_run_rr
    params: {m: 100, epsilon: 1.0}
    seeds: [0]
    seeds: [1, 2]
  a:
    kind: analysis
estimators:
  o: {method: one_run}
  o: {method: one_run, confidence: 0.9}
"""


def test_duplicate_keys_are_named_with_both_lines(tmp_path):
    path = tmp_path / "dup.yaml"
    path.write_text(_DUPLICATES)
    with pytest.raises(ConfigError, match=r"config file .*dup\.yaml: duplicate key\(s\)"):
        load_config_file(path)  # what dpaudit audit --config reads
    from dpaudit.config.duplicate_keys import duplicate_keys

    found = duplicate_keys(path)
    assert "experiments.a (lines 2 and 8)" in found  # an experiment
    assert "experiments.a.seeds (lines 6 and 7)" in found  # an inner key
    assert "estimators.o (lines 11 and 12)" in found  # an estimator


def test_merge_keys_may_be_overridden_and_aliases_are_walked_once(tmp_path):
    path = tmp_path / "merge.yaml"
    path.write_text(
        "base: &b {confidence: 0.9, method: one_run}\n"
        "estimators:\n  o: {<<: *b, confidence: 0.95}\n  p: *b\n"
    )
    assert load_config_file(path)["estimators"]["o"]["confidence"] == 0.95
    from dpaudit.config.duplicate_keys import duplicate_keys

    assert duplicate_keys(path) == []


@pytest.mark.slow
def test_snakemake_configfile_with_a_duplicate_key_fails_naming_it(tmp_path):
    """Snakemake loads --configfile itself; rules/common.smk re-reads each file it read."""
    from tests.workflow.test_pipeline_e2e import snakemake

    path = tmp_path / "dup.yaml"
    path.write_text(
        "experiments:\n  s: {kind: simulate, mechanism: one_run_rr, params: {m: 10, epsilon: 1}}\n"
        "estimators:\n  one_run: {method: one_run}\n  one_run: {method: attack_metrics}\n"
    )  # a valid config once YAML has dropped the first one_run block
    workdir = tmp_path / "w"
    workdir.mkdir()
    done = snakemake(workdir, "-n", "--nolock", configfile=path, check=False)
    assert done.returncode != 0
    assert "duplicate key(s) estimators.one_run (lines 4 and 5)" in done.stdout + done.stderr


def test_issue36_item6_duplicates_inside_one_flow_mapping_are_caught(tmp_path):
    """Issue 36, item 6: ``train: {epochs: 3, epochs: 300}`` (both keys on one line) ran 300
    epochs; every shipped config writes its blocks as one-line flow mappings."""
    from dpaudit.config.duplicate_keys import duplicate_keys

    path = tmp_path / "flow.yaml"
    path.write_text(
        "experiments:\n  x: {kind: train, train: {epochs: 3, lr: 0.1, epochs: 300}}\n"
        "estimators: {o: {method: one_run}, o: {method: attack_metrics}}\n"
    )
    assert duplicate_keys(path) == [
        "experiments.x.train.epochs (line 2, columns 28 and 48)",
        "estimators.o (line 3, columns 14 and 36)",
    ]
    with pytest.raises(ConfigError, match=r"flow\.yaml: duplicate key\(s\) experiments\.x\.train"):
        load_config_file(path)


def test_issue36_item6_duplicates_given_with_snakemake_config_are_caught():
    """Issue 36, item 6: Snakemake's ``--config`` keeps the last of a key given twice, as
    arguments or inside one value's mapping; each is named with its argument."""
    from dpaudit.config.duplicate_keys import check_duplicate_config_args, duplicate_config_args
    from dpaudit.config.errors import GuardError

    args = ["max_jobs=10", "data={root: d, root: e}", "max_jobs=20"]
    assert duplicate_config_args(args) == [
        "data.root (--config argument 2, columns 2 and 11)",
        "max_jobs (--config arguments 1 and 3)",
    ]
    with pytest.raises(GuardError, match=r"--config gives duplicate key\(s\) data\.root"):
        check_duplicate_config_args(args)
    assert duplicate_config_args(["max_jobs=10", "data={root: d}", "x"]) == []
    assert duplicate_config_args(None) == []


@pytest.mark.slow
def test_issue36_item6_snakemake_config_duplicates_stop_the_workflow(tmp_path):
    """Issue 36, item 6: rules/common.smk checks the ``--config`` arguments as given."""
    from tests.workflow.test_pipeline_e2e import snakemake

    path = tmp_path / "ok.yaml"
    path.write_text(
        "experiments:\n  s: {kind: simulate, mechanism: one_run_rr, params: {m: 10, epsilon: 1}}\n"
        "estimators:\n  one_run: {method: one_run}\n"
    )
    workdir = tmp_path / "w"
    workdir.mkdir()
    args = ("-n", "--nolock", "--config", "max_jobs=100", "max_jobs=100000")
    done = snakemake(workdir, *args, configfile=path, check=False)
    assert done.returncode != 0
    assert "max_jobs (--config arguments 1 and 2)" in done.stdout + done.stderr


# ------------------------------------------------------------------ 7: setting names


def test_targets_equal_to_six_digits_are_an_error_naming_both():
    exp = {"kind": "train", "train": {"target_epsilons": [4.0000001, 4.0000002]}}
    _rejects(
        exp_cfg(exp, _EST),
        "experiments.x.train.target_epsilons",
        "4.0000001 and 4.0000002 both name setting 'eps4'",
    )
    exp["train"]["target_epsilons"] = [4, 4.0]  # the same target twice
    _rejects(exp_cfg(exp, _EST), "4.0 and 4.0 both name setting 'eps4'")


@pytest.mark.parametrize(("target", "name"), [(1e6, "eps1e06"), (2.5e-7, "eps2.5em07")])
def test_targets_with_an_exponent_make_safe_setting_names(target, name):
    exp = {"kind": "train", "train": {"target_epsilons": [target], "accountant": "gdp"}}
    assert list(train_settings(exp)) == [name]
    from dpaudit.config.guards import SETTING_PATTERN

    assert re.fullmatch(SETTING_PATTERN, name)  # the setting wildcard's constraint


def test_grid_points_of_one_name_are_an_error_naming_both():
    exp = {**_rr(), "grid": {"epsilon": [1.0000001, 1.0000002]}}
    _rejects(exp_cfg(exp, _EST), "experiments.x.grid", "{'epsilon': 1.0000001} and")


# ------------------------------------------------------------------ 8: job count


def test_a_grid_beyond_max_jobs_fails_before_any_setting_is_built():
    exp = {
        **_rr(),
        "grid": {"m": list(range(1, 1001)), "epsilon": [float(e) for e in range(1, 1001)]},
    }
    start = time.perf_counter()
    msg = _rejects(
        exp_cfg(exp, _EST),
        "config key experiments.x.grid.m",
        "about 2,000,006 jobs",
        "max_jobs = 100,000",
        "--config max_jobs=",
    )
    assert time.perf_counter() - start < 5, msg  # no 10^6 settings built


def test_max_jobs_is_the_override():
    exp = {**_rr(), "grid": {"m": [100, 200, 300]}, "seeds": list(range(10))}
    cfg = exp_cfg(exp, _EST)
    validate_config(copy.deepcopy(cfg), SCHEMA)
    _rejects({**cfg, "max_jobs": 20}, "experiments.x.seeds", "about 39 jobs", "max_jobs = 20")


# ------------------------------------------------------------------ 9: late failures


def test_one_run_k_values_all_above_m():
    est = {"o": {"method": "one_run", "k_values": [500, 1000]}}
    _rejects(exp_cfg(_rr(), est), "estimators.o.k_values", "m = 100", "at least one k <= 100")
    est["o"]["k_values"] = [50, 500]  # one k <= m is enough
    validate_config(exp_cfg(_rr(), est), SCHEMA)


def test_one_run_k_values_against_a_train_grid():
    exp = {"kind": "train", "grid": {"canaries.m": [50, 1000]}}
    est = {"o": {"method": "one_run", "k_values": [200]}}
    _rejects(exp_cfg(exp, est), "estimators.o.k_values", "m = 50", "grid point 'm50'")


@pytest.mark.parametrize("section", ["experiments", "estimators"])
def test_integer_names_are_rejected(section):
    cfg = exp_cfg(_rr(), _EST)
    cfg[section] = {7: next(iter(cfg[section].values()))}
    _rejects(cfg, f"config key {section}: 7 has the wrong type; expected string")


@pytest.mark.parametrize("section", ["experiments", "estimators"])
def test_names_are_limited_to_64_characters(section):
    cfg = exp_cfg(_rr(), _EST)
    cfg[section] = {"a" * 300: next(iter(cfg[section].values()))}
    _rejects(cfg, f"config key {section}:", "is too long", "at most 64 characters")


@pytest.mark.parametrize("value", [math.inf, math.nan])
def test_a_target_epsilon_must_be_finite(value):
    exp = {"kind": "train", "train": {"target_epsilons": [4, value]}}
    _rejects(exp_cfg(exp, _EST), "config key experiments.x.train.target_epsilons[1]")


@pytest.mark.parametrize(
    ("params", "key", "needle"),
    [
        ({"m": "100"}, "params.m", "'100' has type str; mechanism 'one_run_rr' takes int"),
        ({"m": 100.0}, "params.m", "takes int for 'm'"),
        ({"epsilon": True}, "params.epsilon", "True has type bool"),
        ({"epsilon": "1.0"}, "params.epsilon", "takes float for 'epsilon'"),
    ],
)
def test_mechanism_parameters_of_the_wrong_type(params, key, needle):
    _rejects(exp_cfg(_rr(**params), _EST), f"config key experiments.x.{key}", needle)


def test_mechanism_parameters_in_grid_and_points_are_typed_and_required_ones_given():
    exp = {**_rr(), "grid": {"m": [10, "20"]}}
    _rejects(exp_cfg(exp, _EST), "config key experiments.x.grid.m[1]: '20' has type str")
    exp = {**_rr(), "points": [{"epsilon": 1.0}, {"epsilon": [2.0]}]}
    _rejects(exp_cfg(exp, _EST), "config key experiments.x.points[1].epsilon")
    exp = {"kind": "simulate", "mechanism": "one_run_rr", "params": {"m": 100}}
    _rejects(exp_cfg(exp, _EST), "experiments.x.params", "needs ['epsilon']")


@pytest.mark.parametrize("value", [math.nan, True, "1.0"])
def test_claimed_epsilon_nan_or_boolean(value):
    cfg = exp_cfg(_bgm(claimed_epsilon=value), {"c": {"method": "multi_run_cp"}})
    _rejects(cfg, "config key experiments.x.params.claimed_epsilon")
    good = exp_cfg(_bgm(claimed_epsilon=2.0), {"c": {"method": "multi_run_cp"}})
    validate_config(good, SCHEMA)


def test_paper_target_equal_to_another_experiments_output():
    cfg = {
        "experiments": {"a": _rr(), "b": {**_rr(), "paper_target": "a/audit"}},
        "estimators": _EST,
    }
    _rejects(
        cfg, "experiments.b.paper_target", "results/a/audit.csv", "audit table of experiments.a"
    )


@pytest.mark.parametrize("value", ["a/b", "two words", "x\\y"])
def test_grid_strings_that_cannot_be_path_components(value):
    exp = {
        "kind": "simulate",
        "mechanism": "lidp_gaussian",
        "params": {"n": 10, "d": 10, "epsilon": 1.0, "delta": 1e-5},
        "grid": {"K": ["sqrt_n", value]},
    }
    _rejects(
        exp_cfg(exp, {"l": {"method": "lidp"}}), "config key experiments.x.grid.K", repr(value)
    )


def test_long_setting_names_are_rejected():
    exp = {**_rr(), "points": [{"m": 10**199, "epsilon": 1.0}]}  # a 201-digit name part
    _rejects(exp_cfg(exp, _EST), "experiments.x", "at most 200 characters")


@pytest.mark.parametrize(
    ("where", "key"),
    [
        ({"description": r"Bound $\frac{1$: details"}, "experiments.x.description"),
        ({"figure": {"xlabel": r"$\alpha^$"}}, "experiments.x.figure.xlabel"),
        ({"figure": {"title": r"$\notacommand$"}}, "experiments.x.figure.title"),
        ({"figure": {"labels": {"m": {"100": r"$m = {100$"}}}}, "experiments.x.figure.labels.m"),
    ],
)
def test_bad_mathtext_in_a_description_or_label(where, key):
    _rejects(exp_cfg({**_rr(), **where}, _EST), f"config key {key}", "mathtext")


def test_good_mathtext_and_lone_dollars_pass():
    exp = {**_rr(), "description": r"Costs $5 each", "figure": {"xlabel": r"$\varepsilon$ (m)"}}
    validate_config(exp_cfg(exp, _EST), SCHEMA)
    est = {"o": {"method": "one_run", "label": r"$\frac{1}{2}$-split"}}
    validate_config(exp_cfg(_rr(), est), SCHEMA)
    est["o"]["label"] = r"$\frac{1}$"
    _rejects(exp_cfg(_rr(), est), "config key estimators.o.label")
