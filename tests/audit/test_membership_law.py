"""The membership of a score file against the inclusion law it declares (dpaudit.audit):
issue 36, item 1. The one-run bounds (Steinke, Nasr, Jagielski 2023, Sec. 3) take the
canaries' membership to be independent fair coins; a file whose IN count is implausible under
them must give no valid bound, through the audit runner (``audit_setting``, the pipeline's
audit job), and a file of fair coins keeps its bounds."""

from __future__ import annotations

import numpy as np
import pytest

from dpaudit import scores
from dpaudit.audit import audit_setting, run_estimator
from dpaudit.mechanisms.one_run_ideal import gaussian_score_file
from dpaudit.scores import ScoreFile, ScoreFileError

M = 1000

#: Every estimator that applies to a one-run file, in the variants whose theorems differ: the
#: family-free ones and the f-DP tests of every null family, with guesses that favour IN.
ONE_RUN_BLOCKS = {
    "one_run": {"method": "one_run", "selections": ["bonferroni", "sample_split"]},
    "one_run_fixed": {"method": "one_run", "fixed_fraction": 1.0, "selections": ["fixed"]},
    "fdp_one_run_gdp": {"method": "fdp_one_run", "family": "gdp", "guess": "top_in"},
    "fdp_one_run_laplace": {"method": "fdp_one_run", "family": "laplace"},
    "fdp_one_run_approx_dp": {"method": "fdp_one_run", "family": "approx_dp", "delta": 0.0},
    "fdp_abstention_gdp": {"method": "fdp_abstention", "family": "gdp", "guess": "top_in"},
    "fdp_abstention_approx_dp": {"method": "fdp_abstention", "family": "approx_dp"},
    "attack_metrics": {"method": "attack_metrics", "resamples": 50},
}


def _meta(design: str = "one_run", **extra) -> dict:
    return {
        "experiment": "null",
        "setting": "noise",
        "seed": 0,
        "design": design,
        "threat_model": "simulation",
        "claimed_epsilon": 1.0,
        "delta": 1e-5,
        "accountant": "given",
        **extra,
    }


def _pure_noise(n_in: int, shape: tuple[int, int] = (1, M), design: str = "one_run", **meta):
    """N(0, 1) scores, no membership signal, ``n_in`` of the canaries IN (at random places)."""
    rng = np.random.default_rng(n_in)
    member = np.zeros(shape[0] * shape[1], dtype=np.int8)
    member[rng.permutation(member.size)[:n_in]] = 1
    ids = np.tile(np.arange(shape[1]), (shape[0], 1))
    score = rng.standard_normal(shape)
    return ScoreFile(score, member.reshape(shape), ids, _meta(design, **meta))


def _largest_valid(table) -> float:
    valid = table[table["valid"].astype(bool)]
    return float(valid["epsilon"].max()) if len(valid) else 0.0


@pytest.mark.parametrize("n_in", [1000, 990, 900])
def test_issue36_item1_pure_noise_not_a_fair_coin_gives_no_valid_bound(tmp_path, n_in):
    """Issue 36, item 1: pure N(0, 1) scores with 1000 / 990 / 900 of 1000 IN give no valid bound
    above 0.3 from any estimator through the audit runner (b656a52: one_run 5.10 / 3.84 / 1.89).
    An estimator that cannot run on the file (attack_metrics on only IN) says so."""
    path = scores.write(tmp_path / "seed0.npz", _pure_noise(n_in))
    for name, block in ONE_RUN_BLOCKS.items():
        try:
            table = audit_setting([[str(path)]], {name: block})
        except ScoreFileError as err:
            assert name == "attack_metrics" and n_in == M, err
            continue
        assert _largest_valid(table) <= 0.3, (name, table[["selection", "epsilon", "valid"]])


def test_issue36_item1_rows_name_the_count_and_carry_the_pvalue():
    """Issue 36, item 1: the rows of a coin-needing estimator read "no verdict: membership is not
    a fair coin (990 of 1000 IN)", with the test's p-value in column ``membership_pvalue``."""
    from dpaudit.audit import MEMBERSHIP_TEST_LEVEL, NOT_FAIR_COIN

    frame = run_estimator(_pure_noise(990), "one_run", {"method": "one_run"})
    assert frame["epsilon"].isna().all() and not frame["valid"].any()
    assert (frame["note"] == "no verdict: membership is not a fair coin (990 of 1000 IN)").all()
    assert NOT_FAIR_COIN.format(detail="990 of 1000 IN") == frame["note"].iloc[0]
    assert (frame["membership_pvalue"] < 1e-200).all() and MEMBERSHIP_TEST_LEVEL == 1e-3
    # attack_metrics (never a valid bound) is not gated but reports the same p-value
    metrics = run_estimator(_pure_noise(990), "attack_metrics", ONE_RUN_BLOCKS["attack_metrics"])
    assert "note" not in metrics and (metrics["membership_pvalue"] < 1e-200).all()


