"""The fast threshold sweep of the LiDP estimator (:mod:`dpaudit.estimators.lidp.bound`) against the
implementation it replaced (binary search per score, ``np.quantile``, per-row histograms):
identical grids, identical integer count tables, identical eps_hat curves, the same tau* and
the same audit rows, on random inputs with many ties (scores on the grid points included).

The reference functions below are the code before the speed-up (commit e74a1ca), verbatim up
to names.
"""

from __future__ import annotations

import numpy as np
import pytest

from dpaudit.estimators.lidp import bound as lidp
from dpaudit.estimators.lidp import xbern
from dpaudit.estimators.lidp.xbern import XBernSummary

CASES = [("wilson", 1), ("wilson", 2), ("wilson", 4), ("bernstein", 2), ("clopper_pearson", 1)]


def ref_threshold_grid(score_in, score_out, size=lidp.GRID_SIZE):
    lo_q, hi_q = lidp.GRID_QUANTILES
    qi = np.quantile(score_in, [lo_q, hi_q])
    qo = np.quantile(score_out, [lo_q, hi_q])
    return np.linspace(min(qi[0], qo[0]), max(qi[1], qo[1]), int(size))


def ref_summaries_over_grid(score, grid, order):
    n, K = score.shape
    G = len(grid)
    order = min(order, K)
    per_count = xbern.per_row_moments(np.arange(K + 1), K, order)
    hist_counts = np.zeros((K + 1, G), dtype=np.int64)
    cols = np.arange(G)
    for start in range(0, n, 2048):
        block = score[start : start + 2048]
        rows = block.shape[0]
        c = np.searchsorted(grid, block, side="right")
        hist = np.bincount(
            (np.arange(rows)[:, None] * (G + 1) + c).ravel(), minlength=rows * (G + 1)
        ).reshape(rows, G + 1)
        above = np.cumsum(hist[:, ::-1], axis=1)[:, ::-1][:, 1:]
        hist_counts += np.bincount((above * G + cols).ravel(), minlength=(K + 1) * G).reshape(
            K + 1, G
        )
    moments = per_count @ hist_counts / n
    first = (score[:, :1] >= grid[None, :]).sum(axis=0)
    return XBernSummary(n=n, K=K, moments=moments, first=first)


def ref_tune(si, so, interval, order, grid_size):
    grid = ref_threshold_grid(si, so, grid_size)
    sx = ref_summaries_over_grid(si, grid, order)
    sy = ref_summaries_over_grid(so, grid, order)
    p1, p0 = lidp._side_bounds(sx, sy, lidp.BoundSpec(1e-5, 0.95, interval, order, "printed"))
    eps = lidp.epsilon_from_bounds(p1, p0, 1e-5)
    j = int(np.argmax(eps))
    return grid, eps, float(grid[j]), float(eps[j])


def random_scores(rng, n, K, kind):
    shift = rng.uniform(0, 1)
    si = rng.standard_normal((n, K)) + shift + rng.standard_normal((n, 1)) * 0.3
    so = rng.standard_normal((n, K))
    if kind == "rounded":  # heavy ties, many scores exactly on grid points
        si, so = np.round(si, 1), np.round(so, 1)
    elif kind == "integer":
        si, so = np.floor(si * 2), np.floor(so * 2)
    return si, so


@pytest.mark.parametrize("kind", ["continuous", "rounded", "integer"])
@pytest.mark.parametrize(
    ("n", "K", "G"), [(300, 1, 500), (200, 8, 500), (150, 40, 30), (97, 600, 50), (2100, 3, 500)]
)
def test_sweep_identical_to_reference(kind, n, K, G):
    """Same grid, same eps_hat at every threshold, same tau* and eps_hat(tau*) (both the
    sorted-difference path, K < G, and the histogram path, K >= G)."""
    rng = np.random.default_rng(hash((kind, n, K, G)) % 2**32)
    si, so = random_scores(rng, n, K, kind)
    for interval, order in CASES:
        if K < order:
            continue
        grid, eps_ref, tau_ref, best_ref = ref_tune(si, so, interval, order, G)
        assert np.array_equal(lidp.threshold_grid(si, so, G), grid)
        eps, _, _ = lidp.epsilon_curve(si, so, grid, lidp.BoundSpec(1e-5, 0.95, interval, order))
        assert np.array_equal(eps, eps_ref)
        tau, best = lidp.tune_threshold(si, so, lidp.BoundSpec(1e-5, 0.95, interval, order), G)
        assert (tau, best) == (tau_ref, best_ref)


def test_count_tables_identical_on_scores_at_grid_points():
    """Every score equal to a grid point (the >= boundary), and an irregular grid."""
    rng = np.random.default_rng(3)
    grid = np.linspace(-1.0, 2.0, 31)
    score = rng.choice(grid, size=(400, 12))
    irregular = np.sort(np.concatenate([grid, [0.05, 0.051, 1.7]]))
    for g in (grid, irregular):
        for order in (1, 2, 4):
            a = lidp.summaries_over_grid(score, g, order)
            b = ref_summaries_over_grid(score, g, order)
            assert np.array_equal(a.moments, b.moments) and np.array_equal(a.first, b.first)


