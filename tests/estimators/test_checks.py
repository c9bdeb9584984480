"""Argument checks several estimator families share (dpaudit.estimators.common.checks), written
once (issue 38: shared pieces of the estimator families written once)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpaudit.estimators.common.checks import check_confidence, check_integers
from dpaudit.estimators.fdp_abstention import bound as abstention
from dpaudit.estimators.fdp_one_run import audit as fdp_audit
from dpaudit.estimators.fdp_one_run import bound as fdp_bound
from dpaudit.estimators.one_run import bound as one_run
from dpaudit.estimators.selection import rules

MESSAGE = r"confidence must lie in \(0, 1\), got"


@pytest.mark.parametrize("confidence", [0.0, 1.0, -0.5, 1.5, math.nan])
def test_check_confidence_rejects_levels_outside_the_open_unit_interval(confidence):
    with pytest.raises(ValueError, match=MESSAGE):
        check_confidence(confidence)


@pytest.mark.parametrize("confidence", [1e-9, 0.5, 0.95, 1 - 1e-12])
def test_check_confidence_accepts_levels_inside(confidence):
    assert check_confidence(confidence) is None


def test_every_family_rejects_a_bad_confidence_with_the_one_message():
    """issue 38: one_run, fdp_one_run (bound and runner), fdp_abstention and the multi_split
    combination all call the shared check."""
    member = np.arange(20) % 2
    calls = [
        lambda c: one_run.epsilon_lower_bound(100, 10, 8, 1e-5, c),
        lambda c: fdp_bound.param_lower_bound(100, 10, 2, "gdp", c),
        lambda c: fdp_audit.audit_scores(member.astype(float), member, confidence=c),
        lambda c: abstention.param_lower_bound(100, 10, 8, "gdp", c),
        lambda c: rules.combine_splits(rules.MultiSplit(4, 0.5, 0), c, lambda s, lvl: 0.0),
    ]
    for call in calls:
        with pytest.raises(ValueError, match=MESSAGE + " 1.0"):
            call(1.0)


def test_check_integers_names_the_first_count_that_is_not_an_integer():
    """issue 38: the count checks of the f-DP one-run tails and the abstention bound, written
    once."""
    assert check_integers(n=3, r=np.int64(2)) is None
    with pytest.raises(TypeError, match=r"^r must be an integer, got 2\.0$"):
        check_integers(n=3, r=2.0, wrong="x")
    calls = [
        lambda: fdp_bound.param_lower_bound(100, 10.0, 2, "gdp"),
        lambda: fdp_bound.param_lower_bound(100, 10, 2.0, "gdp"),
        lambda: abstention.param_lower_bound(100, 10, 8.0, "gdp"),
    ]
    for call, name in zip(calls, ("r", "wrong", "correct"), strict=True):
        with pytest.raises(TypeError, match=f"^{name} must be an integer"):
            call()
