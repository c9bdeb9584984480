"""Tied scores never leak membership through the order of the canaries in a file (issue 30).

A guesser that breaks ties by position makes its guesses depend on the file order: a file with
constant scores and its IN canaries first got valid-looking one-run bounds of 4 to 18. Every
estimator must give the same rows for every order of the canaries, and nothing from constant
scores (:mod:`dpaudit.estimators.common.ties`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpaudit.audit import run_estimator
from dpaudit.defaults import estimator_methods
from dpaudit.estimators.common.ties import Cut
from dpaudit.estimators.fdp_one_run import guesses as fdp_one_run
from dpaudit.estimators.fdp_one_run.audit import audit_scores as fdp_audit_scores
from dpaudit.estimators.one_run import bound as one_run
from dpaudit.scores import ScoreFile

SELECTIONS = ["grid_max_uncorrected", "bonferroni", "sample_split", "multi_split", "fixed"]
MULTI_RUN_SELECTIONS = ["same_data", "heldout", "multi_split"]
FDP_SELECTIONS = ["grid_max_uncorrected", "bonferroni", "sample_split", "multi_split"]

#: Every null family with the default guess rule, every guess rule with the default family.
GUESSES = [
    *((family, "balanced") for family in ("gdp", "laplace", "approx_dp", "subsampled_gaussian")),
    ("gdp", "top_in"),
    ("gdp", "centered"),
]
#: Every estimator method of the schema, with every guess rule and null family of the one-run
#: f-DP audits and every selection rule (few splits and resamples, to stay fast).
SPECS: dict[str, dict] = {
    "one_run": {"method": "one_run", "selections": SELECTIONS, "fixed": [20, 20], "splits": 2},
    **{
        f"fdp_{family}_{guess}": {
            "method": "fdp_one_run",
            "family": family,
            "guess": guess,
            "selections": [*FDP_SELECTIONS, "fixed"] if guess == "balanced" else ["bonferroni"],
            "r": 40,
            "r_grid": [10, 40, 100],
            "splits": 2,
            **({"q": 1.0} if family == "subsampled_gaussian" else {}),
        }
        for family, guess in GUESSES
    },
    **{
        f"abstention_{family}_{guess}": {
            "method": "fdp_abstention",
            "family": family,
            "guess": guess,
            "selections": [*FDP_SELECTIONS, "fixed"],
            "r": 40,
            "splits": 2,
        }
        for family, guess in GUESSES
        if family != "subsampled_gaussian"
    },
    "attack_metrics": {"method": "attack_metrics", "resamples": 20},
    "multi_run_cp": {"method": "multi_run_cp", "selections": MULTI_RUN_SELECTIONS},
    "gdp_fit": {"method": "gdp_fit", "selections": MULTI_RUN_SELECTIONS},
    **{
        f"lidp_{interval}_{threshold}": {
            "method": "lidp",
            "interval": interval,
            "order": 1 if interval == "clopper_pearson" else 2,
            "threshold": threshold,
        }
        for interval in ("wilson", "bernstein", "clopper_pearson")
        for threshold in ("heldout", "in_sample")
    },
}


def _meta(design: str) -> dict:
    return {
        "experiment": "x",
        "setting": "s",
        "seed": 0,
        "design": design,
        "threat_model": "simulation",
        "claimed_epsilon": 1.0,
        "delta": 1e-5,
        "accountant": "none",
    }


def _rows(sf: ScoreFile) -> pd.DataFrame:
    frames = [run_estimator(sf, name, dict(spec)) for name, spec in SPECS.items()]
    return pd.concat([f for f in frames if not f.empty], ignore_index=True)


def test_specs_cover_every_estimator_method():
    assert {spec["method"] for spec in SPECS.values()} == set(estimator_methods())


def _constant_files(n: int = 200) -> list[ScoreFile]:
    """Constant scores, the IN canaries (runs) listed first, for each design."""
    half = np.r_[np.ones(n // 2), np.zeros(n - n // 2)].astype(np.int8)
    k = 10
    lidp_member = np.broadcast_to(np.r_[np.ones(k), np.zeros(k)].astype(np.int8), (n, 2 * k))
    return [
        ScoreFile(np.zeros((1, n)), half[None], np.arange(n)[None], _meta("one_run")),
        ScoreFile(np.zeros((n, 1)), half[:, None], np.zeros((n, 1), int), _meta("multi_run")),
        ScoreFile(
            np.zeros((n, 2 * k)),
            lidp_member,
            np.broadcast_to(np.arange(2 * k), (n, 2 * k)),
            _meta("lidp"),
        ),
    ]


def test_constant_scores_with_in_canaries_first_bound_nothing():
    """No information, no bound: every method, selection, family and guess rule gives 0 (the
    position-broken ties gave one_run 4.05, fdp_one_run 17.8, fdp_abstention 7.37)."""
    table = pd.concat([_rows(sf) for sf in _constant_files()], ignore_index=True)
    assert set(table["method"]) == set(estimator_methods())
    positive = table[table["epsilon"] > 0]
    assert positive.empty, positive[["estimator", "selection", "epsilon", "valid"]]


def _tied_one_run(n: int = 150, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Scores rounded to integers (many ties), IN canaries listed first within each tie."""
    rng = np.random.default_rng(seed)
    member = rng.integers(0, 2, n)
    score = np.round(rng.normal(size=n) + 1.0 * member)
    order = np.lexsort((-member, score))
    return score[order], member[order]


