"""Idealised one-run audits of note 004 (Xiang et al. 2025, Section 6): per-bit mechanisms with
known privacy, independent across bits, and the comparison of their bound with the one-run bound
of Steinke et al. (:mod:`dpaudit.estimators.one_run`) on the same guesses.

Mechanisms (b_i ~ Bernoulli(1/2), higher score = IN):

* Gaussian (Figs. 3, 5): score = mu b + N(0, 1), mu-GDP per bit.
* Laplace (Fig. 4): score = mu b + Lap(0, 1), mu-DP per bit.
* Randomized response with delta (Fig. 7, Section 6.2): 4 outputs, (eps, delta)-DP.
* Subsampled Gaussian (Fig. 9, Eq. 29): score = mu Bern(q) b + N(0, 1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dpaudit.estimators import fdp_one_run as fdp
from dpaudit.estimators import one_run
from dpaudit.mechanisms.one_run_ideal import gaussian_game


def _bits(n: int, rng: np.random.Generator) -> np.ndarray:
    return (rng.random(n) < 0.5).astype(np.int8)


def gaussian(n: int, mu: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(score, membership) of the Gaussian mechanism M(b) = mu b + N(0, I)."""
    b = _bits(n, rng)
    return gaussian_game(b, 0.0, mu, 1.0, rng), b


def laplace(n: int, mu: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(score, membership) of M(b) = mu b + Lap(0, 1)^n (pure mu-DP per bit)."""
    b = _bits(n, rng)
    return mu * b + rng.laplace(0.0, 1.0, n), b


def subsampled_gaussian(
    n: int, mu: float, q: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """(score, membership) of Eq. (29): mu Sub_q(b) + N(0, I)."""
    b = _bits(n, rng)
    kept = b * (rng.random(n) < q)
    return gaussian_game(kept, 0.0, mu, 1.0, rng), b


def randomized_response(
    n: int, epsilon: float, delta: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """(score, membership) of the paper's 4-output randomized response (Section 6.2).

    b = 0 gives 0 w.p. (1-delta) e^eps/(1+e^eps), 1 w.p. (1-delta)/(1+e^eps), 2 w.p. delta;
    b = 1 symmetric with 3 in place of 2. Scores: 3 -> +2, 1 -> +1, 0 -> -1, 2 -> -2, so the
    balanced rule releases the certain outputs first; ties keep (random) canary order.
    """
    b = _bits(n, rng)
    u = rng.random(n)
    certain = u < delta
    truthful = u < delta + (1 - delta) * (1 / (1 + math.exp(-epsilon)))
    side = np.where(truthful, b, 1 - b)  # the reported bit
    score = np.where(side == 1, 1.0, -1.0) * np.where(certain, 2.0, 1.0)
    return score, b


# --------------------------------------------------------------------------------------------
# Idealised comparisons (note 004 sections 5.B and 8)
# --------------------------------------------------------------------------------------------


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
    b = fdp.epsilon_lower_bound(n, r, wrong, family, delta, confidence, q)
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
    kp, km, wrong = fdp.released_guesses(score, membership, r, guess)
    return both_bounds(n, r, wrong, family, delta, confidence, q)


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
    """Each method at its own best r over a sweep (note 004 section 7.4; uncorrected)."""
    best_fdp = max(comparisons, key=lambda c: c.fdp_epsilon)
    best_one = max(comparisons, key=lambda c: c.one_run_epsilon)
    return best_fdp, best_one


MECHANISMS = {
    "gaussian": ("gdp", lambda n, p, rng: gaussian(n, p["mu"], rng)),
    "laplace": ("laplace", lambda n, p, rng: laplace(n, p["mu"], rng)),
    "randomized_response": (
        "approx_dp",
        lambda n, p, rng: randomized_response(n, p["epsilon"], p["delta"], rng),
    ),
    "subsampled_gaussian": (
        "subsampled_gaussian",
        lambda n, p, rng: subsampled_gaussian(n, p["mu"], p["q"], rng),
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
    (Figs. 3, 4, 5, 7, 9). The null family is the mechanism's own (note 004 section 2.5)."""
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


def expected_wrong(
    family: str,
    theta: float,
    n: int,
    r: int,
    delta: float | None = None,
    q: float | None = None,
) -> float:
    """Expected number of wrong guesses among the r most confident of n independent
    f_theta-DP channels with the MAP decoder (Theorem 3: sum_j v_j)."""
    return float(fdp.v_vector(family, theta, n, r, delta=delta, q=q).sum() / (1 - fdp.V_ROUND_DOWN))


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
    bound sees the same r guesses with r - wrong correct (m = n)."""
    d = delta if family == "approx_dp" else None
    wrong = int(round(expected_wrong(family, theta, n, r, d, q)))
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
