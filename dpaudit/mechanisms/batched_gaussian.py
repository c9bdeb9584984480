"""The Batched Gaussian Mechanism (BGM) and its likelihood-ratio audit under shuffling.

Annamalai, Balle, Hayes, De Cristofaro, "To Shuffle or not to Shuffle: Auditing DP-SGD with
Shuffling". Algorithm 4 (Appendix A): the records are shuffled into T = N/B batches each
epoch and every batch sum is released with N(0, sigma^2) noise, for E epochs. The audit game
(Fig. 2) runs the mechanism once per observation on D (target present, ``membership`` 1) or
D' (target replaced by the zero-out record, ``membership`` 0) and scores the E x T outputs with
the Neyman-Pearson likelihood ratio of the mixture over "which batch holds the special record"
(§4.2, §5.3). Each epoch reshuffles, so the ratio is a product over epochs.

Idealised outputs per threat model (§5.1-5.3; B * <g~_t, g^> with no natural-gradient bias, as
in our idealised simulation). The special batch holds the target (D) or the zero-out record (D'):

==================== =================== ============== ===============
threat model         special batch, D    special, D'    other batches
==================== =================== ============== ===============
natural              +1                  0              0
partially_informed   +1                  0              -1
worst_case (BGM)     -B + 2              -B + 1         -B
==================== =================== ============== ===============

``worst_case`` is the BGM on Chua et al.'s conjectured worst-case datasets D = (+1, -1, ...,
-1), D' = (0, -1, ..., -1) (§2.3); its ratio is the partially-informed one evaluated at
o + B - 1, so the worst-case audit depends on (sigma, T, E) only, not on B.

Log-likelihood ratios (§5.3, in the log domain; equal variances make each Gaussian ratio
exp((o (a - c) - (a^2 - c^2)/2) / sigma^2)):

    natural:             sum_e [ logsumexp_t((o_et - 1/2)/sigma^2) - log T ]
    partially_informed:  sum_e [ logsumexp_t(2 o_et / sigma^2) - logsumexp_t((o_et + 1/2)/sigma^2) ]
    worst_case:          partially_informed at o + B - 1

Randomness is drawn in fixed blocks of :data:`BLOCK` runs, each from its own child of
``SeedSequence(seed)``, so a smaller simulation with the same seed is a prefix of a larger one
and the result does not depend on memory chunking.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpaudit import likelihood_ratios
from dpaudit.keys import CLAIMED_EPSILON
from dpaudit.scores import FIXED_INCLUSION, INCLUSION_KEY, ScoreFile

#: The batched Gaussian mechanism's threat models (the adversary's knowledge of the batches).
BGM_THREAT_MODELS = ("natural", "partially_informed", "worst_case")

#: Runs per random block (the unit of seeding, see the module docstring).
BLOCK = 8192


def _check(threat_model: str, steps: int, epochs: int, sigma: float, batch_size: int) -> None:
    if threat_model not in BGM_THREAT_MODELS:
        raise ValueError(
            f"unknown threat model {threat_model!r}; allowed: {list(BGM_THREAT_MODELS)}"
        )
    for name, v in (("steps_per_epoch", steps), ("epochs", epochs), ("batch_size", batch_size)):
        if not (isinstance(v, int | np.integer) and v >= 1):
            raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
    if not (isinstance(sigma, int | float) and sigma > 0 and math.isfinite(sigma)):
        raise ValueError(f"sigma must be a finite number > 0, got {sigma!r}")


@dataclass(frozen=True)
class BGM:
    """One Batched Gaussian Mechanism game: ``steps`` batches per epoch (T), ``epochs`` (E),
    noise ``sigma``, the ``threat_model`` of the table above and the batch size B (it moves
    the ``worst_case`` outputs only). Checked when made."""

    steps: int
    epochs: int
    sigma: float
    threat_model: str
    batch_size: int = 1

    def __post_init__(self) -> None:
        _check(self.threat_model, self.steps, self.epochs, self.sigma, self.batch_size)


def output_means(threat_model: str, member: bool, batch_size: int) -> tuple[float, float]:
    """(mean of the special batch, mean of every other batch) of the table above."""
    if threat_model == "natural":
        return (1.0 if member else 0.0), 0.0
    if threat_model == "partially_informed":
        return (1.0 if member else 0.0), -1.0
    if threat_model == "worst_case":
        b = float(batch_size)
        return (-b + 2.0 if member else -b + 1.0), -b
    raise ValueError(f"unknown threat model {threat_model!r}; allowed: {list(BGM_THREAT_MODELS)}")


def simulate_outputs(
    rng: np.random.Generator,
    runs: int,
    game: BGM,
    member: bool,
    position_rng: np.random.Generator | None = None,
) -> np.ndarray:
    """(runs, epochs, steps) noisy batch outputs of ``game``; the special batch is uniform per
    epoch.

    The noise comes from ``rng``, the special batch's position from ``position_rng`` (default
    ``rng``); two streams keep the first k runs identical whatever ``runs`` is.
    """
    steps, epochs = game.steps, game.epochs
    special_mean, other_mean = output_means(game.threat_model, member, game.batch_size)
    pos_rng = position_rng if position_rng is not None else rng
    out = rng.standard_normal((runs, epochs, steps))
    out *= game.sigma
    out += other_mean
    pos = pos_rng.integers(0, steps, size=(runs, epochs))
    r, e = np.indices((runs, epochs))
    out[r, e, pos] += special_mean - other_mean
    return out


def log_likelihood_ratio(
    outputs: np.ndarray, sigma: float, threat_model: str, batch_size: int = 1
) -> np.ndarray:
    """log Lambda (§5.3) of each run's (epochs, steps) outputs; shape (runs,). Higher = IN.

    The ratios of :mod:`dpaudit.likelihood_ratios` (the same as for trained models' per-step
    observations); ``worst_case`` is the partially informed one at ``o + B - 1``."""
    o = np.asarray(outputs, dtype=np.float64)
    if o.ndim != 3:
        raise ValueError(f"outputs must have shape (runs, epochs, steps), got {o.shape}")
    _check(threat_model, o.shape[2], o.shape[1], sigma, batch_size)
    statistic = threat_model
    if threat_model == "worst_case":
        o = o + (batch_size - 1.0)
        statistic = "partially_informed"
    flat = o.reshape(o.shape[0], o.shape[1] * o.shape[2])
    return likelihood_ratios.log_likelihood_ratio(flat, sigma, statistic, o.shape[2])


def simulate_scores(runs: int, game: BGM, member: bool, seed: int = 0) -> np.ndarray:
    """Log-likelihood-ratio scores of ``runs`` simulated runs of ``game`` on one hypothesis.

    Memory stays at one block of :data:`BLOCK` runs. Hypothesis D (``member``) and D' draw
    from different children of ``SeedSequence(seed)``.
    """
    if not (isinstance(runs, int | np.integer) and runs >= 1):
        raise ValueError(f"runs must be an integer >= 1, got {runs!r}")
    hyp = np.random.SeedSequence([int(seed), 1 if member else 0])
    n_blocks = -(-runs // BLOCK)
    children = hyp.spawn(n_blocks)
    out = np.empty(runs, dtype=np.float64)
    for i, child in enumerate(children):
        lo = i * BLOCK
        n = min(BLOCK, runs - lo)
        noise_seed, pos_seed = child.spawn(2)
        o = simulate_outputs(
            np.random.default_rng(noise_seed),
            n,
            game,
            member,
            position_rng=np.random.default_rng(pos_seed),
        )
        out[lo : lo + n] = log_likelihood_ratio(o, game.sigma, game.threat_model, game.batch_size)
    return out


def simulate_both(runs: int, game: BGM, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(scores of the ``runs`` runs on D, scores of the ``runs`` runs on D'), same seed."""
    return simulate_scores(runs, game, True, seed), simulate_scores(runs, game, False, seed)


