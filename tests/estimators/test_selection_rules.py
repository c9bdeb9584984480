"""The shared threshold / guess-count selection strategies (dpaudit.estimators.selection.rules)."""

from __future__ import annotations

import numpy as np
import pytest

from dpaudit.estimators.selection import rules


def _bound(calls: list):
    """A toy bound: epsilon = candidate - 10 * (1 - level); records every call."""

    def bound_at(cand, level):
        calls.append((cand, level))
        return cand - 10 * (1 - level)

    return bound_at


def test_explicit_is_one_test_at_the_nominal_level():
    calls: list = []
    got = rules.select(rules.Explicit(3), 0.95, _bound(calls))
    assert (got.candidate, got.level, got.grid_size, got.valid) == (3, 0.95, 1, True)
    assert got.result == pytest.approx(3 - 0.5)
    assert calls == [(3, 0.95)]


def test_bonferroni_tests_every_candidate_at_the_corrected_level():
    calls: list = []
    got = rules.select(rules.Bonferroni([1, 5, 2, 4]), 0.9, _bound(calls))
    assert got.level == pytest.approx(1 - 0.1 / 4)
    assert {lvl for _, lvl in calls} == {got.level}
    assert (got.candidate, got.grid_size, got.valid) == (5, 4, True)


def test_uncorrected_maximum_is_labelled_invalid():
    calls: list = []
    got = rules.select(rules.Uncorrected([1, 5, 2]), 0.9, _bound(calls))
    assert (got.candidate, got.level, got.grid_size, got.valid) == (5, 0.9, 3, False)


def test_ties_go_to_the_first_candidate_and_key_is_used():
    got = rules.select(
        rules.Uncorrected(["a", "bb", "cc"]),
        0.9,
        lambda c, lvl: {"eps": len(c)},
        key=lambda r: r["eps"],
    )
    assert got.candidate == "bb"


def test_maximise_replaces_the_loop():
    def never(cand, level):
        raise AssertionError("the loop must not run")

    got = rules.select(
        rules.Bonferroni([0, 1, 2]), 0.95, never, maximise=lambda grid, lvl: (grid[-1], lvl)
    )
    assert got.candidate == 2 and got.result == pytest.approx(1 - 0.05 / 3)


def test_split_chooses_on_the_held_out_part_and_bounds_once_on_the_other():
    chose: list = []
    evaluated: list = []
    held = rules.HeldOut(grid=[1, 3, 2], bound_at=_bound(chose), transfer=lambda c: 10 * c)
    got = rules.select(rules.Split(seed=1), 0.95, _bound(evaluated), held_out=held)
    assert [c for c, _ in chose] == [1, 3, 2]
    assert evaluated == [(30, 0.95)]
    assert (got.candidate, got.level, got.grid_size, got.valid) == (30, 0.95, 1, True)
    with pytest.raises(ValueError, match="held_out"):
        rules.select(rules.Split(), 0.95, _bound([]))


def test_split_halves_are_a_seeded_partition():
    a, b = rules.Split(seed=3).halves(11)
    assert len(a) == 5 and len(b) == 6
    assert sorted(np.concatenate([a, b])) == list(range(11))
    a2, _ = rules.Split(seed=3).halves(11)
    np.testing.assert_array_equal(a, a2)


def test_strategy_names_and_errors():
    assert isinstance(rules.strategy("fixed", [1], 4, 0, "r"), rules.Explicit)
    assert isinstance(rules.strategy("bonferroni", [1], None, 0, "r"), rules.Bonferroni)
    assert isinstance(rules.strategy("grid_max_uncorrected", [1], None, 0, "r"), rules.Uncorrected)
    assert rules.strategy("sample_split", [1], None, 7, "r") == rules.Split(7)
    with pytest.raises(ValueError, match="needs params r"):
        rules.strategy("fixed", [1], None, 0, "params r")
    with pytest.raises(ValueError, match="unknown selection 'best'"):
        rules.strategy("best", [1], None, 0, "r")
    with pytest.raises(ValueError, match="empty"):
        rules.select(rules.Uncorrected([]), 0.9, _bound([]))


def test_one_run_estimators_use_the_shared_strategies():
    """The one-run and tight one-run audits label their rows from the shared rules."""
    from dpaudit.estimators.fdp_one_run import audit as fdp_one_run_audit
    from dpaudit.estimators.one_run import bound as one_run

    rng = np.random.default_rng(0)
    member = rng.integers(0, 2, 400)
    score = member + rng.normal(0, 0.5, 400)
    sels = ("fixed", "grid_max_uncorrected", "bonferroni", "sample_split")
    rows = one_run.audit_scores(score, member, 1e-5, selections=sels, fixed=(20, 20))
    assert [r.valid for r in rows] == [True, False, True, True]
    frows = fdp_one_run_audit.audit_scores(
        score, member, selections=sels, r_fixed=40, r_grid=[10, 40, 100]
    )
    assert [r["valid"] for r in frows] == [True, False, True, True]
    assert frows[2]["level_per_test"] == pytest.approx(1 - 0.05 / 3)
    assert fdp_one_run_audit.SELECTIONS == rules.ONE_RUN_SELECTIONS
