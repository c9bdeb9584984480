"""The multi_split selection (selection.rules.MultiSplit, selection.multi_split): the
combination against its definition, its wiring into one_run, fdp_one_run and multi_run_cp, and
Monte Carlo validity on mechanisms with known epsilon (small here; benchmarks/validity.py runs
the full check)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpaudit.config import validate_config
from dpaudit.estimators import METHODS
from dpaudit.estimators.fdp_one_run import audit as fdp_one_run_audit
from dpaudit.estimators.multi_run import bound as multi_run
from dpaudit.estimators.one_run import bound as one_run
from dpaudit.estimators.selection import rules
from dpaudit.scores import ScoreFile

DELTA = 1e-5


def _meta(design: str, claimed: float = 2.0) -> dict:
    return {
        "experiment": "t",
        "setting": "s",
        "seed": 0,
        "design": design,
        "threat_model": "simulation",
        "claimed_epsilon": claimed,
        "delta": DELTA,
        "accountant": "test",
    }


def test_combination_is_the_kth_largest_at_the_split_level():
    seen = []

    def run_split(split: rules.Split, level: float) -> float:
        seen.append((split.seed, level))
        return float(split.seed % 1000)

    rule = rules.MultiSplit(splits=7, quantile=0.5, seed=3)
    got = rules.combine_splits(rule, 0.95, run_split)
    values = sorted((s % 1000 for s, _ in seen), reverse=True)
    assert got.rank == 4 and got.result == values[3]  # ceil(0.5 * 7) = 4
    assert all(lvl == pytest.approx(1 - 0.5 * 0.05) for _, lvl in seen)
    assert len({s for s, _ in seen}) == 7  # distinct, fixed splits
    again = rules.combine_splits(rule, 0.95, lambda sp, lv: float(sp.seed % 1000))
    assert again.result == got.result
    # quantile 1/K is Bonferroni over the splits: the largest bound, each at 1 - alpha / K
    bonf = rules.MultiSplit(splits=5, quantile=0.2)
    assert bonf.rank() == 1 and bonf.level(0.95) == pytest.approx(1 - 0.05 / 5)
    assert rules.combine_p_values([0.01, 0.04, 0.2, 0.5], 0.5) == pytest.approx(0.08)
    assert rules.combine_p_values([0.3, 0.9], 0.5) == 0.6
    with pytest.raises(ValueError, match="quantile"):
        rules.MultiSplit(quantile=0.0)
    with pytest.raises(ValueError, match="split"):
        rules.MultiSplit(splits=0)
    with pytest.raises(ValueError, match="combine_splits"):
        rules.strategy("multi_split", [1], None, 0, "r")


def _one_run_file(m: int, mu: float, seed: int) -> ScoreFile:
    rng = np.random.default_rng(seed)
    member = (rng.random((1, m)) < 0.5).astype(np.int8)
    score = mu * member + rng.normal(size=member.shape)
    return ScoreFile(score, member, np.arange(m)[None], _meta("one_run"))


def test_one_run_multi_split_row_is_the_combined_sample_splits():
    sf = _one_run_file(600, 2.0, 0)
    params = {"selections": ["sample_split", "multi_split"], "splits": 4, "split_quantile": 0.5}
    rows = METHODS["one_run"].run(sf, params)
    assert [r["selection"] for r in rows] == ["sample_split", "multi_split"]
    ms = rows[1]
    rule = rules.MultiSplit(splits=4, quantile=0.5, seed=0)
    each = [
        one_run.audit_scores(
            sf.score[0],
            sf.membership[0],
            DELTA,
            rule.level(0.95),
            grid=one_run.default_grid(600),
            selections=["sample_split"],
            split_seed=rule.split(s).seed,
        )[0].epsilon
        for s in range(4)
    ]
    assert ms["epsilon"] == sorted(each, reverse=True)[1]  # ceil(0.5 * 4) = 2nd largest
    assert ms["valid"] and ms["confidence"] == 0.95 and ms["split_rank"] == 2
    assert ms["level_per_test"] == pytest.approx(0.975)
    assert ms["split_median_epsilon"] == pytest.approx(np.median(each))


def test_fdp_one_run_multi_split_row_is_the_combined_sample_splits():
    sf = _one_run_file(300, 2.5, 1)
    params = {
        "selections": ["multi_split"],
        "splits": 3,
        "split_quantile": 1 / 3,  # Bonferroni over 3 splits
        "r_grid": [20, 50, 100],
    }
    (row,) = METHODS["fdp_one_run"].run(sf, params)
    rule = rules.MultiSplit(splits=3, quantile=1 / 3)
    each = [
        fdp_one_run_audit.audit_scores(
            sf.score[0],
            sf.membership[0],
            delta=DELTA,
            confidence=rule.level(0.95),
            selections=("sample_split",),
            r_grid=[20, 50, 100],
            split_seed=rule.split(s).seed,
            claimed_epsilon=2.0,
        )[0]
        for s in range(3)
    ]
    assert row["epsilon"] == max(r["epsilon"] for r in each)
    assert row["level_per_test"] == pytest.approx(1 - 0.05 / 3)
    assert row["p_value"] == pytest.approx(min(1.0, 3 * min(r["p_value"] for r in each)))
    assert row["valid"] and row["selection"] == "multi_split"


def _rr_runs(rng, eps: float, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Randomized response with pure eps, n runs per side (tight at its one threshold)."""
    flip = 1.0 / (1.0 + math.exp(eps))
    s = np.concatenate([rng.random(n) >= flip, rng.random(n) < flip]).astype(float)
    return s, np.r_[np.ones(n, np.int8), np.zeros(n, np.int8)]


