"""One source of every default, the schema: the CLI, the pipeline and the library agree.

* ``dpaudit audit --estimator METHOD`` on a score file gives the rows of the pipeline's audit
  job (``scripts/audit.py``: :func:`dpaudit.audit.run_estimator` with the rule's parameters,
  the validated config's estimator block) for a block ``{method: METHOD}``, and for every
  estimator block of the default config given with ``--config``;
* each runner called with ``{}`` (or with a few keys) gives the rows it gives with the
  schema-filled block, so no runner keeps a default of its own that disagrees with the schema;
* the training library's defaults are the schema's, and ``dpaudit train-shard`` with a run file
  that leaves keys out trains what the pipeline trains for a config block that leaves them out.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import numpy as np
import pytest

from dpaudit import estimators, scores
from dpaudit.audit import run_estimator
from dpaudit.cli import main
from dpaudit.config import load_config_file, load_schema, validate_config
from dpaudit.pipeline.params import canonical
from dpaudit.scores import ScoreFile

DELTA = 1e-5


def _meta(design: str) -> dict:
    return {
        "experiment": "t",
        "setting": "s",
        "seed": 0,
        "design": design,
        "threat_model": "simulation",
        "claimed_epsilon": 2.0,
        "delta": DELTA,
        "accountant": "test",
    }


def _score_file(design: str) -> ScoreFile:
    """A small score file of ``design`` with a clear signal (IN scores shifted up)."""
    rng = np.random.default_rng(7)
    if design == "one_run":
        member = (rng.random((1, 400)) < 0.5).astype(np.int8)
    elif design == "multi_run":
        member = (rng.random((300, 1)) < 0.5).astype(np.int8)
    else:  # lidp: 8 inserted then 8 null canaries per trial
        member = np.tile(np.r_[np.ones(8), np.zeros(8)].astype(np.int8), (200, 1))
    score = rng.normal(size=member.shape) + 1.5 * member
    ids = np.tile(np.arange(member.shape[1]), (member.shape[0], 1))
    return ScoreFile(score=score, membership=member, canary_id=ids, meta=_meta(design))


def _design(method: str) -> str:
    return estimators.get(method).designs[0]


def _records(frame) -> list[dict]:
    """Rows as ``dpaudit audit --json`` prints them."""
    from dpaudit.commands.audit import json_rows

    return json.loads(json.dumps(json_rows(frame), allow_nan=False))


def _pipeline_rows(sf: ScoreFile, config: dict, name: str) -> list[dict]:
    """The audit job of ``rules/audit.smk`` on one file: ``scripts/audit.py`` calls
    ``run_estimator(sf, name, params.estimator)`` with ``estimator_params`` of
    ``rules/common.smk``, the validated config's block with keys sorted."""
    validated = validate_config(copy.deepcopy(config), require_experiments=False)
    return _records(run_estimator(sf, name, canonical(validated["estimators"][name])))


