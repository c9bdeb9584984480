"""Idealised DP-SGD in one run: m orthogonal unit canaries, ``steps`` Poisson-subsampled
Gaussian steps (the curves Mahloujifar, Melis, Chaudhuri 2025, arXiv:2410.22235, Sec. 4, audit
DP-SGD against).

Each canary is inserted by a fair coin. At each step an inserted canary is sampled with
probability q and then adds 1 to its own coordinate; every coordinate gets N(0, sigma^2) noise
at every step. Per canary this is exactly the ``steps``-fold composition of the
Poisson-subsampled Gaussian mechanism with noise multiplier sigma and rate q (DP-SGD with
clipping norm 1 and a white-box auditor who sees every update), so its true curve is the
``subsampled_gaussian`` null of :mod:`dpaudit.estimators.fdp_abstention.bound` at mu = 1 / sigma.
The score is the canary's privacy loss, sum_t log(1 - q + q exp((2 x_t - 1) / (2 sigma^2))),
the most powerful statistic.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from dpaudit.keys import CLAIMED_EPSILON
from dpaudit.scores import ScoreFile, one_run_meta


def dpsgd_scores(
    m: int, sigma: float, q: float, steps: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """(score, membership) of one run with ``m`` canaries (membership drawn first)."""
    if m < 1 or steps < 1 or not sigma > 0 or not 0 < q <= 1:
        raise ValueError(
            f"need m, steps >= 1, sigma > 0, q in (0, 1]; got {m}, {steps}, {sigma}, {q}"
        )
    x, member = per_step_updates(m, sigma, q, steps, rng)
    log_keep = math.log1p(-q) if q < 1 else -math.inf
    loss = np.logaddexp(log_keep, math.log(q) + (2.0 * x - 1.0) / (2.0 * sigma**2))
    return loss.sum(axis=0), member


def per_step_updates(
    m: int, sigma: float, q: float, steps: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """(x, membership): x (steps, m) the noisy update at each canary's coordinate per step, 1 at
    a step that samples an inserted canary (probability q) plus N(0, sigma^2); membership (m,)
    fair coins, drawn first."""
    member = rng.integers(0, 2, size=m)
    sampled = (rng.random((steps, m)) < q) & (member[None, :] == 1)
    return sampled + rng.normal(0.0, sigma, size=(steps, m)), member


def summed_update_parts(
    m: int, q: float, steps: int, rng: np.random.Generator, runs: int = 1
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The summed update sum_t x_t of :func:`per_step_updates` in closed form, for ``runs``
    runs at once and every sigma: (membership, hits, noise), each (runs, m), with the summed
    update at noise multiplier sigma equal to ``hits + sigma * noise``. hits ~ Binomial(steps,
    q) for an inserted canary (0 otherwise), noise ~ N(0, steps). This is the score of the
    white-box Dirac gradient canaries of :class:`dpaudit.attach.core.GradientCanaries` (the
    noisy sum at the canary's coordinate over the steps, divided by C) where the data do not
    move the coordinate (Steinke, Nasr, Jagielski 2023, arXiv:2305.08846, Sec. 4). One draw
    serves every sigma (common random numbers), and the cost does not grow with ``steps``."""
    if m < 1 or steps < 1 or runs < 1 or not 0 < q <= 1:
        raise ValueError(f"need m, steps, runs >= 1, q in (0, 1]; got {m}, {steps}, {runs}, {q}")
    member = rng.integers(0, 2, size=(runs, m))
    hits = rng.binomial(steps, q, size=(runs, m)) * member
    noise = rng.normal(0.0, math.sqrt(steps), size=(runs, m))
    return member, hits, noise


@functools.lru_cache(maxsize=32)
def claimed_epsilon(sigma: float, q: float, steps: int, delta: float) -> float:
    """The PLD accountant's epsilon (dp_accounting, discretisation 1e-4) at ``delta``
    (cached: seconds per setting)."""
    from dpaudit.accounting.dpsgd import epsilon_pld

    return float(epsilon_pld(sigma, q, steps, delta))


def dpsgd_score_file(
    m: int,
    sigma: float,
    q: float,
    steps: int,
    delta: float,
    *,
    seed: int,
    experiment: str = "sim",
    setting: str = "",
) -> ScoreFile:
    """One run of :func:`dpsgd_scores` as a one-run score file; the claimed epsilon is the PLD
    accountant's (dp_accounting, discretisation 1e-4) at ``delta``."""
    score, member = dpsgd_scores(m, sigma, q, steps, np.random.default_rng(seed))
    meta = {
        **one_run_meta(experiment, setting or f"sigma{sigma:g}_q{q:g}_T{steps}", int(seed)),
        "threat_model": "simulation",
        CLAIMED_EPSILON: claimed_epsilon(sigma, q, steps, delta),
        "delta": float(delta),
        "accountant": "pld",
        "mechanism": "dpsgd_ideal",
        "tradeoff_family": "subsampled_gaussian_steps",
        "sigma": float(sigma),
        "sample_rate": float(q),  # the training job's key (fdp_abstention.audit reads it)
        "steps": int(steps),
        "m": int(m),
    }
    return ScoreFile(
        score=score[None], membership=member[None], canary_id=np.arange(m)[None], meta=meta
    )
