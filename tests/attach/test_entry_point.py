"""train.entry_point: the user's own training function as a pipeline training step.

Bad entry points fail at config validation (before any job) or at job time with an error naming
``experiments.<name>.train.entry_point``; a tiny experiment runs end to end through Snakemake and
its score file, audit table and verdict table are the pipeline's ordinary ones.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from dpaudit import scores
from dpaudit.attach.pipeline import (
    EntryPointError,
    run_entry_point,
    source_hash,
    train_entry_point,
)
from dpaudit.config import ConfigError, validate_config
from dpaudit.pipeline.params import train_params
from dpaudit.pipeline.settings import setting_columns
from dpaudit.training.job import complete_run_spec, train_job

REPO = Path(__file__).resolve().parents[2]
KEY = "experiments.own.train.entry_point"

#: A user's module: a "training" whose noisy sums are Gaussian (numpy only, milliseconds).
USER_MODULE = """
import numpy as np


def train(data, audit, seed, device):
    c = audit.gradient_canaries(n_params=50, sample_rate=0.5, clip_norm=1.0)
    rng = np.random.default_rng(seed)
    for _ in range(audit.train["epochs"]):
        noisy = c.canary_gradient(c.draw_step()) + rng.normal(0, 0.5, 50)
        c.observe(noisy)
    return {"noise_multiplier": 0.5, "sample_rate": 0.5, "steps": c.steps,
            "test_accuracy": 0.5, "meta": {"n_train": len(data["y_train"])}}


def eps(data, audit, seed, device):
    c = audit.gradient_canaries(n_params=50, sample_rate=0.5, clip_norm=1.0)
    c.draw_step()
    c.observe(np.zeros(50))
    return {"claimed_epsilon": 3.0}


def two_args(data, audit):
    return {}


def extra_required(data, audit, seed, device, lr):
    return {}


def not_a_dict(data, audit, seed, device):
    audit.gradient_canaries(n_params=50, sample_rate=0.5, clip_norm=1.0)
    return [1.0]


def no_claim(data, audit, seed, device):
    c = audit.gradient_canaries(n_params=50, sample_rate=0.5, clip_norm=1.0)
    c.draw_step()
    c.observe(np.zeros(50))
    return {"test_accuracy": 0.9}


def half_claim(data, audit, seed, device):
    c = audit.gradient_canaries(n_params=50, sample_rate=0.5, clip_norm=1.0)
    c.draw_step()
    c.observe(np.zeros(50))
    return {"noise_multiplier": 1.0, "steps": 3}


def unknown_key(data, audit, seed, device):
    return {"claimed_epsilon": 1.0, "epsilon": 1.0}


def no_canaries(data, audit, seed, device):
    return {"claimed_epsilon": 1.0}


def two_sets(data, audit, seed, device):
    audit.gradient_canaries(n_params=50, sample_rate=0.5, clip_norm=1.0)
    audit.gradient_canaries(n_params=50, sample_rate=0.5, clip_norm=1.0)


def no_steps(data, audit, seed, device):
    audit.gradient_canaries(n_params=50, sample_rate=0.5, clip_norm=1.0)
    return {"claimed_epsilon": 1.0}


NOT_CALLABLE = 3

#: What ``settings`` returns beside its canaries' true settings (a test sets it).
RETURN = {}


def settings(data, audit, seed, device):
    c = audit.gradient_canaries(n_params=50, sample_rate=0.5, clip_norm=1.0)
    for _ in range(3):
        c.observe(c.canary_gradient(c.draw_step()))
    return {"noise_multiplier": 0.5, "sample_rate": 0.5, "steps": c.steps, **RETURN}


def fails(data, audit, seed, device):
    audit.gradient_canaries(n_params=50, sample_rate=0.5, clip_norm=1.0)
    raise RuntimeError("out of memory in my loop")


def exits(data, audit, seed, device):
    import sys

    audit.gradient_canaries(n_params=50, sample_rate=0.5, clip_norm=1.0)
    sys.exit(0)