def _cli_rows(capsys, argv: list[str]) -> list[dict]:
    capsys.readouterr()
    assert main(["audit", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)["rows"]


@pytest.mark.parametrize("method", sorted(estimators.METHODS))
def test_cli_audit_gives_the_pipeline_rows_with_default_params(method, tmp_path, capsys):
    sf = _score_file(_design(method))
    path = scores.write(tmp_path / "s.npz", sf)
    got = _cli_rows(capsys, [str(path), "--estimator", method])
    want = _pipeline_rows(scores.read(path), {"estimators": {method: {"method": method}}}, method)
    assert len(want) > 0
    assert got == want


DEFAULT_CONFIG = load_config_file(Path(__file__).resolve().parents[2] / "config" / "config.yaml")


@pytest.mark.parametrize("name", sorted(DEFAULT_CONFIG["estimators"]))
@pytest.mark.slow
def test_cli_audit_with_config_gives_the_pipeline_rows(name, repo, tmp_path, capsys):
    """Every estimator block of the default config: ``dpaudit audit --config`` gives the rows
    of the pipeline's audit job for that block."""
    config = load_config_file(repo / "config" / "config.yaml")
    method = config["estimators"][name]["method"]
    path = scores.write(tmp_path / "s.npz", _score_file(_design(method)))
    got = _cli_rows(
        capsys, [str(path), "--config", str(repo / "config" / "config.yaml"), "--estimator", name]
    )
    want = _pipeline_rows(scores.read(path), {"estimators": config["estimators"]}, name)
    assert len(want) > 0
    assert got == want


def _schema_block(method: str, given: dict | None = None) -> dict:
    """The estimator block ``{method, **given}`` as the pipeline's validated config holds it,
    without ``method``."""
    config = {"estimators": {"e": {"method": method, **(given or {})}}}
    block = validate_config(config, require_experiments=False)["estimators"]["e"]
    return {k: v for k, v in block.items() if k != "method"}


def _same_rows(a: list[dict], b: list[dict]) -> bool:
    def norm(rows):
        return [
            {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()}
            for r in rows
        ]

    return norm(a) == norm(b)


#: A few keys given explicitly, where a default depends on another key or on the file.
PARTIAL = {
    "lidp": [{}, {"interval": "clopper_pearson"}, {"interval": "bernstein"}],
    "fdp_one_run": [{}, {"family": "laplace"}],
    "fdp_abstention": [{}, {"family": "approx_dp"}],
    "one_run": [{}, {"confidence": 0.9}],
    "multi_run_cp": [{}, {"confidence": 0.9}],
    "gdp_fit": [{}, {"select_fraction": 0.3}],
    "attack_metrics": [{}, {"resamples": 50}],
}


CASES = [(m, g) for m in sorted(estimators.METHODS) for g in PARTIAL[m]]


@pytest.mark.parametrize(
    ("method", "given"),
    CASES,
    ids=[f"{m}-{','.join(f'{k}={v}' for k, v in g.items()) or 'none'}" for m, g in CASES],
)
def test_runner_defaults_are_the_schema_defaults(method, given):
    """A runner given only some keys computes what it computes with the schema-filled block:
    none of its own defaults disagrees with the schema."""
    assert set(PARTIAL) == set(estimators.METHODS)
    sf = _score_file(_design(method))
    run = estimators.get(method).run
    assert _same_rows(run(sf, dict(given)), run(sf, _schema_block(method, given)))


def test_library_fill_defaults_is_the_validated_config():
    from dpaudit.defaults import estimator_defaults, fill_defaults

    for method in estimators.METHODS:
        assert estimator_defaults(method) == _schema_block(method)
    assert fill_defaults("lidp", {"interval": "clopper_pearson"})["order"] == 1
    assert fill_defaults("lidp", {"interval": "clopper_pearson", "order": 2})["order"] == 2
    with pytest.raises(ValueError, match="unknown estimator method 'nope'; allowed: .*lidp"):
        fill_defaults("nope", {})


def _schema_defaults(block: str) -> dict:
    """Defaults written in the schema for one block of a train experiment (read directly)."""
    props = load_schema()["$defs"]["train_experiment"]["properties"][block]["properties"]
    return {k: sub["default"] for k, sub in props.items()}


def test_training_library_defaults_are_the_schema_defaults():
    from dpaudit.training import shard

    train = _schema_defaults("train")
    for key in ("target_epsilons", "nonprivate"):  # settings, not training parameters
        del train[key]
    assert shard.TRAIN_DEFAULTS == train
    assert shard.CANARY_DEFAULTS == _schema_defaults("canaries")


def test_cli_train_shard_trains_what_the_pipeline_trains(tmp_path):
    """A run file that leaves keys out (model hidden widths, lr, canary scale, ...) trains the
    model the pipeline trains for a config block that leaves them out."""
    from dpaudit.data.synthetic import make_synthetic
    from dpaudit.defaults import SETTING_KEYS
    from dpaudit.training.job import JobId
    from dpaudit.training.shard import run_shard

    run_file = tmp_path / "run.yaml"
    run_file.write_text(
        "model: {name: mlp}\ncanaries: {m: 6}\n"
        "train: {epochs: 1, batch_size: 500, models_per_shard: 1}\n"
    )
    out = tmp_path / "s.npz"
    argv = ["train-shard", "--run", str(run_file), "--data", "synthetic", "--out", str(out)]
    assert main([*argv, "--no-progress"]) == 0
    block = {
        "kind": "train",
        "model": {"name": "mlp"},
        "canaries": {"m": 6},
        "train": {"epochs": 1, "batch_size": 500, "models_per_shard": 1, "target_epsilons": []},
    }
    config = {"experiments": {"cli": block}, "estimators": {"o": {"method": "one_run"}}}
    exp = validate_config(config)["experiments"]["cli"]
    spec = {
        "design": exp["design"],
        "threat_model": exp["threat_model"],
        "model": exp["model"],
        "canaries": exp["canaries"],
        "train": {k: v for k, v in exp["train"].items() if k not in SETTING_KEYS},
        "target_epsilon": None,
    }
    # what train_job runs for rules/common.smk's params
    pipeline = run_shard(make_synthetic(), JobId("cli", "default", 0), spec).score_file
    cli = scores.read(out)
    np.testing.assert_array_equal(cli.membership, pipeline.membership)
    np.testing.assert_array_equal(cli.score, pipeline.score)


@pytest.mark.parametrize("options", [[], ["--interval", "clopper_pearson"]], ids=["none", "cp"])
def test_cli_lidp_bound_gives_the_pipeline_row(options, tmp_path, capsys):
    """``dpaudit lidp-bound`` with options left out computes the pipeline's row for a block that
    leaves them out."""
    path = scores.write(tmp_path / "s.npz", _score_file("lidp"))
    capsys.readouterr()
    assert main(["lidp-bound", str(path), *options, "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    block = {"method": "lidp", **dict(zip(options[::2], options[1::2], strict=True))}
    block = {k.removeprefix("--"): v for k, v in block.items()}
    config = validate_config({"estimators": {"e": block}}, require_experiments=False)
    frame = run_estimator(scores.read(path), "e", canonical(config["estimators"]["e"]))
    assert len(frame) == 1
    want = frame.iloc[0].to_dict()
    assert _same_rows([got], [{k: want[k] for k in got}])
