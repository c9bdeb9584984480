"""Validation of the pipeline configuration against ``config/schema.yaml``.

Runs in ``rules/common.smk`` before any job: a misspelled key, a wrong type or an out-of-range
value stops the (dry) run with a message naming the key and what is allowed. Defaults from the
schema are filled in, so every rule sees a complete config.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import jsonschema
import yaml


class ConfigError(ValueError):
    """The configuration does not satisfy the schema."""


def load_schema(path: str | Path) -> dict[str, Any]:
    with open(path) as fh:
        return yaml.safe_load(fh)


def _extend_with_defaults(validator_class):
    """A validator that fills in ``default`` values of properties (like snakemake's validate)."""
    validate_props = validator_class.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for prop, sub in properties.items():
                if "$ref" in sub and "default" not in sub:  # a default may sit behind a $ref
                    sub = validator._resolver.lookup(sub["$ref"]).contents
                if "default" in sub and prop not in instance:
                    instance[prop] = copy.deepcopy(sub["default"])
        yield from validate_props(validator, properties, instance, schema)

    return jsonschema.validators.extend(validator_class, {"properties": set_defaults})


DefaultFillingValidator = _extend_with_defaults(jsonschema.Draft202012Validator)


def _key(path: Iterable[Any]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<top level>"


def _describe(error: jsonschema.ValidationError) -> str:
    key = _key(error.absolute_path)
    schema = error.schema if isinstance(error.schema, dict) else {}
    kind = error.validator
    if kind == "additionalProperties":
        allowed = sorted(schema.get("properties", {}))
        extra = sorted(set(error.instance) - set(allowed))
        if schema.get("patternProperties"):
            allowed = allowed + [f"/{p}/" for p in schema["patternProperties"]]
        where = key if error.absolute_path else "top level"
        return f"config key {where}: unknown key(s) {extra}; allowed keys: {allowed}"
    if kind == "enum":
        allowed = schema["enum"]
        return f"config key {key}: {error.instance!r} is not allowed; allowed values: {allowed}"
    if kind in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
        bounds = {
            k: schema[k]
            for k in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum")
            if k in schema
        }
        return f"config key {key}: {error.instance!r} is out of range; allowed: {bounds}"
    if kind == "type":
        return f"config key {key}: {error.instance!r} has the wrong type; expected {schema['type']}"
    if kind == "required":
        return f"config key {key}: {error.message}"
    desc = schema.get("description")
    return f"config key {key}: {error.message}" + (f" ({desc})" if desc else "")


def validate_config(config: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """Fill defaults into ``config`` in place and check it; raise :class:`ConfigError`
    listing every problem, each naming its key and what is allowed."""
    validator = DefaultFillingValidator(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        lines = "\n".join(f"  - {_describe(e)}" for e in errors)
        raise ConfigError(f"invalid configuration ({len(errors)} problem(s)):\n{lines}")
    _check_references(config)
    return config


#: Dataset keys (besides name and seed) that apply to each kind of dataset.
DATASET_KEYS = {
    "synthetic": {"n_train", "n_test", "n_features", "n_classes", "separation", "canary_pool"},
    "vision": {"n_train", "n_test", "classes", "canary_pool", "normalize", "checksums"},
    "tabular": {"n_train", "n_test", "classes", "canary_pool", "test_fraction", "sha256"},
}
_DATASET_KIND = {"synthetic": "synthetic", "location": "tabular", "purchase": "tabular"}


def _check_dataset(exp: str, dataset: dict[str, Any]) -> None:
    name = dataset.get("name", "synthetic")
    allowed = DATASET_KEYS[_DATASET_KIND.get(name, "vision")]
    for key, value in dataset.items():
        if key not in ("name", "seed") and value is not None and key not in allowed:
            raise ConfigError(
                f"config key experiments.{exp}.dataset.{key}: does not apply to dataset "
                f"{name!r}; allowed keys for it: {sorted(allowed | {'name', 'seed'})}"
            )
    if name == "purchase" and not dataset.get("sha256"):
        raise ConfigError(
            f"config key experiments.{exp}.dataset.sha256: required for dataset 'purchase' "
            "(no published checksum is pinned); allowed: the archive's 64-hex-digit SHA-256"
        )


def _check_registered(exp: str, block: dict[str, Any]) -> None:
    """Mechanism and analysis names must be registered (their tables are the allowed values)."""
    if block.get("kind") == "simulate":
        from dpaudit.mechanisms.registry import MECHANISMS as table

        key = "mechanism"
    elif block.get("kind") == "analysis":
        from dpaudit.analyses import ANALYSES as table

        key = "analysis"
    else:
        return
    if block.get(key) not in table:
        raise ConfigError(
            f"config key experiments.{exp}.{key}: {block.get(key)!r} is not allowed; "
            f"allowed values: {sorted(table)}"
        )
    if key == "mechanism":
        _check_mechanism_params(exp, block)


def _check_mechanism_params(exp: str, block: dict[str, Any]) -> None:
    """Every key of ``params``, ``grid`` and ``points`` must be a parameter of the mechanism
    (so a misspelt key fails here, not in the middle of a run)."""
    from dpaudit.mechanisms.registry import accepted_params

    allowed = accepted_params(block["mechanism"])
    if allowed is None:
        return
    places = [("params", block.get("params") or {}), ("grid", block.get("grid") or {})]
    places += [(f"points[{i}]", p) for i, p in enumerate(block.get("points") or [])]
    for where, keys in places:
        for k in keys:
            if k not in allowed:
                raise ConfigError(
                    f"config key experiments.{exp}.{where}.{k}: not a parameter of mechanism "
                    f"{block['mechanism']!r}; allowed: {sorted(allowed)}"
                )


#: What the one-model Opacus trainer (dpaudit.training.one_run) supports; everything else
#: needs ``trainer: vectorized`` (dpaudit.training.shard).
OPACUS_SUPPORTS = {
    "design": ("one_run",),
    "threat_model": ("black_box_loss",),
    "canaries.type": ("random_input",),
    "train.sampler": ("poisson",),
}


def _check_trainer(exp: str, block: dict[str, Any]) -> None:
    if block.get("kind") != "train" or block.get("trainer", "opacus") != "opacus":
        return
    values = {
        "design": block.get("design"),
        "threat_model": block.get("threat_model"),
        "canaries.type": block.get("canaries", {}).get("type"),
        "train.sampler": block.get("train", {}).get("sampler"),
    }
    for key, allowed in OPACUS_SUPPORTS.items():
        if values[key] is not None and values[key] not in allowed:
            raise ConfigError(
                f"config key experiments.{exp}.{key}: {values[key]!r} needs "
                f"'trainer: vectorized'; allowed with trainer opacus: {list(allowed)}"
            )
    for key in ("noise_multiplier", "steps", "buffer_size", "model_chunk"):
        if block.get("train", {}).get(key) is not None:
            raise ConfigError(
                f"config key experiments.{exp}.train.{key}: only for 'trainer: vectorized'"
            )


def _check_references(config: dict[str, Any]) -> None:
    """Cross-key checks the schema cannot express."""
    names = sorted(config.get("estimators", {}))
    for exp, block in config.get("experiments", {}).items():
        _check_registered(exp, block)
        _check_trainer(exp, block)
        if "dataset" in block:
            _check_dataset(exp, block["dataset"])
        for name in block.get("estimators", []) or []:
            if name not in names:
                raise ConfigError(
                    f"config key experiments.{exp}.estimators: unknown estimator {name!r}; "
                    f"allowed: names defined under 'estimators': {names}"
                )