"""


@pytest.fixture()
def user_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``dpaudit_user_train.py`` on sys.path (a fresh name per test: no stale import)."""
    name = "dpaudit_user_train"
    path = tmp_path / f"{name}.py"
    path.write_text(USER_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)
    return path


def _config(entry_point: str, **exp) -> dict:
    block = {
        "kind": "train",
        "design": "one_run",
        "threat_model": "per_step_dot",
        "canaries": {"type": "dirac", "m": 20},
        "train": {"target_epsilons": [1], "nonprivate": False, "entry_point": entry_point},
        **exp,
    }
    return {"experiments": {"own": block}, "estimators": {"one_run": {"method": "one_run"}}}


def _run_spec(entry_point: str) -> dict:
    spec = complete_run_spec(
        {
            "design": "one_run",
            "threat_model": "per_step_dot",
            "canaries": {"type": "dirac", "m": 20},
            "train": {"entry_point": entry_point, "epochs": 3},
            "target_epsilon": 1.0,
        }
    )
    return spec


DATA = {"y_train": np.zeros(7, dtype=np.int64)}


def _run(entry_point: str):
    return run_entry_point(
        DATA,
        experiment="own",
        setting="s",
        seed=0,
        shard=0,
        run_spec=_run_spec(entry_point),
        device="cpu",
    )


def test_a_good_entry_point_validates_and_gives_an_ordinary_score_file(user_module) -> None:
    config = validate_config(_config("dpaudit_user_train:train"))
    assert config["experiments"]["own"]["train"]["entry_point"] == "dpaudit_user_train:train"
    sf = _run("dpaudit_user_train:train")
    assert sf.meta["design"] == "one_run" and sf.n_canaries == 20 and sf.n_trials == 1
    assert sf.meta["threat_model"] == "per_step_dot"
    assert sf.meta["claim_source"] == "accountant"
    assert sf.meta["claim_settings"] == {"noise_multiplier": 0.5, "sample_rate": 0.5, "steps": 3}
    assert sf.meta["entry_point"] == "dpaudit_user_train:train"
    assert sf.meta["n_train"] == 7 and sf.meta["test_accuracy"] == 0.5
    assert sf.meta["target_epsilon"] == 1.0
    given = _run("dpaudit_user_train:eps")
    assert given.meta["claimed_epsilon"] == 3.0 and given.meta["claim_source"] == "given"
    assert "test_accuracy" not in given.meta  # not given: not invented (JSON has no NaN)


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        ("dpaudit_no_such_module:train", "cannot import module 'dpaudit_no_such_module'"),
        ("dpaudit_user_train:missing", "has no attribute 'missing'"),
        ("dpaudit_user_train.train", "is not 'package.module:function'"),
        ("dpaudit_user_train:", "is not 'package.module:function'"),
        ("dpaudit_user_train:NOT_CALLABLE", "is not callable"),
        ("dpaudit_user_train:two_args", "fn(data, audit, seed, device) -> dict"),
        ("dpaudit_user_train:extra_required", "other parameters need defaults"),
    ],
)
def test_a_bad_entry_point_fails_validation_naming_the_key(user_module, spec, why) -> None:
    with pytest.raises(ConfigError) as err:
        validate_config(_config(spec))
    assert KEY in str(err.value) and why in str(err.value)


def test_a_bad_entry_point_in_points_names_the_point(user_module) -> None:
    config = _config("dpaudit_user_train:train")
    config["experiments"]["own"]["points"] = [
        {"train.entry_point": "dpaudit_user_train:train"},
        {"train.entry_point": "dpaudit_user_train:two_args"},
    ]
    with pytest.raises(ConfigError, match=r"experiments\.own\.points\[1\]\.train\.entry_point"):
        validate_config(config)


@pytest.mark.parametrize(
    ("extra", "key"), [({"design": "lidp"}, "design"), ({"shards": 2}, "shards")]
)
def test_an_entry_point_needs_one_run_and_one_shard(user_module, extra, key) -> None:
    config = _config("dpaudit_user_train:train", **extra)
    config["estimators"]["lidp"] = {"method": "lidp"}
    with pytest.raises(ConfigError, match=rf"experiments\.own\.{key}: .*train\.entry_point"):
        validate_config(config)