def _same(a: pd.DataFrame, b: pd.DataFrame) -> None:
    assert list(a.columns) == list(b.columns)
    pd.testing.assert_frame_equal(a, b, check_exact=True)


@pytest.mark.slow
def test_one_run_design_rows_do_not_depend_on_canary_order():
    score, member = _tied_one_run()
    n = score.size
    perm = np.random.default_rng(7).permutation(n)
    a = ScoreFile(score[None], member[None], np.arange(n)[None], _meta("one_run"))
    b = ScoreFile(score[perm][None], member[perm][None], perm[None], _meta("one_run"))
    rows = _rows(a)
    assert (rows["epsilon"] > 0).any()  # informative scores: the check is not vacuous
    _same(rows, _rows(b))


def test_lidp_design_rows_do_not_depend_on_canary_order():
    rng = np.random.default_rng(2)
    k, trials = 6, 300
    member = np.r_[np.ones(k), np.zeros(k)].astype(np.int8)
    score = np.round(rng.normal(size=(trials, 2 * k)) + 1.0 * member)
    perm = rng.permutation(2 * k)
    ids = np.arange(2 * k)
    shape = score.shape
    a = ScoreFile(score, np.broadcast_to(member, shape), np.broadcast_to(ids, shape), _meta("lidp"))
    b = ScoreFile(
        score[:, perm],
        np.broadcast_to(member[perm], shape),
        np.broadcast_to(ids[perm], shape),
        _meta("lidp"),
    )
    rows = _rows(a)
    assert (rows["epsilon"] > 0).any()
    _same(rows, _rows(b))


def test_cut_abstains_on_a_straddling_tie_and_matches_brute_force():
    """Cut.top(k) = #{score > the (k+1)-th highest}, and the sums over it, against a direct
    count; the same for every order of the items."""
    rng = np.random.default_rng(3)
    for trial in range(100):
        n = int(rng.integers(1, 40))
        s = rng.integers(0, 4, n).astype(float) if trial % 2 else np.round(rng.normal(size=n), 1)
        w = rng.integers(0, 2, n)
        cut = Cut(s, w)
        perm = rng.permutation(n)
        cut_p = Cut(s[perm], w[perm])
        desc, asc = np.sort(s)[::-1], np.sort(s)
        for k in range(n + 1):
            top = n if k == n else int((s > desc[k]).sum())
            bottom = n if k == n else int((s < asc[k]).sum())
            assert cut.top(k) == cut_p.top(k) == top <= k
            assert cut.bottom(k) == cut_p.bottom(k) == bottom <= k
            assert cut.sum_top(top) == cut_p.sum_top(top) == int(w[np.argsort(-s)][:top].sum())
            assert cut.sum_bottom(bottom) == int(w[np.argsort(s)][:bottom].sum())
    assert Cut(np.array([1.0, 1.0, 0.0]), np.ones(3)).top(np.array([0, 1, 2, 3])).tolist() == [
        0,
        0,
        2,
        3,
    ]


def test_one_run_counts_the_guesses_made_and_keeps_the_grid_size():
    """A grid point whose cut splits a tie makes fewer guesses (r), reported as such; the
    Bonferroni correction still divides by every grid point tested."""
    score = np.array([3.0, 2.0, 2.0, 2.0, 1.0, 0.0])
    member = np.array([1, 1, 0, 1, 0, 0])
    assert one_run.guess_counts(score, member, 2, 0) == (1, 1)  # the tie at 2 abstained on
    assert one_run.guess_counts(score, member, 4, 1) == (5, 4)
    grid = [(1, 0), (2, 0), (4, 0), (0, 1), (2, 2)]
    table = one_run._guess_table(score, member, grid)
    assert [(kp, km, r) for kp, km, r, _ in table] == [
        (1, 0, 1),
        (2, 0, 1),
        (4, 0, 4),
        (0, 1, 1),
        (2, 2, 3),
    ]
    (res,) = one_run.audit_scores(score, member, 1e-5, grid=grid, selections=["bonferroni"])
    assert res.grid_size == len(grid)
    assert res.level_per_test == pytest.approx(1 - 0.05 / len(grid))


def test_fdp_released_guesses_abstain_on_ties():
    score = np.array([2.0, 2.0, 1.0, 0.0, 0.0, 0.0])
    member = np.array([1, 0, 1, 0, 1, 0])
    # balanced r = 4: IN for 2 (both at 2.0), OUT for 2 of the three 0.0: abstained on
    assert fdp_one_run.released_guesses(score, member, 4, "balanced") == (2, 0, 1)
    assert fdp_one_run.released_guesses(score, member, 3, "top_in") == (3, 0, 1)
    assert fdp_one_run.released_guesses(score, member, 1, "top_in") == (0, 0, 0)
    # centered: median 0.5, confidences 1.5, 1.5, 0.5, 0.5, 0.5, 0.5
    assert fdp_one_run.released_guesses(score, member, 2, "centered") == (2, 0, 1)
    assert fdp_one_run.released_guesses(score, member, 3, "centered") == (2, 0, 1)
    # no guess at all: bound 0, not an error, the row says r = 0
    rows = fdp_audit_scores(np.zeros(50), np.r_[np.ones(25), np.zeros(25)], r_grid=[10, 20])
    assert [(row["epsilon"], row["r"]) for row in rows] == [(0.0, 0), (0.0, 0)]
