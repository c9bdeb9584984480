"""Frozen results of every estimator on fixed inputs (issue 15): speed-ups must not move them.

The values were computed by the straightforward implementations (one bisection per grid point,
every threshold's Clopper-Pearson bound, a root find per conversion) before any of them was
optimised; a faster implementation must return the same epsilon to 1e-9 and the same choice
(guess counts, threshold, wrong count). Inputs: Gaussian scores with a mean shift for members,
fair-coin membership, seeded; multi-run scores rounded to 2 decimals so that ties occur.
"""

from __future__ import annotations

import numpy as np
import pytest

from dpaudit.accounting.gaussian import gdp_epsilon
from dpaudit.estimators.fdp_one_run import audit as fdp_one_run_audit
from dpaudit.estimators.lidp import xbern
from dpaudit.estimators.multi_run import bound as multi_run
from dpaudit.estimators.multi_run import definition
from dpaudit.estimators.multi_run import search as multi_run_search
from dpaudit.estimators.one_run import bound as one_run

TOL = 1e-9


def _scores(n: int, shift: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    member = rng.integers(0, 2, n)
    return rng.normal(size=n) + shift * member, member


def _close(got: float, want: float) -> bool:
    return abs(got - want) <= TOL


# (m, r, correct, delta) -> epsilon at confidence 0.95 (Theorem 3.1 inverted, Appendix D)
ONE_RUN_COUNTS = [
    ((100000, 10000, 9033, 1e-5), 2.171196556650102),
    ((1000, 100, 90, 1e-5), 1.6261434806510806),
    ((2000, 2000, 2000, 1e-5), 6.449401979334652),
    ((50, 20, 15, 0.0), 0.17813998274505138),
    ((10000, 500, 400, 1e-7), 1.1985778799280524),
]


@pytest.mark.parametrize(("counts", "want"), ONE_RUN_COUNTS)
def test_one_run_bound_from_counts_is_frozen(counts, want):
    assert _close(one_run.epsilon_lower_bound(*counts, 0.95), want)


# (m, shift, seed) -> rows (selection, epsilon, k+, k-, correct): default grid, delta 1e-5
ONE_RUN_SCORES = {
    (2000, 1.0, 1): [
        ("grid_max_uncorrected", 1.8067550398409367, 50, 50, 92),
        ("bonferroni", 1.410902900621295, 100, 100, 180),
        ("sample_split", 1.5497588329017162, 25, 25, 46),
    ],
    (500, 3.0, 2): [
        ("grid_max_uncorrected", 4.180080348625779, 100, 100, 200),
        ("bonferroni", 3.3448992036283016, 100, 100, 200),
        ("sample_split", 3.486087338067591, 50, 50, 100),
    ],
    (300, 0.0, 3): [
        ("grid_max_uncorrected", 0.42204426508396864, 0, 10, 9),
        ("bonferroni", 0.0, 0, 1, 1),
        ("sample_split", 0.0, 0, 10, 6),
    ],
}
# the same scores, an explicit grid [(10, 10), (50, 0), (0, 100)], delta 0, confidence 0.9
ONE_RUN_GRID = {
    (2000, 1.0, 1): [
        ("bonferroni", 1.685370072722435, 10, 10, 20),
        ("fixed", 1.45013009570539, 20, 20, 36),
    ],
    (500, 3.0, 2): [
        ("bonferroni", 3.3639884581789374, 0, 100, 100),
        ("fixed", 2.8259266279637814, 20, 20, 40),
    ],
    (300, 0.0, 3): [("bonferroni", 0.31319757271558046, 10, 10, 16), ("fixed", 0.0, 20, 20, 22)],
}


def _check_one_run_rows(res, want):
    assert len(res) == len(want)
    for r, (sel, eps, kp, km, v) in zip(res, want, strict=True):
        assert (r.selection, r.k_plus, r.k_minus, r.correct) == (sel, kp, km, v)
        assert _close(r.epsilon, eps), (sel, r.epsilon, eps)


@pytest.mark.parametrize("key", list(ONE_RUN_SCORES))
def test_one_run_selections_are_frozen(key):
    s, mem = _scores(*key)
    sels = ("grid_max_uncorrected", "bonferroni", "sample_split")
    _check_one_run_rows(
        one_run.audit_scores(s, mem, 1e-5, 0.95, selections=sels), ONE_RUN_SCORES[key]
    )
    res = one_run.audit_scores(
        s,
        mem,
        0.0,
        0.9,
        grid=[(10, 10), (50, 0), (0, 100)],
        selections=("bonferroni", "fixed"),
        fixed=(20, 20),
    )
    _check_one_run_rows(res, ONE_RUN_GRID[key])


# (n, shift, seed) -> (selection, estimate, epsilon, threshold, false_pos, false_neg, mu); the
# heldout rows re-frozen with the split in content order (issue 36: the same runs in any order
# get the same split), each equal to _reference_threshold_audit where its maximum is unique
MULTI_RUN = {
    (4000, 1.0, 4): [
        ("same_data", "cp", 2.0005349242093873, 2.42, 11, 1848, None),
        ("same_data", "gdp", 3.7677443115735083, 2.42, 11, 1848, 0.8780425763315107),
        ("heldout", "cp", 1.5540671396479953, 2.42, 7, 924, None),
        ("heldout", "gdp", 3.3107177931324765, -0.11, 556, 133, 0.7841988294489572),
    ],
    (3000, 3.0, 5): [
        ("same_data", "cp", 5.183890673467412, 3.16, 0, 805, None),
        ("same_data", "gdp", 16.040812535305587, 2.12, 16, 288, 2.9112257353719677),
        ("heldout", "cp", 4.425063797974428, 3.16, 0, 416, None),
        ("heldout", "gdp", 15.515265121972604, 2.16, 6, 153, 2.836843755711821),
    ],
    (2000, 0.0, 6): [
        ("same_data", "cp", 0.0, -2.49, 983, 4, None),
        ("same_data", "gdp", 0.0, -1.26, 882, 94, -0.11720918476490771),
        ("heldout", "cp", 0.0, -2.25, 491, 4, None),
        ("heldout", "gdp", 0.0, -1.27, 446, 52, -0.32237335028416503),
    ],
}


@pytest.mark.parametrize("key", list(MULTI_RUN))
def test_multi_run_cp_and_gdp_fit_are_frozen(key):
    s, mem = _scores(*key)
    s = np.round(s, 2)
    for sel, est, eps, tau, fp, fn, mu in MULTI_RUN[key]:
        r = multi_run.threshold_audit(s, mem, 1e-5, 0.95, selection=sel, estimate=est)
        assert (r.threshold, r.false_pos, r.false_neg) == (tau, fp, fn), (sel, est)
        assert _close(r.epsilon, eps), (sel, est, r.epsilon, eps)
        if mu is None:
            assert r.mu is None
        else:
            assert _close(r.mu, mu), (sel, est, r.mu, mu)


# (delta, mu) -> epsilon of mu-GDP (Dong, Roth, Su 2022, Corollary 2.13 inverted)
GDP = [
    ((1e-5, 0.5), 1.9930914044151153),
    ((1e-5, 1.0), 4.377178095681232),
    ((1e-5, 3.0), 16.67549440282816),
    ((1e-3, 0.05), 0.08401766265542446),
    ((1e-6, 8.0), 69.24396351258213),
]


@pytest.mark.parametrize(("args", "want"), GDP)
def test_gdp_epsilon_is_frozen(args, want):
    assert _close(gdp_epsilon(*args), want)


# (n, shift, seed) -> (selection, epsilon, r, wrong): GDP family, delta 1e-5, Chernoff tail
FDP_ONE_RUN = {
    (1000, 2.0, 7): [
        ("grid_max_uncorrected", 8.353310278063102, 1000, 166),
        ("bonferroni", 7.940449652299247, 1000, 166),
        ("sample_split", 7.486394769502806, 500, 87),
    ],
    (400, 0.5, 8): [
        ("grid_max_uncorrected", 0.057032019837803344, 400, 174),
        ("bonferroni", 0.0, 1, 1),
        ("sample_split", 0.0, 1, 0),
    ],
}


@pytest.mark.parametrize("key", list(FDP_ONE_RUN))
def test_fdp_one_run_is_frozen(key):
    s, mem = _scores(*key)
    sels = ("grid_max_uncorrected", "bonferroni", "sample_split")
    rows = fdp_one_run_audit.audit_scores(s, mem, selections=sels)
    for row, (sel, eps, r, wrong) in zip(rows, FDP_ONE_RUN[key], strict=True):
        assert (row["selection"], row["r"], row["wrong"]) == (sel, r, wrong)
        assert _close(row["epsilon"], eps), (sel, row["epsilon"], eps)


# (n, K, p) -> {(interval, order): (lower, upper)} at beta 0.05, variant "printed"
XBERN = {
    (500, 8, 0.3): {
        ("wilson", 1): (0.26575594088966936, 0.33291568183847187),
        ("wilson", 2): (0.26996701241600735, 0.3229381110563708),
        ("wilson", 4): (0.26653296709713875, 0.32527663626597747),
        ("bernstein", 1): (0.247043601649034, 0.3546126526177275),
        ("bernstein", 2): (0.2457361396891772, 0.343150132436187),
        ("bernstein", 4): (0.2420415611654072, 0.34532016830903883),
    },
    (2000, 16, 0.05): {
        ("wilson", 1): (0.03860202598549466, 0.0540004756954252),
        ("wilson", 2): (0.040217163823216086, 0.05110248143653774),
        ("wilson", 4): (0.03973884682435073, 0.051563802559450596),
        ("bernstein", 1): (0.03467515622214384, 0.05964883886815813),
        ("bernstein", 2): (0.03567772010364912, 0.05557625218399025),
        ("bernstein", 4): (0.03504645766930579, 0.05618246047694761),
    },
}


def test_xbern_intervals_are_frozen():
    rng = np.random.default_rng(9)
    for (n, K, p), want in XBERN.items():
        q = rng.beta(4 * p, 4 * (1 - p), size=(n, 1))
        x = (rng.random((n, K)) < q).astype(np.int8)
        for (interval, order), (lo, hi) in want.items():
            got = xbern.xbern_interval(x, 0.05, interval, order)
            assert _close(got[0], lo) and _close(got[1], hi), (n, interval, order, got)


def test_one_run_pruned_search_matches_the_loop_over_the_grid():
    """best_over_rows (sorted visits, early rejection test) returns best_of's row and bound,
    including the first row on ties at epsilon 0 (null scores)."""
    from dpaudit.estimators.selection import rules

    for seed, shift in [(10, 0.0), (11, 0.5), (12, 1.0), (13, 2.0), (14, 0.0)]:
        s, mem = _scores(600, shift, seed)
        rows = one_run._guess_table(s, mem, one_run.default_grid(600))
        for level in (0.95, 1 - 0.05 / len(rows)):

            def bound_at(row, lvl):
                return one_run.epsilon_lower_bound(600, row[2], row[3], 1e-5, lvl), *row[2:], 600

            want = rules.best_of(rows, level, bound_at, key=lambda b: b[0])
            got = one_run.best_over_rows(rows, level, mm=600, delta=1e-5)
            assert got[0] == want[0] and got[1][1:] == want[1][1:]
            assert _close(got[1][0], want[1][0])


@pytest.mark.parametrize("estimate", ["cp", "gdp"])
def test_multi_run_branch_and_bound_matches_the_bound_order_search(estimate):
    """argmax_over_thresholds (branch and bound on blocks of the sweep) returns the same
    index, value and rates as the search in the order of the cheap bound, on sweeps large
    enough to be split, with ties (rounded scores, null scores) and projected counts."""
    objective = _multi_run_objective(estimate)
    lvl = definition.rate_level(0.95)
    for n, shift, seed, digits in [(20000, 1.0, 20, 3), (20000, 0.0, 21, 3), (30000, 3.0, 22, 9)]:
        s, mem = _scores(n, shift, seed)
        sw = definition.sweep(np.round(s, digits), mem)
        assert sw.threshold.size > 4 * multi_run_search._LEAF
        for scale in (1.0, 0.7):
            args = (sw.false_pos * scale, sw.n_nonmembers * scale, sw.false_neg * scale)
            args = (*args, sw.n_members * scale, lvl, objective)
            got = multi_run_search.argmax_over_thresholds(*args)
            assert got == multi_run_search._argmax_in_bound_order(*args)
            full = objective(
                definition.cp_upper(args[0], args[1], lvl),
                definition.cp_upper(args[2], args[3], lvl),
            )
            assert got[1] == full.max()


@pytest.mark.parametrize("estimate", ["cp", "gdp"])
def test_multi_run_branch_and_bound_start_value_changes_nothing(estimate):
    """_branch_and_bound starts from the exact values at a few seeded points and a ``floor``
    (a value attained elsewhere): a floor at or below the maximum gives the same argmax as no
    floor, one above it gives None (the caller then searches the full sweep)."""
    objective = _multi_run_objective(estimate)
    lvl = definition.rate_level(0.95)
    s, mem = _scores(20000, 1.0, 23)
    sw = definition.sweep(s, mem)
    args = (sw.false_pos * 1.0, sw.n_nonmembers, sw.false_neg * 1.0, sw.n_members, lvl)
    want = multi_run_search._argmax_in_bound_order(*args, objective)
    for floor in (-np.inf, 0.0, want[1] - 1e-3, want[1]):
        assert multi_run_search._branch_and_bound(*args, objective, floor) == want
    assert multi_run_search._branch_and_bound(*args, objective, want[1] + 1e-9) is None


@pytest.mark.parametrize("estimate", ["cp", "gdp"])
def test_multi_run_binned_search_picks_the_sweeps_threshold(estimate):
    """binned_argmax (bin counts without sorting all scores, branch and bound over bins, a sort
    of the kept bins only) returns the threshold, counts, value and rates of the full sweep's
    search, with and without projected counts; on ties it hands back (None). Inputs large
    enough to be binned: shifted, null, rounded (ties) and heavy-tailed scores."""
    objective = _multi_run_objective(estimate)
    lvl = definition.rate_level(0.95)
    n = multi_run_search._BINNED_MIN + 10000
    decided = 0
    for shift, seed, kind in [(1.0, 30, "plain"), (3.0, 31, "rounded"), (0.3, 32, "cauchy")]:
        s, mem = _scores(n, shift, seed)
        if kind == "rounded":
            s = np.round(s, 2)
        if kind == "cauchy":
            rng = np.random.default_rng(seed)
            s = np.where(rng.random(n) < 0.01, 100 * rng.standard_cauchy(n), s)
        mem = mem.astype(np.int8)
        sw = definition.sweep(s, mem)
        for ev in (None, (12345, 23456)):
            ev0, ev1 = ev if ev else (None, None)
            got = multi_run_search.binned_argmax(s, mem, lvl, objective, ev0, ev1)
            got = got if got is None else got[:6]
            j, (val, a, b) = multi_run._maximiser(sw, objective, ev1, ev0)(None, lvl)
            want = (float(sw.threshold[j]), int(sw.false_pos[j]), int(sw.false_neg[j]), val, a, b)
            k0, n0, k1, n1 = sw.false_pos, sw.n_nonmembers, sw.false_neg, sw.n_members
            if ev:
                k0, n0, k1, n1 = k0 * (ev0 / n0), ev0, k1 * (ev1 / n1), ev1
            full = objective(definition.cp_upper(k0, n0, lvl), definition.cp_upper(k1, n1, lvl))
            unique = np.count_nonzero(full == full.max()) == 1
            if got is None:
                assert not unique  # only a tie hands back to the full sweep
                continue
            decided += 1
            assert got == want
            assert unique and got[3] == full.max() and j == int(np.argmax(full))
    assert decided >= 4
    # threshold_audit through the binned search equals the frozen reference implementation's
    s, mem = _scores(n, 1.0, 33)
    s = np.round(s, 3)
    for sel in ("same_data", "heldout"):
        r = multi_run.threshold_audit(s, mem, 1e-5, 0.95, selection=sel, estimate=estimate)
        ref = _reference_threshold_audit(s, mem, sel, estimate)
        assert (r.threshold, r.false_pos, r.false_neg) == ref[1:4]
        assert _close(r.epsilon, ref[0])


def _reference_threshold_audit(s, mem, selection, estimate):
    """(epsilon, threshold, false_pos, false_neg) by a plain loop-free evaluation of every
    threshold of the sweep (first maximum), the definition the searches must reproduce."""
    lvl = definition.rate_level(0.95)
    objective = _multi_run_objective(estimate)

    if selection == "same_data":
        sw = definition.sweep(s, mem)
        full = objective(
            definition.cp_upper(sw.false_pos, sw.n_nonmembers, lvl),
            definition.cp_upper(sw.false_neg, sw.n_members, lvl),
        )
        j = int(np.argmax(full))
        assert np.count_nonzero(full == full[j]) == 1
        value, tau, fp, fn = (
            float(full[j]),
            float(sw.threshold[j]),
            sw.false_pos[j],
            sw.false_neg[j],
        )
    else:
        sel, ev = multi_run.stratified_split(np.asarray(mem), 0.5, 0, score=s)
        sw = definition.sweep(s[sel], mem[sel])
        n1 = int(mem[ev].sum())
        n0 = ev.size - n1
        k0, k1 = sw.false_pos, sw.false_neg
        if estimate == "cp":
            k0, k1 = k0 * (n0 / sw.n_nonmembers), k1 * (n1 / sw.n_members)
            m0, m1 = n0, n1
        else:
            m0, m1 = sw.n_nonmembers, sw.n_members
        full = objective(definition.cp_upper(k0, m0, lvl), definition.cp_upper(k1, m1, lvl))
        j = int(np.argmax(full))
        assert np.count_nonzero(full == full[j]) == 1
        tau = float(sw.threshold[j])
        s_ev, m_ev = s[ev], mem[ev]
        fp = int(np.sum((s_ev > tau) & (m_ev == 0)))
        fn = int(np.sum((s_ev <= tau) & (m_ev == 1)))
        value = float(objective(definition.cp_upper(fp, n0, lvl), definition.cp_upper(fn, n1, lvl)))
    eps = value if estimate == "cp" else (gdp_epsilon(1e-5, value) if value > 0 else 0.0)
    return eps, tau, int(fp), int(fn)


def _multi_run_objective(estimate):
    """What the multi-run searches maximise: Eq. 1 at delta 1e-5 (``cp``) or the GDP mu."""
    from dpaudit.accounting.gaussian import gdp_mu_from_rates

    def objective(a, b):
        if estimate == "cp":
            return definition.epsilon_from_rates(a, b, 1e-5)
        return gdp_mu_from_rates(a, b)

    return objective