def test_issue36_item1_fair_coin_file_keeps_its_bounds():
    """Issue 36, item 1: a file of fair coins (the idealised Gaussian mechanism, mu = 2) keeps
    the bounds of b656a52, and its p-value is reported."""
    sf = gaussian_score_file(M, 0.5, 1e-5, seed=0)
    n_in = int(sf.membership.sum())
    assert 448 <= n_in <= 552  # within the test's acceptance region at m = 1000
    frame = run_estimator(sf, "one_run", {"method": "one_run"})
    assert _largest_valid(frame) > 1.0 and "note" not in frame
    assert (frame["membership_pvalue"] > 1e-3).all()


def test_issue36_item1_the_test_is_two_sided_at_its_level():
    """Issue 36, item 1: at m = 1000, 552 IN (p = 0.0011) keeps the bound, 553 (p = 0.00089)
    and 447 lose it; the same holds for OUT."""
    from dpaudit.audit import fair_coin_failure

    def file(n_in: int) -> ScoreFile:
        member = (np.arange(M) < n_in).astype(np.int8)[None]
        return ScoreFile(np.zeros((1, M)), member, np.arange(M)[None], _meta())

    assert fair_coin_failure(file(552)) == "" and fair_coin_failure(file(448)) == ""
    assert fair_coin_failure(file(553)) == "553 of 1000 IN"
    assert fair_coin_failure(file(447)) == "447 of 1000 IN"


def test_issue36_item1_only_in_or_only_out_gives_no_bound_at_any_size():
    """Issue 36, item 1: with m = 10 canaries all IN the binomial test cannot reject at 1e-3
    (p = 0.002), but a file with only IN (or only OUT) has no coins to audit: no valid bound."""
    for n_in in (0, 10):
        member = np.full((1, 10), n_in // 10, dtype=np.int8)
        sf = ScoreFile(np.arange(10.0)[None], member, np.arange(10)[None], _meta())
        frame = run_estimator(sf, "one_run", {"method": "one_run"})
        assert not frame["valid"].any()
        assert frame["note"].str.contains(f"{n_in} of 10 IN").all()


@pytest.mark.parametrize(
    "law, detail",
    [
        (0.9, "the file declares inclusion probability 0.9"),
        ("fixed", "the file declares membership fixed by its design"),
    ],
)
def test_issue36_item1_a_declared_law_other_than_a_fair_coin_gives_no_one_run_bound(law, detail):
    """Issue 36, item 1: the one-run bounds need fair coins: a file declaring another law (here
    with fair-looking counts) gets none; a law of 0.9 with 900 IN is plausible (p-value > 0.5)."""
    sf = gaussian_score_file(M, 0.5, 1e-5, seed=0)
    sf.meta[scores.INCLUSION_KEY] = law
    frame = run_estimator(sf, "one_run", {"method": "one_run"})
    assert not frame["valid"].any()
    assert (frame["note"] == f"no verdict: membership is not a fair coin ({detail})").all()
    noise = _pure_noise(900, inclusion_probability=0.9)
    plausible = run_estimator(noise, "one_run", {"method": "one_run"})
    assert (plausible["membership_pvalue"] > 0.5).all() and not plausible["valid"].any()


def test_issue36_item1_each_trial_is_tested_on_its_own_coins():
    """Issue 36, item 1: a one-run file's trials draw their own coins; a trial all IN loses its
    bounds although the file's IN count (1000 of 2000) is exactly half."""
    rng = np.random.default_rng(0)
    member = np.stack([np.ones(M), np.zeros(M)]).astype(np.int8)
    ids = np.tile(np.arange(M), (2, 1))
    sf = ScoreFile(rng.standard_normal((2, M)), member, ids, _meta())
    frame = run_estimator(sf, "one_run", {"method": "one_run"})
    assert not frame["valid"].any()
    assert set(frame["note"]) == {
        "no verdict: membership is not a fair coin (1000 of 1000 IN)",
        "no verdict: membership is not a fair coin (0 of 1000 IN)",
    }


@pytest.mark.parametrize("n_in", [1000, 990, 900, 0])
def test_issue36_item1_multi_run_and_lidp_pure_noise_give_no_valid_bound(n_in):
    """Issue 36, item 1: the multi-run and LiDP bounds condition on the membership (they count
    IN and OUT scores apart), so they are not gated, but on pure noise with 1000 / 990 / 900 / 0
    of 1000 IN they give no valid bound above 0.3, and a file with only IN or only OUT is an
    error naming it."""
    files = {
        "multi_run_cp": _pure_noise(n_in, (M, 1), "multi_run"),
        "lidp": _pure_noise(n_in, (50, 20), "lidp"),
    }
    for method, sf in files.items():
        try:
            frame = run_estimator(sf, method, {"method": method})
        except ScoreFileError as err:
            assert n_in in (0, M) or method == "lidp", err
            continue
        assert _largest_valid(frame) <= 0.3
        assert "note" not in frame  # not gated: its theorem does not need coins
