"""The counterexample to Theorem 1 of Xiang et al. (2025) for f_{eps,delta}, delta > 0.

Steinke, Nasr and Jagielski's (2023, arXiv:2305.08846, Algorithm 2, "Pathological Algorithm")
(eps, delta)-DP algorithm with its constant corrected: it is exactly (eps, delta)-DP per bit,
yet the tight one-run test of Xiang et al., run with the TRUE null f_{eps,delta}, rejects it
more often than its level (see
:func:`dpaudit.estimators.fdp_one_run.guesses.pathological_rejection_rate` and
``benchmarks/fdp_theorem1_counterexample.py``). Used only by that benchmark and the tests.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special, stats


@dataclass
class Pathological:
    """Steinke et al.'s pathological (eps, delta)-DP algorithm (their Algorithm 2), constant
    corrected: r guesses on a random set U; with probability beta (X = 1) each is right with
    probability e^eps/(1+e^eps) + gamma, else e^eps/(1+e^eps); gamma = n delta /
    (r beta (1 + e^eps))."""

    n: int
    r: int
    epsilon: float
    delta: float
    beta: float

    @property
    def gamma(self) -> float:
        return self.n * self.delta / (self.r * self.beta * (1 + math.exp(self.epsilon)))

    @property
    def accuracy(self) -> tuple[float, float]:
        base = float(special.expit(self.epsilon))
        acc1 = base + self.gamma
        if acc1 > 1 + 1e-12:
            raise ValueError(
                f"beta={self.beta} too small: needs beta >= n delta / r = "
                f"{self.n * self.delta / self.r}"
            )
        return base, min(1.0, acc1)

    def hockey_stick(self) -> float:
        """The exact per-bit hockey-stick divergence H_{e^eps}(M(b_i=1) || M(b_i=0)) given
        the other bits: (r/n) sum_k C(r-1,k) [sum_X P(X) a_X^k (1-a_X)^{r-1-k} (a_X - e^eps
        (1-a_X))]_+ over the k other correct guesses (guess_i = 1; guess_i = 0 contributes
        nothing). Equal to delta: the algorithm is (eps, delta)-DP per bit (Eq. 8)."""
        a0, a1 = self.accuracy
        k = np.arange(self.r)
        e = math.exp(self.epsilon)
        terms = np.zeros(self.r)
        for px, a in ((1 - self.beta, a0), (self.beta, a1)):
            terms = terms + px * stats.binom.pmf(k, self.r - 1, a) * (a - e * (1 - a))
        return float(self.r / self.n * np.sum(np.maximum(terms, 0.0)))

    def sample_wrong(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """Number of wrong released guesses in ``size`` independent runs."""
        a0, a1 = self.accuracy
        x = rng.random(size) < self.beta
        return rng.binomial(self.r, np.where(x, 1 - a1, 1 - a0))

    def wrong_pmf(self) -> np.ndarray:
        a0, a1 = self.accuracy
        u = np.arange(self.r + 1)
        return (1 - self.beta) * stats.binom.pmf(u, self.r, 1 - a0) + self.beta * stats.binom.pmf(
            u, self.r, 1 - a1
        )
