"""The options of the f-DP abstention audit beyond the membership game with GDP / Laplace /
f_{eps,delta} nulls (Mahloujifar, Melis, Chaudhuri, ICML 2025, arXiv:2410.22235): the
subsampled-Gaussian (DP-SGD) family with fixed q and steps, and the reconstruction game with
k > 2 options per canary (Alg. 2, Theorem 3.1)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dpaudit.audit import run_estimator
from dpaudit.estimators.fdp_abstention import bound as F
from dpaudit.mechanisms.dpsgd_ideal import dpsgd_scores

SE3 = 3 * math.sqrt(0.05 * 0.95)  # three standard errors at 0.05, times 1 / sqrt(reps)

# ------------------------------------------------------------------ subsampled Gaussian


@pytest.mark.parametrize(("mu", "steps", "mu_gdp"), [(0.5, 1, 0.5), (1.0, 1, 1.0), (0.5, 4, 1.0)])
def test_sgm_at_q1_is_the_gaussian_curve(mu, steps, mu_gdp):
    """Definition: with q = 1 every step is the Gaussian mechanism, and ``steps`` of them
    compose to sqrt(steps) mu-GDP; the numerical inverse is the GDP one to 1e-3 and never
    above it (the pessimistic privacy-loss distribution only weakens the null)."""
    sgm = F.inverse_blow_up("subsampled_gaussian", mu, q=1.0, steps=steps)
    gdp = F.inverse_blow_up("gdp", mu_gdp)
    for y in (1e-6, 1e-4, 1e-3, 0.01, 0.1, 0.5, 0.9, 0.99):
        assert gdp(y) * (1 - 1e-3) <= sgm(y) <= gdp(y) * (1 + 1e-9), y


def test_sgm_one_step_is_the_symmetrised_subsampled_pair():
    """Definition, q < 1: one step is the pair N(0, s^2) vs (1 - q) N(0, s^2) + q N(1, s^2)
    (s = 1/mu) in both orders; f_bar is the upper concave hull of the Neyman-Pearson tests
    of both (thresholds on x, closed form). The numerical inverse matches it to 1e-4 and is
    never above it."""
    mu, q = 2.0, 0.3
    s = 1.0 / mu
    t = np.linspace(-20, 20, 200_001)
    a1, p1 = stats.norm.sf(t / s), (1 - q) * stats.norm.sf(t / s) + q * stats.norm.sf((t - 1) / s)
    a2 = (1 - q) * stats.norm.cdf(t / s) + q * stats.norm.cdf((t - 1) / s)
    p2 = stats.norm.cdf(t / s)
    hx, hy = F._upper_hull(np.concatenate([a1, a2, [0, 1]]), np.concatenate([p1, p2, [0, 1]]))
    inv = F.inverse_blow_up("subsampled_gaussian", mu, q=q, steps=1)
    for y in (1e-4, 1e-3, 0.01, 0.1, 0.3, 0.5, 0.9, 0.99):
        exact = float(np.interp(y, hy, hx))
        assert exact * (1 - 1e-4) <= inv(y) <= exact * (1 + 1e-9), y


def test_sgm_inverse_is_numerically_safe():
    """Defined on all of [0, 1], finite, non-decreasing, identity at mu = 0, and 0 below the
    curve's atom at alpha = 0 (no root finding, nothing to diverge)."""
    ys = np.concatenate(([0.0, 1e-300, 1e-20], np.linspace(1e-9, 1 - 1e-9, 200), [1 - 1e-16, 1]))
    for mu, q, steps in ((1.0, 0.01, 100), (5.0, 0.5, 2), (0.1, 1.0, 1)):
        inv = F.inverse_blow_up("subsampled_gaussian", mu, q=q, steps=steps)
        xs = np.array([inv(y) for y in ys])
        assert np.all(np.isfinite(xs)) and np.all((0 <= xs) & (xs <= 1))
        assert np.all(np.diff(xs) >= 0) and xs[0] == 0.0 and xs[-1] == 1.0
    ident = F.inverse_blow_up("subsampled_gaussian", 0.0, q=0.1, steps=10)
    assert [ident(y) for y in (0.0, 0.3, 1.0)] == [0.0, 0.3, 1.0]