@pytest.mark.parametrize(
    ("fn", "why"),
    [
        ("not_a_dict", "returned list; it must return a dict"),
        ("no_claim", "must return the claim"),
        ("half_claim", "must return the claim"),
        ("unknown_key", "unknown key(s) ['epsilon']"),
        ("no_canaries", "made no canaries"),
        ("two_sets", "second set of canaries"),
        ("no_steps", "no noisy step was observed"),
    ],
)
def test_a_bad_return_fails_at_job_time_naming_the_key(user_module, fn, why) -> None:
    with pytest.raises(EntryPointError) as err:
        _run(f"dpaudit_user_train:{fn}")
    assert KEY in str(err.value) and why in str(err.value)


def _returning(**returned):
    """The ``settings`` entry point, returning ``returned`` beside the true settings."""
    importlib.import_module("dpaudit_user_train").RETURN = returned
    return _run("dpaudit_user_train:settings")


def test_issue36_item2_returned_meta_adds_facts_and_cannot_replace_the_claim(user_module):
    """Issue 36, item 2: ``meta: {"claimed_epsilon": 50}`` was audited at 50, ``design`` /
    ``experiment`` wrote an invalid file; every key the pipeline writes into the file (derived
    from the file itself, not a list) and every key it owns is refused, naming the entry
    point's config key and the meta key; a new key is added."""
    good = _returning(meta={"my_lr": 0.1})
    assert good.meta["my_lr"] == 0.1 and good.meta["claimed_epsilon"] < 50
    for name in [*sorted(good.meta.keys() - {"my_lr"}), "score_dtype", "tradeoff_family"]:
        with pytest.raises(EntryPointError) as err:
            _returning(meta={name: 50})
        assert KEY in str(err.value) and f"meta sets {name!r}, which the pipeline owns" in str(
            err.value
        )
    assert {"claimed_epsilon", "design", "experiment", "setting", "seed", "shard"} <= set(good.meta)


WHOLE_STEPS = "steps must be a whole number >= 1 (the logical steps trained)"


@pytest.mark.parametrize(
    ("returned", "why"),
    [
        ({"steps": True}, f"{WHOLE_STEPS}, got True"),
        ({"steps": 2.7}, f"{WHOLE_STEPS}, got 2.7"),
        ({"steps": "3"}, "steps must be a whole number"),
        ({"noise_multiplier": True}, "noise_multiplier must be a finite number >= 0, got True"),
        ({"noise_multiplier": float("nan")}, "noise_multiplier must be a finite number"),
        ({"sample_rate": True}, "sample_rate must be a number in (0, 1], got True"),
        ({"steps": 5}, "returned steps = 5, but its canaries observed steps = 3"),
        ({"steps": 1}, "returned steps = 1, but its canaries observed steps = 3"),
        ({"test_accuracy": True}, "test_accuracy must be a finite number, got True"),
    ],
)
def test_issue36_item2_claim_settings_are_numbers_of_their_kind_and_what_canaries_saw(
    user_module, returned, why
):
    """Issue 36, item 2: ``steps: True`` was accounted as 1 step and ``steps: 2.7`` as 2 while
    the canaries saw 3 (here); each is an error naming the setting (and both step counts)."""
    with pytest.raises(EntryPointError) as err:
        _returning(**returned)
    assert KEY in str(err.value) and why in str(err.value)
    assert _returning(steps=3.0).meta["claim_settings"]["steps"] == 3  # a whole float: exact
    # canaries may be sampled at a rate of their own (planted_bugs.weighted_sampler)
    assert _returning(sample_rate=0.25).meta["claim_settings"]["sample_rate"] == 0.25


