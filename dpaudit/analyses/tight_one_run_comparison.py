"""Idealised one-run audits of Xiang et al. 2025 (arXiv:2509.08704, §6): the f-DP bound
(:mod:`dpaudit.estimators.fdp_one_run`) against the one-run bound of Steinke et al.
(:mod:`dpaudit.estimators.one_run.bound`) on the same released guesses of the per-bit mechanisms of
:mod:`dpaudit.mechanisms.fdp_one_run_sim` (analogues of the paper's Section 6 figures).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dpaudit.estimators.fdp_one_run import bound as fdp_bound
from dpaudit.estimators.fdp_one_run import guesses as fdp
from dpaudit.estimators.fdp_one_run import tails
from dpaudit.estimators.one_run import bound as one_run
from dpaudit.mechanisms import fdp_one_run_sim as sim


@dataclass
class Comparison:
    """One audit point: both methods on the same released guesses."""

    n: int
    r: int
    wrong: int
    fdp_epsilon: float
    one_run_epsilon: float
    accuracy: float


def both_bounds(
    n: int, r: int, wrong: int, family: str, delta: float, confidence: float, q: float | None
) -> Comparison:
    """Their bound (family null) and the one-run bound (Theorem 3.1 of Steinke et al., m = n,
    r - wrong correct) for ``wrong`` errors among r released guesses."""
    b = fdp_bound.epsilon_lower_bound(n, r, wrong, family, delta, confidence, q)
    e1 = one_run.epsilon_lower_bound(n, r, r - wrong, delta, confidence)
    return Comparison(n, r, wrong, b.epsilon, e1, 1 - wrong / r)


def compare_at_r(
    score: np.ndarray,
    membership: np.ndarray,
    r: int,
    family: str,
    delta: float,
    confidence: float = 0.95,
    q: float | None = None,
    guess: str = "balanced",
) -> Comparison:
    """Their bound (family null) and the one-run bound (Theorem 3.1 of Steinke et al., m = n)
    for the same r released guesses."""
    n = len(score)
    kp, km, wrong = fdp.released_guesses(score, membership, r, guess)  # kp + km < r on ties
    return both_bounds(n, kp + km, wrong, family, delta, confidence, q)


def r_sweep(
    score: np.ndarray,
    membership: np.ndarray,
    rs: list[int],
    family: str,
    delta: float,
    confidence: float = 0.95,
    q: float | None = None,
    guess: str = "balanced",
) -> list[Comparison]:
    """Both bounds as r varies at fixed n (Fig. 12); uncorrected over r (a figure, not a
    selection rule)."""
    return [compare_at_r(score, membership, r, family, delta, confidence, q, guess) for r in rs]


def best_r(comparisons: list[Comparison]) -> tuple[Comparison, Comparison]:
    """Each method at its own best r over a sweep (a fairness check of ours; uncorrected)."""
    best_fdp = max(comparisons, key=lambda c: c.fdp_epsilon)
    best_one = max(comparisons, key=lambda c: c.one_run_epsilon)
    return best_fdp, best_one


MECHANISMS = {
    "gaussian": ("gdp", lambda n, p, rng: sim.gaussian(n, p["mu"], rng)),
    "laplace": ("laplace", lambda n, p, rng: sim.laplace(n, p["mu"], rng)),
    "randomized_response": (
        "approx_dp",
        lambda n, p, rng: sim.randomized_response(n, p["epsilon"], p["delta"], rng),
    ),
    "subsampled_gaussian": (
        "subsampled_gaussian",
        lambda n, p, rng: sim.subsampled_gaussian(n, p["mu"], p["q"], rng),
    ),
}


def simulate(
    mechanism: str,
    params: dict,
    ns: list[int],
    r_fraction: float = 0.2,
    delta: float = 1e-5,
    seeds: int = 3,
    confidence: float = 0.95,
    guess: str = "balanced",
) -> list[dict]:
    """Both methods at r = r_fraction n for each n and seed: rows for a table or figure
    (Figs. 3, 4, 5, 7, 9). The null family is the mechanism's own (our reading)."""
    family, draw = MECHANISMS[mechanism]
    rows = []
    for n in ns:
        for seed in range(seeds):
            rng = np.random.default_rng([seed, n])
            score, member = draw(n, params, rng)
            r = max(1, round(r_fraction * n))
            d = params.get("delta", delta) if family == "approx_dp" else delta
            c = compare_at_r(score, member, r, family, d, confidence, params.get("q"), guess)
            rows.append({"mechanism": mechanism, **params, "seed": seed, "delta": d, **vars(c)})
    return rows


# --------------------------------------------------------------------------------------------
# Noise-free idealised curves: the expected error count of the f-DP channels themselves
# --------------------------------------------------------------------------------------------


def idealised_point(
    family: str,
    theta: float,
    n: int,
    r: int,
    delta: float = 1e-5,
    confidence: float = 0.95,
    q: float | None = None,
) -> Comparison:
    """Both bounds at the expected error count (rounded) of the mechanism's own channels
    (top r by |privacy loss|): the curves of Figs. 3, 11, 12 without seed noise. The one-run
    bound sees the same r guesses with r - wrong correct (m = n).

    The expected number of wrong guesses among the r most confident of n independent
    f_theta-DP channels with the MAP decoder is sum_j v_j (Theorem 3), with
    :func:`~dpaudit.estimators.fdp_one_run.tails.v_vector`'s conservative rounding undone."""
    d = delta if family == "approx_dp" else None
    v = tails.v_vector(family, theta, n, r, delta=d, q=q)
    wrong = int(round(float(v.sum() / (1 - tails.V_ROUND_DOWN))))
    return both_bounds(n, r, wrong, family, delta, confidence, q)


def idealised_r_curve(
    family: str,
    theta: float,
    n: int,
    rs: list[int],
    delta: float = 1e-5,
    confidence: float = 0.95,
    q: float | None = None,
) -> list[Comparison]:
    """Both bounds as r varies at fixed n (Fig. 12)."""
    return [idealised_point(family, theta, n, r, delta, confidence, q) for r in rs]


def idealised_n_curve(
    family: str,
    theta: float,
    ns: list[int],
    r: int | None = None,
    r_fraction: float = 0.2,
    delta: float = 1e-5,
    confidence: float = 0.95,
    q: float | None = None,
) -> list[Comparison]:
    """Both bounds as n varies, at fixed r (Fig. 11) or r = r_fraction n (Figs. 3-5, 7, 9)."""
    out = []
    for n in ns:
        rr = min(n, r) if r is not None else max(1, round(r_fraction * n))
        out.append(idealised_point(family, theta, n, rr, delta, confidence, q))
    return out


def idealised_delta_curve(
    epsilon: float, deltas: list[float], n: int, r: int, confidence: float = 0.95
) -> list[Comparison]:
    """Randomized response at (epsilon, delta) for each delta, null f_{eps', delta} (Fig. 7)."""
    return [idealised_point("approx_dp", epsilon, n, r, d, confidence) for d in deltas]
