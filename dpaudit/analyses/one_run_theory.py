"""Theory curves of the one-run paper (Steinke, Nasr, Jagielski 2023): Figs. 1, 2, 9, 10, 11
and the best bound reachable for a given m (all guesses correct; Theorem 3.1).

Each function returns a tidy table with columns ``x``, ``y`` (the epsilon lower bound) and
``series`` plus the inputs of each point.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy import optimize, special, stats

from dpaudit.accounting.gaussian import gdp_epsilon
from dpaudit.estimators.one_run.bound import epsilon_lower_bound


def correct_guesses_curve(
    m: int = 100,
    correct: Sequence[int] = tuple(range(50, 101)),
    deltas: Sequence[float] = (0.0, 1e-3, 1e-2),
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Fig. 1: bound vs number of correct guesses, r = m (no abstention), per delta; plus the
    "ideal" epsilon log(v / (m - v)) whose randomized response has that expected accuracy."""
    rows = []
    for delta in deltas:
        for v in correct:
            rows.append(
                {
                    "x": v,
                    "y": epsilon_lower_bound(m, m, int(v), delta, confidence),
                    "series": f"delta={delta:g}",
                    "m": m,
                    "r": m,
                    "delta": delta,
                }
            )
    for v in correct:
        ideal = math.log(v / (m - v)) if v < m else math.inf
        rows.append({"x": v, "y": ideal, "series": "ideal", "m": m, "r": m, "delta": 0.0})
    return pd.DataFrame(rows)


def ideal_epsilon_curve(
    m: int = 1000,
    epsilons: Sequence[float] = tuple(np.round(np.arange(0.25, 7.01, 0.25), 2)),
    deltas: Sequence[float] = (0.0, 1e-5, 1e-3),
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Fig. 2: bound vs the ideal epsilon, with v = floor(m e^eps / (1 + e^eps)) correct."""
    rows = []
    for delta in deltas:
        for eps in epsilons:
            v = int(math.floor(m * special.expit(eps)))
            rows.append(
                {
                    "x": eps,
                    "y": epsilon_lower_bound(m, m, v, delta, confidence),
                    "series": f"delta={delta:g}",
                    "m": m,
                    "correct": v,
                    "delta": delta,
                }
            )
    rows += [{"x": e, "y": e, "series": "ideal", "m": m} for e in epsilons]
    return pd.DataFrame(rows)


def randomized_response_curve(
    epsilon: float = 4.0,
    guesses: Sequence[int] = (10, 30, 100, 300, 1000, 3000, 10**4, 3 * 10**4, 10**5, 10**6),
    delta: float = 1e-5,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Fig. 9: epsilon-randomized response, r = m guesses, v = floor(r e^eps / (1 + e^eps))
    correct (footnote 4 rounds down)."""
    q = special.expit(epsilon)
    rows = []
    for r in guesses:
        v = int(math.floor(r * q))
        rows.append(
            {
                "x": r,
                "y": epsilon_lower_bound(r, r, v, delta, confidence),
                "series": f"RR eps={epsilon:g}",
                "correct": v,
                "delta": delta,
            }
        )
    rows += [{"x": r, "y": epsilon, "series": "true epsilon"} for r in guesses]
    return pd.DataFrame(rows)


def gaussian_accuracy(r: int, m: int, sigma: float) -> float:
    """Fig. 10: P[S = +1 | score > c] for score = S + N(0, sigma^2), S = +-1 equally likely, with
    c such that P[score > c] = r / (2m) (the top r/2 of m scores are guessed IN)."""
    tail = r / (2 * m)

    def excess(c: float) -> float:
        return 0.5 * (stats.norm.sf((c - 1) / sigma) + stats.norm.sf((c + 1) / sigma)) - tail

    c = optimize.brentq(excess, -50 * sigma, 50 * sigma)
    return float(0.5 * stats.norm.sf((c - 1) / sigma) / tail)


def gaussian_guesses_curve(
    m: int = 100_000,
    sigma: float = 2.0,
    guesses: Sequence[int] = (20, 50, 100, 200, 500, 1000, 1510, 2000, 5000, 10_000),
    delta: float = 1e-5,
    confidence: float = 0.95,
    rounding: str = "ceil",
) -> pd.DataFrame:
    """Fig. 10: the idealised Gaussian setting, k+ = k- = r/2, expected number of correct
    guesses (rounded up, which reproduces the paper's 1439 of 1510 in Fig. 10), and
    the exact Gaussian-mechanism epsilon (mu = 2 / sigma) as the upper bound."""
    rnd = math.ceil if rounding == "ceil" else math.floor
    rows = []
    for r in guesses:
        acc = gaussian_accuracy(r, m, sigma)
        v = min(r, int(rnd(r * acc - 1e-9)))
        rows.append(
            {
                "x": r,
                "y": epsilon_lower_bound(m, r, v, delta, confidence),
                "series": "one-run lower bound",
                "correct": v,
                "accuracy": acc,
            }
        )
    upper = gdp_epsilon(delta, 2.0 / sigma)
    rows += [{"x": r, "y": upper, "series": "Gaussian upper bound"} for r in guesses]
    return pd.DataFrame(rows)


def gaussian_delta_curve(
    m: int = 100_000,
    r: int = 1500,
    correct: int = 1429,
    sigma: float = 2.0,
    deltas: Sequence[float] = (1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1),
    confidences: Sequence[float] = (0.99, 0.95, 0.75),
) -> pd.DataFrame:
    """Fig. 11: bound vs delta at several confidences (r = 1500, 1429 correct, m = 1e5), and the
    exact Gaussian-mechanism epsilon(delta)."""
    rows = []
    for conf in confidences:
        for delta in deltas:
            rows.append(
                {
                    "x": delta,
                    "y": epsilon_lower_bound(m, r, correct, delta, conf),
                    "series": f"{conf:.0%} confidence",
                    "confidence": conf,
                }
            )
    rows += [
        {"x": d, "y": gdp_epsilon(d, 2.0 / sigma), "series": "Gaussian upper bound"}
        for d in deltas
    ]
    return pd.DataFrame(rows)


def max_attainable_table(
    ms: Sequence[int] = (10, 50, 100, 500, 1000, 5000, 10**4, 5 * 10**4, 10**5),
    deltas: Sequence[float] = (0.0, 1e-5),
    confidence: float = 0.95,
) -> pd.DataFrame:
    """The best bound any audit with m canaries can reach: all r = m guesses correct."""
    return pd.DataFrame(
        [
            {
                "x": m,
                "y": epsilon_lower_bound(m, m, m, d, confidence),
                "series": f"delta={d:g}",
                "delta": d,
            }
            for d in deltas
            for m in ms
        ]
    )