def test_sgm_needs_q_and_other_families_refuse_it():
    with pytest.raises(ValueError, match="needs a sampling rate q"):
        F.inverse_blow_up("subsampled_gaussian", 1.0)
    with pytest.raises(ValueError, match="steps must be an integer >= 1"):
        F.inverse_blow_up("subsampled_gaussian", 1.0, q=0.1, steps=0)
    with pytest.raises(ValueError, match="belong to family subsampled_gaussian"):
        F.param_lower_bound(100, 50, 40, "gdp", q=0.1)
    with pytest.raises(ValueError, match="does not take family subsampled_gaussian"):
        F.best_over_grid(100, [10], 0.95, counts=lambda r: (5, 5, 0), family="subsampled_gaussian")


def _balanced_correct(score: np.ndarray, member: np.ndarray, r: int) -> int:
    order = np.argsort(score, kind="stable")
    return int(member[order[-(r // 2) :]].sum() + (1 - member[order[: r // 2]]).sum())


def test_sgm_monte_carlo_validity():
    """Idealised DP-SGD (sigma = 0.7, q = 0.5, 4 steps, m = 1000, white-box privacy-loss
    scores, r = 200 balanced guesses): the test rejects the true curve (mu = 1/sigma) in at
    most 5% of runs (three standard errors), and a curve of mu = 0.35/sigma in over 90% of
    them (not vacuous: the median bound is mu = 0.68, 48% of the truth, epsilon 3.84 of 11.37
    at delta = 1e-5)."""
    sigma, q, steps, m, r, reps = 0.7, 0.5, 4, 1000, 200, 300
    rng = np.random.default_rng(11)
    true_inv = F.inverse_blow_up("subsampled_gaussian", 1 / sigma, q=q, steps=steps)
    weak_inv = F.inverse_blow_up("subsampled_gaussian", 0.35 / sigma, q=q, steps=steps)
    over = power = 0
    for _ in range(reps):
        c = _balanced_correct(*dpsgd_scores(m, sigma, q, steps, rng), r)
        over += F.rejects(m, r, c, true_inv, 0.05)
        power += F.rejects(m, r, c, weak_inv, 0.05)
    assert over / reps <= 0.05 + SE3 / math.sqrt(reps)
    assert power / reps > 0.9


def test_sgm_monte_carlo_validity_small_q_many_steps():
    """Idealised DP-SGD at the schedule of config/cpu/one_run.yaml's tight Fig. 6 runs (q =
    B / (n - m + m/2) = 100 / 1578, 100 steps, m = 1000, r = m/2 = 500 balanced guesses) and
    sigma = 0.76 (epsilon 8.01 at delta = 1e-5): the true curve is rejected in at most 5% of
    runs (three standard errors; measured 0 of 200), and the curve of mu = 0.5/sigma (epsilon
    2.12) in over 90% of them (not vacuous). About 5 s (13 s under load)."""
    sigma, q, steps, m, r, reps = 0.76, 100 / 1578, 100, 1000, 500, 200
    rng = np.random.default_rng(5)
    true_inv = F.inverse_blow_up("subsampled_gaussian", 1 / sigma, q=q, steps=steps)
    weak_inv = F.inverse_blow_up("subsampled_gaussian", 0.5 / sigma, q=q, steps=steps)
    over = power = 0
    for _ in range(reps):
        c = _balanced_correct(*dpsgd_scores(m, sigma, q, steps, rng), r)
        over += F.rejects(m, r, c, true_inv, 0.05)
        power += F.rejects(m, r, c, weak_inv, 0.05)
    assert over / reps <= 0.05 + SE3 / math.sqrt(reps)
    assert power / reps > 0.9
    assert F.sgm_epsilon(1 / sigma, q, steps, 1e-5) == pytest.approx(8.01, abs=0.01)


@pytest.mark.slow
def test_sgm_through_the_audit_runner():
    """A score file through ``run_estimator``: the rows assume the DP-SGD curve, q and steps
    reach the bound (steps = 4 gives a different bound from steps = 1) and steps with another
    family is an error naming the family (about 9 s: two bisections over PLD curves)."""
    from dpaudit.mechanisms.dpsgd_ideal import dpsgd_score_file

    sf = dpsgd_score_file(400, 0.7, 0.5, 4, 1e-5, seed=0)
    spec = {"method": "fdp_abstention", "family": "subsampled_gaussian", "q": 0.5}
    spec |= {"selections": ["fixed"], "r": 200}
    four = run_estimator(sf, "x", {**spec, "steps": 4}).iloc[0]
    one = run_estimator(sf, "x", {**spec, "steps": 1}).iloc[0]
    assert four["assumes"] == "subsampled_gaussian_steps" and four["valid"]
    assert (four["q"], four["steps"], one["steps"]) == (0.5, 4, 1)
    assert 0 < four["epsilon"] < sf.claimed_epsilon
    assert four["epsilon"] != one["epsilon"]
    with pytest.raises(ValueError, match="steps belongs to family subsampled_gaussian"):
        run_estimator(sf, "x", {**spec, "family": "gdp", "q": None, "steps": 4})


def _fixed_sgm_rows(sf, **block):
    """The fdp_abstention subsampled_gaussian rows of ``sf`` at r = 40 of m = 80 (cheap:
    one step, a small bisection)."""
    from dpaudit.estimators.registry import get

    spec = {"family": "subsampled_gaussian", "selections": ["fixed"], "r": 40, **block}
    return get("fdp_abstention").run(sf, spec)


def test_sgm_takes_q_and_steps_from_the_score_file():
    """A block that leaves q and steps null audits against the curve of the file's own
    schedule (metadata ``sample_rate`` and ``steps``, as the training job writes them): the
    same rows as the block that names those values."""
    from dpaudit.mechanisms.dpsgd_ideal import dpsgd_score_file

    sf = dpsgd_score_file(80, 0.7, 0.5, 2, 1e-5, seed=3)
    assert (sf.meta["sample_rate"], sf.meta["steps"]) == (0.5, 2)
    (from_file,) = _fixed_sgm_rows(sf)
    (named,) = _fixed_sgm_rows(sf, q=0.5, steps=2)
    assert (from_file["q"], from_file["steps"]) == (0.5, 2)
    assert {k: v for k, v in from_file.items() if k != "p_value"} == {
        k: v for k, v in named.items() if k != "p_value"
    }
    assert from_file["epsilon"] > 0


def test_sgm_block_values_win_over_the_file():
    """q or steps given in the block win over the file's (the null is the auditor's choice),
    each separately, and the rows report what was used: a different curve, a different
    bound."""
    from dpaudit.mechanisms.dpsgd_ideal import dpsgd_score_file

    sf = dpsgd_score_file(80, 0.7, 0.5, 2, 1e-5, seed=3)
    (base,) = _fixed_sgm_rows(sf)
    (steps1,) = _fixed_sgm_rows(sf, steps=1)
    (q1,) = _fixed_sgm_rows(sf, q=1.0)
    assert (steps1["q"], steps1["steps"]) == (0.5, 1)
    assert (q1["q"], q1["steps"]) == (1.0, 2)
    assert steps1["epsilon"] != base["epsilon"] and q1["epsilon"] != base["epsilon"]


def test_sgm_without_q_or_steps_anywhere_is_an_error_naming_the_file():
    """A file whose metadata lacks the schedule and a block that gives none: an error naming
    the file, the parameter and the metadata key; the block's value alone suffices."""
    from dpaudit.mechanisms.dpsgd_ideal import dpsgd_score_file
    from dpaudit.scores import ScoreFileError

    sf = dpsgd_score_file(80, 0.7, 0.5, 2, 1e-5, seed=3)
    del sf.meta["sample_rate"], sf.meta["steps"]
    sf.source = "runs/x/scores.npz"
    with pytest.raises(ScoreFileError, match=r"runs/x/scores.npz: .* needs q, .* 'sample_rate'"):
        _fixed_sgm_rows(sf)
    with pytest.raises(ScoreFileError, match=r"runs/x/scores.npz: .* needs steps, .* 'steps'"):
        _fixed_sgm_rows(sf, q=0.5)
    (row,) = _fixed_sgm_rows(sf, q=0.5, steps=2)
    assert (row["q"], row["steps"]) == (0.5, 2)
    sf.meta["steps"] = 0
    with pytest.raises(ScoreFileError, match="steps must be an integer >= 1, got 0"):
        _fixed_sgm_rows(sf, q=0.5)


# ------------------------------------------------------------------ reconstruction, k > 2


def test_k2_is_the_membership_bound():
    """Definition: k = 2 is the membership game (Alg. 1); the default is k = 2."""
    for m, g, c in ((1000, 200, 180), (10_000, 1000, 900)):
        assert F.param_lower_bound(m, g, c, "gdp", k=2) == F.param_lower_bound(m, g, c, "gdp")
    with pytest.raises(ValueError, match="options per canary k must be an integer >= 2"):
        F.param_lower_bound(100, 50, 40, "gdp", k=1)


@pytest.mark.parametrize(("k", "m", "eps"), [(5, 1000, 2.0), (10, 200, 3.0), (50, 100, 4.0)])
def test_reconstruction_exact_validity_on_k_ary_randomized_response(k, m, eps):
    """k-ary randomized response (correct w.p. e^eps / (e^eps + k - 1)) is eps-DP between any
    two of the k options: every canary named (c' = m), the exact probability that the test
    rejects its true null f_{eps,0} is at most 0.05, and close to it (the recursion with k is
    nearly exact here; ignoring k would never reject). The same rate with the factor k in
    place of k - 1 exceeds 0.05 for k <= 10: the test is sensitive to the factor of Theorem
    3.1."""
    p = math.exp(eps) / (math.exp(eps) + k - 1)
    wrong_pmf = stats.binom.pmf(np.arange(m + 1), m, 1 - p)
    rate = F.rejection_rate(m, m, wrong_pmf, "approx_dp", eps, 0.0, 0.95, k=k)
    assert 0.03 < rate <= 0.05
    assert F.rejection_rate(m, m, wrong_pmf, "approx_dp", eps, 0.0, 0.95, k=2) < 1e-6
    inv = F.inverse_blow_up("approx_dp", eps)
    too_big = sum(
        wrong_pmf[u]
        for u in range(m + 1)
        if F.rejects(m, m, m - u, lambda y: k / (k - 1) * inv(y), 0.05, k)
    )
    if k <= 10:  # at k = 50 the factor 50/49 is within the test's slack (0.038 vs 0.05)
        assert too_big > 0.05


@pytest.mark.slow
def test_reconstruction_monte_carlo_validity_gaussian():
    """Reconstruction on a Gaussian mechanism (m = 500 sets of k = 10 orthogonal unit
    directions, the chosen one shifted by 1, noise sigma = 0.8: sqrt(2)/sigma-GDP between two
    options), the auditor names the argmax on the 100 sets of largest margin and abstains on
    the rest: the true curve is rejected in at most 5% of runs (three standard errors); the
    mean bound lies below the truth and above the membership reading (k = 2) of the counts."""
    m, k, sigma, r, reps = 500, 10, 0.8, 100, 200
    mu = math.sqrt(2) / sigma
    rng = np.random.default_rng(5)
    inv = F.inverse_blow_up("gdp", mu)
    over = 0
    counts = []
    for _ in range(reps):
        chosen = rng.integers(0, k, size=m)
        obs = rng.normal(0.0, sigma, size=(m, k))
        obs[np.arange(m), chosen] += 1.0
        top2 = np.sort(obs, axis=1)[:, -2:]
        named = np.argmax(obs, axis=1)
        keep = np.argsort(top2[:, 1] - top2[:, 0])[-r:]
        c = int((named[keep] == chosen[keep]).sum())
        counts.append(c)
        over += F.rejects(m, r, c, inv, 0.05, k)
    assert over / reps <= 0.05 + SE3 / math.sqrt(reps)
    c_mean = int(np.mean(counts))
    bound_k = F.param_lower_bound(m, r, c_mean, "gdp", k=k)
    assert F.param_lower_bound(m, r, c_mean, "gdp") < bound_k < mu
