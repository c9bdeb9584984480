"""The shuffle lower bound: a reference line for audits of shuffled DP-SGD.

Annamalai et al. ("To Shuffle or not to Shuffle", §6.2.1, Fig. 3) compare the audited epsilon
of the Batched Gaussian Mechanism with two curves: the epsilon DP-SGD would have *if* batches
were Poisson-subsampled (:func:`dpaudit.accounting.shuffling.poisson_reference_epsilon`), and
the lower bound on the epsilon of *shuffled* batches by Chua et al. (ICML 2024), which the
audits approach but do not exceed. We re-implement its single-epoch "cube" bound from the
formula (Chua et al. 2024): with P = MoG(2) and Q = MoG(1), MoG(m) = (1/T) sum_t N(m e_t,
sigma^2 I_T) (the worst-case pair of the BGM shifted by +B), and the sets
E_C = {x : max_t x_t > C},

    P(E_C) = 1 - Phi((C - 2)/sigma) Phi(C/sigma)^(T-1),
    Q(E_C) = 1 - Phi((C - 1)/sigma) Phi(C/sigma)^(T-1),
    delta_LB(eps) = max_C max{P(E_C) - e^eps Q(E_C), Q(E_C^c) - e^eps P(E_C^c)},

and eps_LB solves delta_LB(eps) = delta. (Chua et al. state the first ordering; the second is
the same test read the other way, also a valid lower bound; it never binds in our checks.)
Any event gives a valid lower bound on the hockey-stick divergence, so eps_LB is a lower
bound on the epsilon of the shuffled mechanism for *that* pair of datasets.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize, special

from dpaudit.accounting.gaussian import epsilon_of_profile
from dpaudit.accounting.shuffling import check_bgm


def _log_in_cube(c: np.ndarray, shift: float, sigma: float, steps: int) -> np.ndarray:
    """log P[max_t x_t <= C] under MoG(shift): one coordinate N(shift), T - 1 at N(0)."""
    return special.log_ndtr((c - shift) / sigma) + (steps - 1) * special.log_ndtr(c / sigma)


def _cube_delta(c: np.ndarray, eps: float, sigma: float, steps: int) -> np.ndarray:
    lp = _log_in_cube(c, 2.0, sigma, steps)
    lq = _log_in_cube(c, 1.0, sigma, steps)
    p_out, q_out = -np.expm1(lp), -np.expm1(lq)
    e = math.exp(eps)
    return np.maximum(p_out - e * q_out, np.exp(lq) - e * np.exp(lp))


def shuffle_delta_lower_bound(eps: float, sigma: float, steps_per_epoch: int) -> float:
    """delta_LB(eps) of Chua et al.'s cube sets, maximised over the cube size C."""
    grid = np.linspace(-3.0 * sigma, 2.0 + 14.0 * sigma, 4001)
    vals = _cube_delta(grid, eps, sigma, steps_per_epoch)
    i = int(np.argmax(vals))
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]
    res = optimize.minimize_scalar(
        lambda c: -float(_cube_delta(np.array([c]), eps, sigma, steps_per_epoch)[0]),
        bounds=(lo, hi),
        method="bounded",
        options={"xatol": 1e-10},
    )
    return float(max(vals[i], -res.fun, 0.0))


def shuffle_lower_bound(sigma: float, steps_per_epoch: int, delta: float, epochs: int = 1) -> float:
    """Chua et al.'s single-epoch lower bound on the epsilon of shuffled DP-SGD (the BGM).

    Only one epoch is implemented (their multi-epoch bound composes a PLD built from slices of
    max_t x_t; not needed for Fig. 3). Raises for ``epochs != 1``.
    """
    check_bgm(sigma, steps_per_epoch, delta)
    if epochs != 1:
        raise ValueError(
            f"shuffle_lower_bound implements the single-epoch bound only, got epochs={epochs}"
        )

    return epsilon_of_profile(
        lambda eps: shuffle_delta_lower_bound(eps, sigma, steps_per_epoch), delta, xtol=1e-6
    )