def test_multi_run_multi_split_monte_carlo_validity_randomized_response():
    """eps-RR, 2000 runs per side, 150 repetitions: the multi_split bound (4 held-out splits,
    gamma 1/2) exceeds eps in at most 5% (+ 3 s.e.); the negative control, the best of the same
    4 splits at the nominal level (no correction), exceeds it more often, so the check can fail."""
    eps, n, reps, conf = 2.0, 2000, 150, 0.95
    rng = np.random.default_rng(7)
    rule = rules.MultiSplit(splits=4, quantile=0.5)
    over = uncorrected = 0
    total = 0.0
    for rep in range(reps):
        score, member = _rr_runs(rng, eps, n)
        sf = ScoreFile(
            score[:, None], member[:, None], np.zeros((2 * n, 1), np.int64), _meta("multi_run")
        )
        params = {"selections": ["multi_split"], "splits": 4, "split_seed": rep}
        (row,) = METHODS["multi_run_cp"].run(sf, params)
        over += row["epsilon"] > eps
        total += row["epsilon"]
        r = rules.MultiSplit(splits=4, seed=rep)
        best = max(
            multi_run.threshold_audit(
                score, member, DELTA, conf, "heldout", split_seed=r.split(s).seed
            ).epsilon
            for s in range(4)
        )
        uncorrected += best > eps
    slack = 3 * math.sqrt(0.05 * 0.95 / reps)
    assert over / reps <= 0.05 + slack
    assert uncorrected > over  # the uncorrected best split is caught more often
    assert total / reps > 0.7 * eps  # and the bound has power
    assert rule.rank() == 2


def test_one_run_multi_split_validity_and_null():
    """Gaussian scores mu = 3 (m = 300): the multi_split bound stays below the true
    epsilon(delta) in >= 95% of 25 repetitions and detects the mechanism; on null scores it is 0
    in >= 95%."""
    from dpaudit.accounting.gaussian import gdp_epsilon

    mu, m, reps = 3.0, 300, 25
    true_eps = gdp_epsilon(DELTA, mu)
    rng = np.random.default_rng(2)
    over = positive = zeros = 0
    grid = one_run.default_grid(m)
    for t in range(reps):
        s = rng.integers(0, 2, size=m)
        rule = rules.MultiSplit(splits=3, seed=t)
        from dpaudit.estimators.selection.multi_split import one_run_row

        real = one_run_row(mu * s + rng.normal(size=m), s, DELTA, 0.95, grid, rule)
        null = one_run_row(rng.normal(size=m), s, DELTA, 0.95, grid, rule)
        over += real["epsilon"] > true_eps
        positive += real["epsilon"] > 0
        zeros += null["epsilon"] == 0
    assert over / reps <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / reps)
    assert positive >= 0.9 * reps
    assert zeros >= 0.95 * reps


def test_config_accepts_multi_split_and_rejects_bad_keys():
    for method in ("one_run", "fdp_one_run", "multi_run_cp"):
        block = {"method": method, "selections": ["multi_split"], "splits": 5}
        out = validate_config({"estimators": {"e": block}}, require_experiments=False)
        assert out["estimators"]["e"]["split_quantile"] == 0.5
        for bad in ({"splits": 0}, {"split_quantile": 0}, {"split_quantile": 1.5}):
            config = {"estimators": {"e": {**block, **bad}}}
            with pytest.raises(Exception, match=next(iter(bad))):
                validate_config(config, require_experiments=False)
