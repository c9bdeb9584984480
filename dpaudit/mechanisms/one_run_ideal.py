"""Idealised one-run settings (Steinke, Nasr, Jagielski 2023, Sec. 5 and Figs. 9-10).

m canaries with fair-coin membership S_i in {0, 1}; each canary's score is drawn independently:

- Gaussian: score = (2 S_i - 1) + N(0, sigma^2), so changing one S_i shifts one coordinate by 2:
  the mechanism is mu-GDP with mu = 2 / sigma (Fig. 10 uses sigma = 2, mu = 1: exact
  (4.38, 1e-5)-DP by Balle and Wang 2018, Theorem 8).
- Randomized response: the score is S_i with probability e^eps / (1 + e^eps), else 1 - S_i,
  plus a tiny uniform jitter that only breaks ties (pure eps-DP; Fig. 9).
"""

from __future__ import annotations

import numpy as np
from scipy import special

from dpaudit.accounting.gaussian import gdp_epsilon
from dpaudit.keys import CLAIMED_EPSILON
from dpaudit.scores import ScoreFile, one_run_meta


def gaussian_game(
    bits: np.ndarray, low: float, high: float, sigma: float, rng: np.random.Generator
) -> np.ndarray:
    """The per-bit Gaussian game: score_i = (``high`` if bit i is 1 else ``low``) + N(0, sigma^2),
    independently per bit; it is mu-GDP per bit with mu = |high - low| / sigma.

    The one idealised Gaussian setting of both one-run papers (Steinke, Nasr, Jagielski 2023,
    Fig. 10: low, high = -1, 1; Xiang et al. 2025, Figs. 3 and 5: low, high = 0, mu, sigma 1).
    The noise is drawn after the bits, one normal per bit, in bit order.
    """
    return np.where(np.asarray(bits) == 1, high, low) + rng.normal(0.0, sigma, size=len(bits))


def _meta(experiment: str, setting: str, seed: int, eps: float, delta: float, **extra) -> dict:
    return {
        **one_run_meta(experiment, setting, int(seed)),
        "threat_model": "simulation",
        CLAIMED_EPSILON: float(eps),
        "delta": float(delta),
        "accountant": "exact",
        **extra,
    }


def gaussian_score_file(
    m: int, sigma: float, delta: float, *, seed: int, experiment: str = "sim", setting: str = ""
) -> ScoreFile:
    """One run of the idealised Gaussian setting with ``m`` canaries (Fig. 10)."""
    rng = np.random.default_rng(seed)
    s = rng.integers(0, 2, size=m)
    score = gaussian_game(s, -1.0, 1.0, sigma, rng)
    mu = 2.0 / sigma
    meta = _meta(
        experiment,
        setting or f"sigma{sigma:g}",
        seed,
        gdp_epsilon(delta, mu),
        delta,
        mechanism="gaussian",
        tradeoff_family="gdp",  # exactly mu-GDP per canary: GDP-assuming bounds may decide
        mu=mu,
        sigma=sigma,
        m=m,
    )
    return ScoreFile(score=score[None], membership=s[None], canary_id=np.arange(m)[None], meta=meta)


def randomized_response_score_file(
    m: int,
    epsilon: float,
    delta: float = 0.0,
    *,
    seed: int,
    experiment: str = "sim",
    setting: str = "",
) -> ScoreFile:
    """One run of epsilon-randomized response on ``m`` canaries (Fig. 9)."""
    rng = np.random.default_rng(seed)
    s = rng.integers(0, 2, size=m)
    keep = rng.random(m) < special.expit(epsilon)
    score = np.where(keep, s, 1 - s) + 1e-3 * rng.random(m)
    meta = _meta(
        experiment,
        setting or f"eps{epsilon:g}",
        seed,
        epsilon,
        delta,
        mechanism="randomized_response",
        m=m,
    )
    return ScoreFile(score=score[None], membership=s[None], canary_id=np.arange(m)[None], meta=meta)