def test_issue36_item2_a_bad_meta_leaves_no_score_file(user_module, tmp_path):
    """Issue 36, item 2: the file with a returned ``design`` was written and a rerun took it as
    done; now the job fails before writing."""
    importlib.import_module("dpaudit_user_train").RETURN = {"meta": {"design": "lidp"}}
    out = tmp_path / "scores" / "seed0.shard0.npz"
    out.parent.mkdir()
    with pytest.raises(EntryPointError, match="meta sets 'design'"):
        train_entry_point(
            DATA,
            experiment="own",
            setting="s",
            seed=0,
            shard=0,
            run_spec=_run_spec("dpaudit_user_train:settings"),
            out=out,
        )
    assert list(out.parent.iterdir()) == []


@pytest.mark.parametrize(
    ("returned", "fn", "why"),
    [
        ({"meta": {"loss": float("nan")}}, "settings", "meta['loss'] = nan is not a JSON value"),
        ({"meta": {"w": np.zeros(2)}}, "settings", "meta['w'] = array([0., 0.]) is not a JSON"),
        ({}, "fails", "'dpaudit_user_train:fails' raised RuntimeError: out of memory in my loop"),
        ({}, "exits", "'dpaudit_user_train:exits' called sys.exit(0)"),
    ],
)
def test_issue36_item8_errors_in_the_users_function_name_the_config_key(
    user_module, returned, fn, why
):
    """Issue 36, item 8: NaN or non-JSON values in the returned meta ("Out of range float
    values are not JSON compliant"), an exception in the user's function (without the config
    key) and ``sys.exit(0)`` there (Snakemake's "filesystem latency") each end in an error
    naming ``experiments.<name>.train.entry_point`` and the cause."""
    importlib.import_module("dpaudit_user_train").RETURN = returned
    with pytest.raises(EntryPointError) as err:
        _run(f"dpaudit_user_train:{fn}")
    assert KEY in str(err.value) and why in str(err.value)


def test_canaries_of_another_threat_model_are_an_error(user_module) -> None:
    spec = _run_spec("dpaudit_user_train:train")
    spec["threat_model"] = "black_box_loss"
    with pytest.raises(
        EntryPointError, match=r"'per_step_dot', but experiments\.own\.threat_model"
    ):
        run_entry_point(
            DATA, experiment="own", setting="s", seed=0, shard=0, run_spec=spec, device="cpu"
        )


def test_train_job_refuses_an_entry_point_spec(user_module, tmp_path) -> None:
    with pytest.raises(ValueError, match="train.entry_point"):
        train_job(
            DATA,
            experiment="own",
            setting="s",
            seed=0,
            shard=0,
            run_spec=_run_spec("dpaudit_user_train:train"),
            out=tmp_path / "x.npz",
        )


def test_the_module_source_reaches_the_job_params(user_module) -> None:
    config = validate_config(_config("dpaudit_user_train:train"))
    before = train_params(config, "own", "eps1")["train"]["entry_point_sha256"]
    assert before == source_hash("dpaudit_user_train:train") and len(before) == 64
    user_module.write_text(USER_MODULE + "\n# changed\n")
    after = train_params(config, "own", "eps1")["train"]["entry_point_sha256"]
    assert after != before


def test_settings_of_entry_point_points_are_named_by_the_function(user_module) -> None:
    config = _config("dpaudit_user_train:train")
    config["experiments"]["own"]["points"] = [
        {"train.entry_point": "dpaudit_user_train:train"},
        {"train.entry_point": "dpaudit_user_train:eps"},
    ]
    config = validate_config(config)
    columns = setting_columns(config["experiments"]["own"])
    assert sorted(columns) == ["entry_pointeps_eps1", "entry_pointtrain_eps1"]
    assert columns["entry_pointeps_eps1"]["entry_point"] == "dpaudit_user_train:eps"