def bgm_score_file(
    runs_per_hypothesis: int,
    steps_per_epoch: int,
    sigma: float,
    threat_model: str = "worst_case",
    epochs: int = 1,
    batch_size: int = 1,
    seed: int = 0,
    delta: float = 1e-5,
    experiment: str = "shuffle_bgm",
    setting: str = "default",
    claimed_epsilon: float | None = None,
    reference_lines: bool = True,
    extra_meta: dict[str, Any] | None = None,
) -> ScoreFile:
    """A ``multi_run`` score file: one trial per simulated run, membership = the hypothesis.

    The first ``runs_per_hypothesis`` trials are runs on D (membership 1), the rest on D'.
    ``claimed_epsilon`` defaults to the Poisson-accounted epsilon (what the paper's
    deployments report); with ``reference_lines`` the meta also carries the Chua et al.
    shuffle lower bound (single epoch only).
    """
    from dpaudit.accounting.shuffling import poisson_reference_epsilon
    from dpaudit.mechanisms import shuffle_reference as ref

    game = BGM(steps_per_epoch, epochs, sigma, threat_model, batch_size)
    s1, s0 = simulate_both(runs_per_hypothesis, game, seed)
    poisson = None
    if claimed_epsilon is None or reference_lines:
        poisson = poisson_reference_epsilon(sigma, steps_per_epoch, epochs, delta)
    meta: dict[str, Any] = {
        "experiment": experiment,
        "setting": setting,
        "seed": int(seed),
        "design": "multi_run",
        INCLUSION_KEY: FIXED_INCLUSION,  # runs_per_hypothesis runs on each side
        "threat_model": f"bgm_{threat_model}",
        CLAIMED_EPSILON: float(poisson if claimed_epsilon is None else claimed_epsilon),
        "delta": float(delta),
        "accountant": "poisson_pld" if claimed_epsilon is None else "given",
        "mechanism": "batched_gaussian",
        "sigma": float(sigma),
        "steps_per_epoch": int(steps_per_epoch),
        "epochs": int(epochs),
        "batch_size": int(batch_size),
        "runs_per_hypothesis": int(runs_per_hypothesis),
        "score": "log_likelihood_ratio",
    }
    if reference_lines:
        meta["poisson_epsilon"] = float(poisson)
        meta["shuffle_lower_bound"] = (
            ref.shuffle_lower_bound(sigma, steps_per_epoch, delta) if epochs == 1 else None
        )
        # drawn next to the audit in figures (audit column reference_shuffle_lower_bound)
        meta["references"] = {"shuffle_lower_bound": meta["shuffle_lower_bound"]}
    meta.update(extra_meta or {})
    n = int(runs_per_hypothesis)
    return ScoreFile(
        score=np.concatenate([s1, s0])[:, None],
        membership=np.concatenate([np.ones(n, np.int8), np.zeros(n, np.int8)])[:, None],
        canary_id=np.zeros((2 * n, 1), dtype=np.int64),
        meta=meta,
    )
