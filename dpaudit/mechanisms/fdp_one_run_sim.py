"""Per-bit mechanisms of the idealised one-run audits of Xiang et al. 2025 (arXiv:2509.08704,
§6), with known privacy, independent across bits. The comparison of the two bounds on their
guesses is in :mod:`dpaudit.analyses.tight_one_run_comparison`.

Mechanisms (b_i ~ Bernoulli(1/2), higher score = IN):

* Gaussian (Figs. 3, 5): score = mu b + N(0, 1), mu-GDP per bit.
* Laplace (Fig. 4): score = mu b + Lap(0, 1), mu-DP per bit.
* Randomized response with delta (Fig. 7, Section 6.2): 4 outputs, (eps, delta)-DP.
* Subsampled Gaussian (Fig. 9, Eq. 29): score = mu Bern(q) b + N(0, 1).
"""

from __future__ import annotations

import math

import numpy as np

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
    balanced rule releases the certain outputs first. Within an output the guesses follow the
    (random) canary order: a tiny offset decreasing with position (at most 1e-4, far below the
    gaps of 1 between outputs) makes that order part of the scores, as the estimators abstain
    on ties (:mod:`dpaudit.estimators.common.ties`); the bits are i.i.d. per position, so the order
    is independent of membership, and the guesses are those of a stable sort of the plain outputs.
    """
    b = _bits(n, rng)
    u = rng.random(n)
    certain = u < delta
    truthful = u < delta + (1 - delta) * (1 / (1 + math.exp(-epsilon)))
    side = np.where(truthful, b, 1 - b)  # the reported bit
    score = np.where(side == 1, 1.0, -1.0) * np.where(certain, 2.0, 1.0)
    return score - 1e-4 * np.arange(n) / n, b