@pytest.mark.slow
def test_an_entry_point_experiment_runs_end_to_end(tmp_path: Path) -> None:
    """Snakemake: prepare, train by the user's function (two settings, two seeds), audit,
    audit table and verdict table, as for any experiment."""
    user = tmp_path / "user"
    user.mkdir()
    (user / "dpaudit_user_e2e.py").write_text(USER_MODULE)
    work = tmp_path / "work"
    work.mkdir()
    config = {
        "experiments": {
            "own": {
                **_config("dpaudit_user_e2e:train")["experiments"]["own"],
                "seeds": [0, 1],
                "dataset": {"name": "synthetic", "n_train": 50, "n_test": 20},
                "points": [
                    {"train.entry_point": "dpaudit_user_e2e:train"},
                    {"train.entry_point": "dpaudit_user_e2e:eps"},
                ],
                "estimators": ["one_run"],
                "verdict": {"by": ["entry_point"]},
            }
        },
        "estimators": {"one_run": {"method": "one_run", "selections": ["bonferroni"]}},
    }
    configfile = tmp_path / "config.yaml"
    configfile.write_text(yaml.safe_dump(config))
    env = dict(os.environ, PYTHONPATH=f"{REPO}{os.pathsep}{user}", OMP_NUM_THREADS="1")
    cmd = [
        sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"),
        "--directory", str(work), "--configfile", str(configfile), "--cores", "2",
        "results/own/verdicts.csv", "results/own/conformance.csv",
    ]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    sf = scores.read(work / "results/own/scores/entry_pointtrain_eps1/seed1.shard0.npz")
    assert sf.meta["entry_point"] == "dpaudit_user_e2e:train" and sf.n_canaries == 20
    verdicts = pd.read_csv(work / "results/own/verdicts.csv")
    assert sorted(verdicts["entry_point"]) == ["dpaudit_user_e2e:eps", "dpaudit_user_e2e:train"]
    assert set(verdicts["claimed_epsilon"].round(6)) >= {3.0}
    # issue 37, Done when: the report shows the conformance table beside the bounds: every
    # file's stages, measured beside claimed, the unseen ones named (a report item, as the
    # audit table is)
    table = pd.read_csv(work / "results/own/conformance.csv")
    assert len(table.groupby(["setting", "seed"])) == 4
    assert set(table["entry_point"]) == set(verdicts["entry_point"])
    assert set(table["status"]) <= {"ok", "departs", "unseen"}
    steps = table[table["check"] == "noisy steps taken"].set_index("entry_point")
    assert len(steps) == 4 and set(steps.loc["dpaudit_user_e2e:eps", "measured"]) == {
        "1 noise calls"
    }
    unseen = table[table["status"] == "unseen"].set_index("stage")
    # the hand-written loops record no batches: sampling unseen, with the way to see it
    assert len(unseen.loc["sampling"]) == 4
    assert unseen.loc["sampling", "measured"].str.contains("give the training's DataLoader").all()
    # a bad entry point stops Snakemake before any job runs, naming the key
    config["experiments"]["own"]["points"][1]["train.entry_point"] = "dpaudit_user_e2e:gone"
    configfile.write_text(yaml.safe_dump(config))
    bad = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    assert bad.returncode != 0
    assert "experiments.own.points[1].train.entry_point" in bad.stdout + bad.stderr
    assert "has no attribute 'gone'" in bad.stdout + bad.stderr


def test_issue37_the_entry_point_writes_the_auditors_conformance_report(user_module) -> None:
    """Issue 37, "train.entry_point runs the same checks": the score file of an entry point
    carries the conformance report ``audit()`` writes (``measured_mechanism``, ``conformance``),
    the measured epsilon beside the claim and the departing stages: a loop that claims noise
    multiplier 0.5 and adds no noise departs at ``noise``; the auditor's facts are the
    pipeline's, so the user's ``meta`` cannot set them."""
    good = _run("dpaudit_user_train:train")
    report = good.meta["conformance"]
    assert report["departs"] == [] and "steps" in report["seen"] and report["alpha"] > 0
    assert "noise" in report["seen"] and "sampling" in report["unseen"]
    measured = good.meta["measured_mechanism"]
    assert measured["noise_multiplier"] <= 0.5 and measured["steps"] == 3
    assert measured["epsilon_lower"] > 0
    silent = _returning()  # claims sigma 0.5, adds no noise
    assert "noise" in silent.meta["conformance"]["departs"]
    for name in ("conformance", "measured_mechanism"):
        with pytest.raises(EntryPointError, match=f"meta sets {name!r}, which the pipeline owns"):
            _returning(meta={name: {"departs": []}})
