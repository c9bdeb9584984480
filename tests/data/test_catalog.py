"""The dataset catalog (dpaudit.data.catalog) is the one owner of each dataset's facts: the
schema's names, the config check, preparation and the loaders read it."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from dpaudit.config import ConfigError, load_schema, validate_config
from dpaudit.data import bundled, catalog, prepare, tabular, vision
from dpaudit.data.catalog import CATALOG, DATASET_NAMES, KIND_KEYS, DatasetEntry, data_shape

SCHEMA = load_schema()
DATASET = SCHEMA["$defs"]["train_experiment"]["properties"]["dataset"]["properties"]


def test_schema_dataset_names_are_the_catalog():
    assert tuple(DATASET["name"]["enum"]) == DATASET_NAMES == prepare.DATASETS


def test_every_schema_dataset_key_applies_to_some_kind():
    keys = set().union(*KIND_KEYS.values()) | {"name", "seed"}
    assert keys == set(DATASET)


def test_loaders_read_the_catalog():
    assert set(vision.VISION_DATASETS) == {n for n, e in CATALOG.items() if e.kind == "vision"}
    for name, spec in tabular.TABULAR_DATASETS.items():
        e = CATALOG[name]
        assert (spec.rows, (spec.features,), spec.classes, spec.sha256) == (
            e.rows,
            e.shape,
            e.classes,
            e.sha256,
        )
    assert bundled.DIGITS_SHA256 == CATALOG["digits"].sha256


def test_synthetic_defaults_are_make_synthetic_defaults():
    from dpaudit.data.synthetic import make_synthetic

    params = inspect.signature(make_synthetic).parameters
    assert params["n_train"].default == catalog.SYNTHETIC_N_TRAIN
    assert params["n_features"].default == catalog.SYNTHETIC_FEATURES
    assert params["n_classes"].default == catalog.SYNTHETIC_CLASSES


def test_digits_entry_is_what_the_bundled_loader_returns():
    """The offline dataset checks the entry's rows, shape, classes and checksum for real."""
    e = CATALOG["digits"]
    data = bundled.load_digits()
    assert data["x"].shape == (e.rows, *e.shape)
    assert np.unique(data["y"]).size == e.classes
    assert data["sources"][0]["sha256"] == e.sha256
    assert data_shape({"name": "digits"}) == ((1, 8, 8), 10)
    assert data_shape({"name": "digits", "classes": [3, 5]}) == ((1, 8, 8), 2)


def test_a_real_dataset_without_a_shape_fails_when_it_is_written_down():
    """A new entry without its shape is an error naming it, not a KeyError at validation."""
    with pytest.raises(ValueError, match="dataset 'new': a real dataset needs its shape"):
        DatasetEntry("new", "vision", "somewhere", "loader", classes=10, splits=(10, 10))
    with pytest.raises(ValueError, match="kind 'audio'"):
        DatasetEntry("new", "audio", "somewhere", "loader")


def test_unknown_dataset_name_lists_the_known_ones():
    with pytest.raises(ValueError, match="unknown data set 'imagenet'; known: \\['synthetic'"):
        catalog.entry("imagenet")


def test_required_checksum_names_the_key():
    exp = {"kind": "train", "dataset": {"name": "purchase"}}
    cfg = {"experiments": {"x": exp}, "estimators": {"o": {"method": "one_run"}}}
    with pytest.raises(ConfigError, match=r"experiments\.x\.dataset\.sha256: required for"):
        validate_config(cfg, SCHEMA)