def test_grid_index_is_searchsorted_right():
    rng = np.random.default_rng(4)
    score = np.concatenate([rng.standard_normal(5000) * 3, [-1e300, 1e300, 0.0, -2.0, 2.0]])
    grids = [
        np.linspace(-2.0, 2.0, 500),
        np.linspace(0.1, 0.3, 7),
        np.array([0.5]),
        np.full(4, 0.25),  # zero step
        np.sort(rng.standard_normal(50)),  # irregular
        np.array([-2.0, -2.0, 0.0, 2.0]),  # duplicates
    ]
    for g in grids:
        s = np.concatenate([score, g, np.nextafter(g, np.inf), np.nextafter(g, -np.inf)])
        assert np.array_equal(lidp.grid_index(s, g), np.searchsorted(g, s, side="right"))


@pytest.mark.parametrize("N", [2, 11, 1000, 70_001, 300_000])
def test_quantiles_identical_to_numpy(N):
    """Bracket-and-select quantiles equal ``np.quantile`` bit for bit (subsampled brackets
    for N > 2^16, ties, sorted input)."""
    rng = np.random.default_rng(N)
    for x in (
        rng.standard_normal(N),
        np.round(rng.standard_normal(N), 1),
        rng.integers(0, 3, N).astype(float),
        np.sort(rng.standard_normal(N)),
    ):
        got = lidp.quantiles(x.reshape(-1, 1), (0.1, 0.9), direct_size=0)
        assert np.array_equal(got, np.quantile(x, [0.1, 0.9]))


def test_audit_rows_identical_to_reference_protocol():
    """audit_scores with declared held-out rows: tau* from the reference sweep on the first h
    rows, the bound on the rest, field by field."""
    rng = np.random.default_rng(9)
    si, so = random_scores(rng, 600, 16, "rounded")
    h = 250
    for interval, order in CASES:
        _, _, tau, best = ref_tune(si[:h], so[:h], interval, order, lidp.GRID_SIZE)
        ref = lidp.epsilon_lower_bound(
            si[h:] >= tau, so[h:] >= tau, lidp.BoundSpec(1e-5, 0.95, interval, order)
        )
        got = lidp.audit_scores(
            si, so, 1e-5, interval=interval, order=order, heldout_trials=h
        ).as_row()
        assert got["threshold"] == tau and got["tuned_epsilon"] == best
        assert got["n_tune"] == h and got["n_trials"] == 600 - h
        for key, value in ref.as_row().items():
            assert got[key] == value or (np.isnan(value) and np.isnan(got[key])), key


def test_split_in_out_identical_to_boolean_masks():
    """The column fast path of split_in_out (one membership pattern for all rows: contiguous
    or interleaved columns) returns what the boolean masks return; mixed patterns still go
    through the masks."""
    from dpaudit.estimators.lidp.audit import split_in_out
    from dpaudit.scores import ScoreFile

    rng = np.random.default_rng(12)
    n, C = 50, 9
    meta = dict(
        experiment="t",
        setting="s",
        seed=0,
        design="lidp",
        threat_model="simulation",
        claimed_epsilon=1.0,
        delta=1e-5,
        accountant="test",
    )
    patterns = [
        np.tile([1, 1, 1, 1, 0, 0, 0, 0, 0], (n, 1)),  # contiguous: views
        np.tile([0, 1, 0, 1, 1, 0, 0, 1, 0], (n, 1)),  # interleaved: column gather
        np.array([rng.permutation([1, 1, 1, 1, 0, 0, 0, 0, 0]) for _ in range(n)]),  # mixed
    ]
    for mem in patterns:
        score = rng.standard_normal((n, C))
        sf = ScoreFile(
            score=score,
            membership=mem.astype(np.int8),
            canary_id=np.tile(np.arange(C), (n, 1)),
            meta=meta,
        )
        si, so = split_in_out(sf)
        b = mem.astype(bool)
        assert np.array_equal(si, score[b].reshape(n, -1))
        assert np.array_equal(so, score[~b].reshape(n, -1))


def test_blocking_does_not_change_the_counts(monkeypatch):
    """Many small blocks (grid_index and count tables) give the same tables as one block."""
    rng = np.random.default_rng(13)
    si, so = random_scores(rng, 300, 24, "rounded")
    grid = ref_threshold_grid(si, so, 60)
    monkeypatch.setattr(lidp, "CHUNK_SCORES", 100)  # 4 rows per block
    monkeypatch.setattr(lidp, "GRID_INDEX_BLOCK", 50)  # 2 rows per block
    for score in (si, so):
        for order in (1, 2, 4):
            a = lidp.summaries_over_grid(score, grid, order)
            b = ref_summaries_over_grid(score, grid, order)
            assert np.array_equal(a.moments, b.moments) and np.array_equal(a.first, b.first)
    idx = lidp.grid_index(si, grid)
    assert np.array_equal(idx, np.searchsorted(grid, si, side="right"))
