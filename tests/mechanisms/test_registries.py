"""The registries of mechanisms, analyses and estimators: explicit dicts name -> object, with
each mechanism's design declared once (``MECHANISM_DESIGNS`` is derived from ``MECHANISMS``)."""

from __future__ import annotations

import pytest

from dpaudit import analyses, estimators, scores
from dpaudit.mechanisms import registry

#: Small parameters with which every registered mechanism runs in well under a second.
SMALL = {
    "lidp_gaussian": {"n": 8, "K": 1, "d": 10, "epsilon": 2.0, "delta": 1e-5},
    "one_run_gaussian": {"m": 20, "sigma": 2.0, "delta": 1e-5},
    "one_run_rr": {"m": 20, "epsilon": 1.0},
    "bgm": {"runs_per_hypothesis": 20, "steps_per_epoch": 2, "sigma": 1.0},
    "bgm_calibrated": {"target_epsilon": 1.0, "runs_per_hypothesis": 20, "steps_per_epoch": 2,
                       "sigma": 1.0, "tolerance": 10.0},
    "selection_reduced_game": {"epsilon_B": 1.0, "n_games": 20},
}


def test_every_mechanism_has_small_parameters_here():
    assert set(SMALL) == set(registry.MECHANISMS)


@pytest.mark.parametrize("name", sorted(SMALL))
def test_mechanism_writes_the_design_it_is_registered_with(name):
    sf = registry.simulate(name, SMALL[name], seed=0, experiment="e", setting="s")
    scores.validate(sf)
    assert sf.meta["design"] == registry.MECHANISM_DESIGNS[name] == registry.MECHANISMS[name].design


#: The inclusion law each mechanism's files declare (issue 36, item 1): fair coins, or membership
#: fixed by the design (LiDP's K inserted and m null canaries; the BGM's runs on each side).
LAWS = {
    "lidp_gaussian": scores.FIXED_INCLUSION,
    "one_run_gaussian": scores.FAIR_COIN,
    "one_run_rr": scores.FAIR_COIN,
    "bgm": scores.FIXED_INCLUSION,
    "bgm_calibrated": scores.FIXED_INCLUSION,
    "selection_reduced_game": scores.FAIR_COIN,
}


@pytest.mark.parametrize("name", sorted(SMALL))
def test_issue36_item1_mechanism_declares_its_inclusion_law(name):
    """Issue 36, item 1: every mechanism's file declares the law its membership is drawn by."""
    sf = registry.simulate(name, SMALL[name], seed=0, experiment="e", setting="s")
    assert sf.meta[scores.INCLUSION_KEY] == LAWS[name] == sf.inclusion_probability


def test_designs_are_derived_from_the_mechanisms():
    assert registry.MECHANISM_DESIGNS == {n: m.design for n, m in registry.MECHANISMS.items()}


def test_unknown_design_and_names_are_rejected():
    with pytest.raises(ValueError, match="design 'two_run'"):
        registry.Mechanism(registry.get("bgm"), "two_run")
    with pytest.raises(ValueError, match="unknown mechanism 'nope'; allowed"):
        registry.get("nope")
    with pytest.raises(ValueError, match="unknown analysis 'nope'; allowed"):
        analyses.get("nope")
    with pytest.raises(KeyError, match="unknown estimator method 'nope'; allowed"):
        estimators.get("nope")


def test_registries_hold_callables_under_their_names():
    assert all(callable(f) for f in analyses.ANALYSES.values())
    assert all(callable(m.run) for m in registry.MECHANISMS.values())
    for name, method in estimators.METHODS.items():
        assert method.name == name and callable(method.run) and method.doc
        assert set(method.designs) <= set(scores.DESIGNS)
