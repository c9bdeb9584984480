"""Loading a config file, filling the schema's defaults and running every check.

:func:`validate_config` fills the defaults of ``dpaudit/schema.yaml`` in place, reports every
schema violation at once (:func:`dpaudit.config.errors.describe`), then runs the guards
(:mod:`dpaudit.config.guards`), the cross-key checks (:mod:`dpaudit.config.structure`) and the
entry-point checks of a user's training function.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from dpaudit.config.duplicate_keys import check_duplicate_keys
from dpaudit.config.errors import ConfigError, GuardError, describe
from dpaudit.config.guards import check_guards
from dpaudit.config.structure import check_references
from dpaudit.defaults import DefaultFillingValidator, load_schema
from dpaudit.io import read_yaml


def load_config_file(path: str | Path) -> dict[str, Any]:
    """A YAML config file as a dict; a syntax error or a non-mapping top level raises
    :class:`ConfigError` naming the file (and the line and column of a syntax error). A file
    that cannot be read raises the ``OSError`` (which names it)."""
    try:
        data = read_yaml(path)
    except ValueError as err:  # read_yaml's message starts with the path
        raise ConfigError(f"config file {err}") from None
    try:
        check_duplicate_keys(path)
    except GuardError as err:
        raise ConfigError(str(err)) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"config file {path}: a config must be a mapping of keys, got {type(data).__name__}"
        )
    return data


def _check_experiments_block(config: dict[str, Any], require: bool) -> None:
    """An ``experiments`` block that is empty (null or {}) runs nothing: an error, not a no-op."""
    if "experiments" not in config:
        if require:
            raise ConfigError(
                "config key experiments: missing; define at least one named experiment block"
            )
        return
    block = config["experiments"]
    if block is None or (isinstance(block, dict) and not block):
        raise ConfigError(
            f"config key experiments: is empty ({block!r}); define at least one named "
            "experiment block (kind: train, simulate or analysis)"
        )


def validate_config(
    config: dict[str, Any],
    schema: dict[str, Any] | None = None,
    require_experiments: bool = True,
    cross_checks: bool = True,
) -> dict[str, Any]:
    """Fill defaults into ``config`` in place and check it; raise :class:`ConfigError`
    listing every problem once, each naming its key and what is allowed.

    ``schema`` None uses the package's schema. ``require_experiments`` False accepts a config
    without an ``experiments`` key (``dpaudit audit --config`` needs only estimator blocks).
    ``cross_checks`` False fills the defaults and checks the schema only, skipping the
    cross-key checks (they import torch and build every model, several CPU-seconds): for the
    Snakemake processes a cluster job starts, whose config the main process has checked whole
    before submitting anything. The cross-key checks never change the config.
    """
    if not isinstance(config, dict):
        raise ConfigError(f"config: the top level must be a mapping, got {type(config).__name__}")
    _check_experiments_block(config, require_experiments)
    validator = DefaultFillingValidator(load_schema() if schema is None else schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        messages = list(dict.fromkeys(describe(e) for e in errors))  # once each, in order
        lines = "\n".join(f"  - {m}" for m in messages)
        raise ConfigError(f"invalid configuration ({len(messages)} problem(s)):\n{lines}")
    if cross_checks:
        try:
            check_guards(config)  # the job count first, before any grid is expanded
        except GuardError as err:
            raise ConfigError(str(err)) from None
        check_references(config, validator)
        from dpaudit.attach.pipeline import EntryPointError, check_entry_points

        try:
            check_entry_points(config)
        except EntryPointError as err:
            raise ConfigError(str(err)) from None
    return config


def default_estimator_config(methods: Iterable[str]) -> dict[str, Any]:
    """A validated config (no experiments) with one estimator block per method, named after it,
    every parameter at its schema default: what ``dpaudit audit --estimator METHOD`` runs."""
    blocks = {m: {"method": m} for m in methods}
    return validate_config({"estimators": blocks}, require_experiments=False)
