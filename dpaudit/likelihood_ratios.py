"""Likelihood-ratio scores of per-step observations under shuffling (Annamalai et al. 2024).

Annamalai, Balle, Hayes, De Cristofaro, "To Shuffle or not to Shuffle: Auditing DP-SGD with
Shuffling" (arXiv:2411.10614). The white-box adversary with a gradient canary v (|v| = C) sees
``o_t = <g~_t, v/|v|>`` at every step t (their Algorithm 1), where ``g~_t`` is the clipped,
noised gradient sum divided by the batch size B. Normalised, ``x_t = B o_t / C`` is Gaussian
with standard deviation sigma (the noise multiplier) around a mean set by which batch holds the
special record (the target on D, the zero-out record on D'). Each epoch reshuffles the records,
so the Neyman-Pearson ratio is a mixture over "which of the T batches is special", multiplied
over epochs (§4.2, §5.3):

=========================== ============== =============== =================== ===============
``statistic``               special, D     special, D'     other batches       paper
=========================== ============== =============== =================== ===============
``natural``                 +1             0               0                   §5.3, Lambda^N
``partially_informed``      +1             0               -1                  §5.3, Lambda^PI
``batch_worst_case``        +B             B - 1           -B                  §7 (Fig. 9)
=========================== ============== =============== =================== ===============

``batch_worst_case`` is the modified Worst-Case adversary of §7 for batch-then-shuffle: the
first B records in dataset order (the target or the zero-out record among them) carry +v and
every other record -v, so with batches cut before shuffling one batch sums to B (D) or B - 1
(D') and every other batch to -B; the paper "adjusts the likelihood ratio accordingly".

Equal variances make each Gaussian ratio ``exp((x (a - c) - (a^2 - c^2) / 2) / sigma^2)``;
dividing numerator and denominator by the all-"other" density gives, per epoch,

    natural:             logsumexp_t((x_t - 1/2) / sigma^2) - log T
    partially_informed:  logsumexp_t(2 x_t / sigma^2) - logsumexp_t((x_t + 1/2) / sigma^2)
    batch_worst_case:    logsumexp_t(2B x_t / sigma^2) - logsumexp_t((2B - 1)(x_t + 1/2) / sigma^2)

(``batch_worst_case`` with B = 1 is ``partially_informed``). ``prefix``: only the first k
batches of every epoch enter the ratio, the partial-shuffle adversary of §7, Algorithm 2 (the
target placed first lands in the first buffer, i.e. one of the first K/B batches; the adversary,
not knowing K, tries k in {1, 10, 20, ..., 100}).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

#: The adversaries whose likelihood-ratio statistic of shuffled batches is computed here
#: (``canaries.adversary`` of a ``canaries.statistic: likelihood_ratio`` run).
SHUFFLE_STATISTICS = ("natural", "partially_informed", "batch_worst_case")


def normalised(step_dots: np.ndarray, batch_size: int, max_grad_norm: float) -> np.ndarray:
    """``x_t = B o_t / C`` of observations ``o_t = <g~_t, v/|v|>`` (any shape)."""
    if batch_size < 1 or not max_grad_norm > 0:
        raise ValueError(
            f"batch_size must be >= 1 and max_grad_norm > 0, got {batch_size}, {max_grad_norm}"
        )
    return np.asarray(step_dots, dtype=np.float64) * (batch_size / max_grad_norm)


def by_epoch(x: np.ndarray, steps_per_epoch: int, prefix: int | None = None) -> np.ndarray:
    """(runs, steps) -> (runs, epochs, T) or, with ``prefix`` k, (runs, epochs, k)."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"observations must have shape (runs, steps), got {x.shape}")
    t = int(steps_per_epoch)
    if t < 1 or x.shape[1] % t:
        raise ValueError(
            f"{x.shape[1]} steps are not whole epochs of {steps_per_epoch} steps: the likelihood "
            "ratio is a product over reshuffled epochs (set train.epochs, not train.steps)"
        )
    e = x.reshape(x.shape[0], x.shape[1] // t, t)
    if prefix is not None:
        if not 1 <= int(prefix) <= t:
            raise ValueError(f"prefix {prefix} must lie in 1..{t} (the batches of an epoch)")
        e = e[:, :, : int(prefix)]
    return e


def log_likelihood_ratio(
    x: np.ndarray,
    sigma: float,
    statistic: str,
    steps_per_epoch: int,
    batch_size: int = 1,
    prefix: int | None = None,
) -> np.ndarray:
    """log Lambda of each run's normalised observations ``x`` (runs, steps); shape (runs,).

    Higher means IN (the target was in the training set). See the module docstring.
    """
    if statistic not in SHUFFLE_STATISTICS:
        raise ValueError(f"unknown statistic {statistic!r}; allowed: {list(SHUFFLE_STATISTICS)}")
    if not (sigma > 0 and math.isfinite(sigma)):
        raise ValueError(
            f"the likelihood ratio needs a finite noise multiplier > 0, got {sigma!r} "
            "(a non-private setting has no Gaussian likelihood)"
        )
    o = by_epoch(x, steps_per_epoch, prefix)
    s2 = sigma * sigma
    lse = special.logsumexp
    if statistic == "natural":
        per_epoch = lse((o - 0.5) / s2, axis=-1) - math.log(o.shape[2])
    elif statistic == "partially_informed":
        per_epoch = lse(o * (2.0 / s2), axis=-1) - lse((o + 0.5) / s2, axis=-1)
    else:
        b = float(batch_size)
        per_epoch = lse(o * (2.0 * b / s2), axis=-1) - lse(
            (o + 0.5) * ((2.0 * b - 1.0) / s2), axis=-1
        )
    return per_epoch.sum(axis=1)
