"""The one source of every default: the configuration schema shipped in the package.

``dpaudit/schema.yaml`` (``config/schema.yaml`` links to it) gives each config key its default.
The pipeline fills them in when it validates a config (:func:`dpaudit.config.validate_config`);
the estimator runners, the training library and the CLI fill the same defaults with
:func:`fill_defaults`, so that a block written in a config, a dict passed to a runner and a
command-line call with no options all mean the same parameters (and give the same rows).

This module sits at the bottom of the package's layers (it reads only the schema), so every
layer may use it.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import yaml

#: The schema's file name inside the ``dpaudit`` package.
SCHEMA_RESOURCE = "schema.yaml"

#: Blocks of a ``kind: train`` experiment whose defaults :func:`fill_defaults` fills.
TRAIN_BLOCKS = ("train", "canaries", "model", "dataset", "selection")

#: Keys of a ``train`` block that choose settings (the pipeline's wildcards), not how one
#: setting is trained: the training library does not read them.
SETTING_KEYS = ("target_epsilons", "nonprivate")


#: libyaml's safe loader where PyYAML was built with it (the same YAML, about 10x faster than the
#: pure-Python one; the schema is read by every Snakemake process, each cluster job's included),
#: else the pure-Python safe loader.
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_schema(path: str | Path | None = None) -> dict[str, Any]:
    """The configuration schema: the package's own (``path`` None) or the file at ``path``."""
    if path is None:
        text = resources.files("dpaudit").joinpath(SCHEMA_RESOURCE).read_text()
        return yaml.load(text, Loader=SAFE_LOADER)
    with open(path) as fh:
        return yaml.load(fh, Loader=SAFE_LOADER)


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


@functools.lru_cache(maxsize=1)
def _package_filler() -> Any:
    """A default-filling validator over the package's schema (read once)."""
    return DefaultFillingValidator(load_schema())


def estimator_methods() -> list[str]:
    """The estimator methods the schema allows (``estimators.<name>.method``)."""
    return list(_package_filler().schema["$defs"]["estimator"]["properties"]["method"]["enum"])


def _fill(config: dict[str, Any]) -> None:
    """Fill the schema's defaults into ``config`` in place. Problems are not reported here:
    :func:`dpaudit.config.validate_config` reports them for configs, the runners for params."""
    for _ in _package_filler().iter_errors(config):
        pass


def _fill_estimator(method: str, params: Mapping[str, Any]) -> dict[str, Any]:
    if method not in estimator_methods():
        raise ValueError(f"unknown estimator method {method!r}; allowed: {estimator_methods()}")
    block = copy.deepcopy(dict(params))
    given = block.pop("method", method)
    if given != method:
        raise ValueError(f"estimator params name method {given!r}, expected {method!r}")
    config = {"estimators": {"block": {"method": method, **block}}}
    _fill(config)
    filled = config["estimators"]["block"]
    filled.pop("method")
    return filled


def _fill_train_block(kind: str, params: Mapping[str, Any]) -> dict[str, Any]:
    config = {"experiments": {"block": {"kind": "train", kind: copy.deepcopy(dict(params))}}}
    _fill(config)
    return config["experiments"]["block"][kind]


def _fill_block(kind: str, params: Mapping[str, Any]) -> dict[str, Any]:
    if kind in TRAIN_BLOCKS:
        return _fill_train_block(kind, params)
    return _fill_estimator(kind, params)


@functools.lru_cache(maxsize=1024)
def _added_defaults(kind: str, given_json: str) -> dict[str, Any]:
    """The keys (with their defaults) that filling adds to the params ``given_json`` (cached:
    runners fill their params on every call)."""
    given = json.loads(given_json)
    return {k: v for k, v in _fill_block(kind, given).items() if k not in given}


def fill_defaults(kind: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``params`` with the schema's defaults filled in, as the pipeline's config holds them.

    ``kind`` is an estimator method (``one_run``, ``lidp``, ...: the estimator block without
    its ``method`` key) or a block of a train experiment (``train``, ``canaries``, ``model``,
    ``dataset``). Given keys are kept as they are (even keys the schema does not know: the
    consumer checks them); ``params`` is not modified. Conditional defaults of the schema apply
    (e.g. a LiDP ``clopper_pearson`` interval has order 1 unless given).
    """
    given = dict(params or {})
    try:
        key = json.dumps(given, sort_keys=True, allow_nan=True)
    except (TypeError, ValueError):  # values JSON cannot hold: fill without the cache
        return _fill_block(kind, given)
    added = copy.deepcopy(_added_defaults(kind, key))
    given.pop("method", None)  # checked against ``kind`` by the filling
    return {**given, **added}


def estimator_defaults(method: str) -> dict[str, Any]:
    """Every parameter of estimator ``method`` at its schema default (without ``method``)."""
    return fill_defaults(method, {})


def train_experiment_defaults() -> dict[str, Any]:
    """A ``kind: train`` experiment block with every key at its schema default."""
    config: dict[str, Any] = {"experiments": {"block": {"kind": "train"}}}
    _fill(config)
    return config["experiments"]["block"]
