"""The estimator registry (dpaudit.estimators.registry) is the one owner of the estimator list:
the schema's method enum, the display names and colours of the figures and the own-training
verdict's estimators are checked against it or derived from it (issue 38)."""

from __future__ import annotations

import pytest

from dpaudit.defaults import estimator_methods, load_schema
from dpaudit.estimators.registry import (
    FAMILY_FREE,
    METHODS,
    block_assumes,
    family_free_blocks,
)
from dpaudit.mechanisms.registry import simulate
from dpaudit.plots.labels import METHOD_LABELS
from dpaudit.plots.style import METHOD_COLORS
from dpaudit.verdict import VERDICT_ESTIMATORS

SCHEMA = load_schema()


def test_schema_method_enum_is_the_registry():
    """issue 38: the schema's ``estimators.<name>.method`` enum lists the registered methods,
    in the registry's order."""
    assert estimator_methods() == list(METHODS)


def test_every_registered_method_has_its_schema_block():
    """Each method selects a ``$defs`` block of its own parameters (one ``if``/``then``)."""
    rules = SCHEMA["$defs"]["estimator"]["allOf"]
    covered = set()
    for rule in rules:
        method = rule["if"]["properties"]["method"]
        covered |= {method["const"]} if "const" in method else set(method["enum"])
        assert rule["then"]["$ref"].removeprefix("#/$defs/") in SCHEMA["$defs"]
    assert covered == set(METHODS)


def test_display_names_and_colours_name_registered_methods():
    """issue 38: a display name or colour of a method that is not registered (a renamed or
    removed method) is an error; both are optional per method."""
    assert set(METHOD_LABELS) <= set(METHODS)
    assert set(METHOD_COLORS) <= set(METHODS)


def test_verdict_estimators_are_the_registrys_family_free_bounds():
    """issue 38: dpaudit.verdict.VERDICT_ESTIMATORS is derived from the registry's
    ``assumes``: the one_run-design blocks whose rows are valid bounds for every mechanism, each
    with the valid ``bonferroni`` selection, in the order the verdict has always run them."""
    blocks = family_free_blocks("one_run")
    assert list(blocks) == ["one_run", "fdp_abstention_approx_dp"]
    assert blocks == {
        "one_run": {"method": "one_run"},
        "fdp_abstention_approx_dp": {"method": "fdp_abstention", "family": "approx_dp"},
    }
    assert all(block_assumes(b) == FAMILY_FREE for b in blocks.values())
    assert VERDICT_ESTIMATORS == {
        name: {**block, "selections": ["bonferroni"]} for name, block in blocks.items()
    }
    # the default null of fdp_one_run / fdp_abstention (gdp) and approx_dp at an unknown delta
    # assume a family: never in the verdict; an estimate (attack_metrics) neither
    assert block_assumes({"method": "fdp_one_run", "family": "approx_dp"}) != FAMILY_FREE
    assert "attack_metrics" not in blocks and METHODS["attack_metrics"].estimate


def test_family_free_blocks_of_other_designs():
    assert list(family_free_blocks("multi_run")) == ["multi_run_cp"]
    assert list(family_free_blocks("lidp")) == ["lidp"]


#: A small simulated score file of each design (mechanism, parameters).
SMALL = {
    "one_run": ("one_run_rr", {"m": 40, "epsilon": 1.0}),
    "multi_run": ("bgm", {"runs_per_hypothesis": 20, "steps_per_epoch": 2, "sigma": 1.0}),
    "lidp": ("lidp_gaussian", {"n": 8, "K": 1, "d": 10, "epsilon": 2.0, "delta": 1e-5}),
}


def test_every_design_has_a_small_file_here():
    assert {d for m in METHODS.values() for d in m.designs} == set(SMALL)


@pytest.mark.parametrize("name", [n for n, m in METHODS.items() if m.estimate])
def test_an_estimate_method_never_reports_a_valid_bound(name):
    """The registry's ``estimate`` column (which keeps a method out of
    :func:`family_free_blocks`) agrees with the rows its runner writes."""
    for design in METHODS[name].designs:
        mechanism, params = SMALL[design]
        sf = simulate(mechanism, params, seed=0, experiment="e", setting="s")
        rows = METHODS[name].run(sf, {})
        assert rows and not any(row["valid"] for row in rows)
