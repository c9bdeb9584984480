"""The preflight of a run (dpaudit.pipeline.preflight): what stops a run before any job."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from dpaudit.config import ConfigError, load_schema, validate_config
from dpaudit.pipeline.preflight import PreflightError, batch_problems, check_config

REPO = Path(__file__).resolve().parents[2]
SCHEMA = load_schema()


def _tiny(**train) -> dict:
    """config/test.yaml's ``tiny`` experiment alone (300 training records, m = 300 canaries:
    300 + 150 expected IN = 450 records a batch is drawn from), validated."""
    config = yaml.safe_load((REPO / "config" / "test.yaml").read_text())
    config["experiments"] = {"tiny": config["experiments"]["tiny"]}
    config["experiments"]["tiny"]["train"].update(train)
    return validate_config(config, SCHEMA)


def test_issue36_item12_batch_above_its_records_stops_naming_the_key():
    """Issue 36, item 12: ``train.batch_size`` above the records a batch is drawn from trained
    silently at sample rate 1; now the preflight (before any job) names the key and the allowed
    values."""
    with pytest.raises(PreflightError) as caught:
        check_config(_tiny(batch_size=451))
    message = str(caught.value)
    assert "config key experiments.tiny.train.batch_size: 451" in message
    assert "450 records" in message and "allowed: at most 450" in message
    assert "sample rate 1" in message


def test_a_full_batch_is_allowed():
    assert batch_problems(_tiny(batch_size=450)) == []
    check_config(_tiny(batch_size=450))


def test_a_batch_above_its_records_at_one_grid_point_names_its_settings():
    config = _tiny(batch_size=800)
    config["experiments"]["tiny"]["grid"] = {"dataset.n_train": [300, 1000]}
    (problem,) = batch_problems(validate_config(config, SCHEMA))
    assert "batch_size: 800 is larger than the 450 records" in problem
    assert "settings n_train300_eps4, n_train300_nonprivate)" in problem  # 1150 records: fits


CONFIGS = sorted(p for p in (REPO / "config").rglob("*.yaml") if p.name != "schema.yaml")


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: str(p.relative_to(REPO)))
def test_no_shipped_config_has_a_batch_above_its_records(path):
    from snakemake.utils import update_config

    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    update_config(config, yaml.safe_load(path.read_text()))
    assert batch_problems(validate_config(config, SCHEMA, cross_checks=False)) == []


def test_issue36_item12_one_canary_is_a_config_error():
    """Issue 36, item 12: ``canaries.m: 1`` passed validation and failed in a late job (a
    one-run audit needs IN and OUT canaries; one canary is only ever one of them): now the
    config check names the key and the allowed values, before any job."""
    config = yaml.safe_load((REPO / "config" / "test.yaml").read_text())
    config["experiments"] = {"tiny": config["experiments"]["tiny"]}
    bad = copy.deepcopy(config)
    bad["experiments"]["tiny"]["canaries"]["m"] = 1
    with pytest.raises(ConfigError, match=r"experiments\.tiny\.canaries\.m: 1 .*minimum': 2"):
        validate_config(bad, SCHEMA)
    config["experiments"]["tiny"]["grid"] = {"canaries.m": [1, 10]}
    with pytest.raises(ConfigError, match=r"canaries\.m: 1 .*grid point 'm1'"):
        validate_config(config, SCHEMA)
