"""The reduced hyper-parameter tuning game (Xiang, Wang, Wang 2024, Section 5.1-5.4, Fig. 5).

Tuning DP-SGD (tau = 1, Dirac canary, X = {} vs X' = {z}) released through a strictly increasing
score is, after the paper's two reductions (Eqs. 11-15) and Proposition 3, one draw of

    max of K ~ xi i.i.d. N(0, 1)      (canary OUT)   vs   the same shifted by mu   (canary IN),

with mu = tau sqrt(N)/sigma (Eq. 19). The maximum of k standard normals is sampled exactly in
O(1): Phi^{-1}(U^{1/k}) = Phi^{-1}(1 - V) with V = -expm1(log(U)/k), evaluated as ``isf(V)`` so
that large k (V near 0) keeps full precision. The paper simulates this game 10^6 times for the
epsilon_L of its Fig. 6 (Section 5.4).

K = 0 (possible only for Poisson xi) releases Null; it is recorded as score -inf in
:func:`play`, and as the smallest finite float64 in score files (the score-file contract forbids
non-finite scores; the order is what matters, and both worlds share the atom).

:func:`reduced_game_score_file` is the registered mechanism ``selection_reduced_game`` (the
Fig. 6 audit): the game at the mu and claimed epsilons of :func:`dpaudit.accounting.selection.
fig6_point`.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from dpaudit.accounting import run_counts as runs
from dpaudit.accounting import selection as sel
from dpaudit.accounting.run_counts import RunCountDistribution
from dpaudit.keys import CLAIMED_EPSILON
from dpaudit.scores import FAIR_COIN, INCLUSION_KEY, ScoreFile

NULL_SCORE = -np.finfo(np.float64).max


def max_of_standard_normals(k: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One exact draw of max(Z_1..Z_k), Z_i ~ N(0,1), for each entry of ``k`` (k >= 1)."""
    k = np.asarray(k)
    if np.any(k < 1):
        raise ValueError("every number of runs k must be >= 1")
    u = rng.random(k.shape)
    v = -np.expm1(np.log(u) / k)  # 1 - U^{1/k}, accurate for large k
    return stats.norm.isf(v)


def play(
    xi: RunCountDistribution,
    mu: float,
    membership: np.ndarray,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """Play one game per entry of ``membership`` (1 = canary IN, world X').

    Returns (released score, K). The score is max of K draws of N(mu * membership, 1);
    -inf where K = 0.
    """
    if not (isinstance(mu, int | float | np.floating) and math.isfinite(mu) and mu >= 0):
        raise ValueError(f"mu must be a finite number >= 0, got {mu!r}")
    membership = np.asarray(membership)
    if not np.isin(membership, (0, 1)).all():
        raise ValueError("membership must be 0 or 1")
    k = xi.sample(membership.size, rng).reshape(membership.shape)
    score = np.full(membership.shape, -np.inf)
    pos = k >= 1
    score[pos] = max_of_standard_normals(k[pos], rng) + mu * membership[pos]
    return score, k


def score_file(
    xi: RunCountDistribution,
    mu: float,
    n_games: int,
    seed: int,
    claimed_epsilon: float | None,
    delta: float,
    accountant: str = "selection_reduced_game",
    experiment: str = "selection",
    setting: str = "reduced_game",
) -> ScoreFile:
    """``n_games`` games with fair-coin membership as a ``multi_run`` score file: shape
    (n_games, 1), one target canary per trial, score = the released maximum (higher = IN)."""
    if isinstance(n_games, bool) or not isinstance(n_games, int | np.integer) or n_games < 1:
        raise ValueError(f"n_games must be an integer >= 1, got {n_games!r}")
    rng = np.random.default_rng(seed)
    membership = rng.integers(0, 2, size=n_games)
    score, k = play(xi, mu, membership, rng)
    score = np.where(np.isfinite(score), score, NULL_SCORE)
    meta = {
        "experiment": experiment,
        "setting": setting,
        "seed": int(seed),
        "design": "multi_run",
        INCLUSION_KEY: FAIR_COIN,
        "threat_model": "simulation",
        CLAIMED_EPSILON: claimed_epsilon,
        "delta": float(delta),
        "accountant": accountant,
        "mechanism": "selection_reduced_game",
        "mu": float(mu),
        "xi": repr(xi),
        "mean_runs": float(np.mean(k)),
    }
    return ScoreFile(
        score=score[:, None],
        membership=membership[:, None],
        canary_id=np.zeros((n_games, 1), dtype=np.int64),
        meta=meta,
    )


def reduced_game_score_file(
    epsilon_B: float,
    n_games: int,
    tau: float = 1.0,
    eta: float = 0.0,
    nu: float = 1e-2,
    steps: int = sel.STEPS,
    delta: float = sel.DELTA,
    *,
    seed: int,
    experiment: str = "selection_fig6",
    setting: str = "",
) -> ScoreFile:
    """Fig. 6's audit (Section 5.4): ``n_games`` plays of the reduced game (Fig. 5) with
    K ~ TNB(eta, nu) and mu = mu_O of DP-SGD with budget ``epsilon_B`` (sample rate ``tau``,
    ``steps`` = N); fair-coin membership; a ``multi_run`` score file.

    The simulated mu is mu_O (Eq. 19; for tau < 1 the paper does not say which mu its audit
    used). claimed_epsilon = epsilon_U-O (the paper's improved bound, the claim under audit);
    ``claimed_epsilons`` adds Papernot-Steinke, epsilon_U-G and the exact epsilon of the game,
    which no valid audit can exceed.
    """
    pt = sel.fig6_point(
        float(epsilon_B), float(tau), float(eta), float(nu), int(steps), float(delta)
    )
    xi = runs.TruncatedNegativeBinomial(float(eta), float(nu))
    sf = score_file(
        xi, pt["mu_O"], n_games, seed, pt["epsilon_U_O"], delta,
        accountant="xiang2024_algorithm3_mu_O", experiment=experiment,
        setting=setting or f"epsilon_B{epsilon_B:g}",
    )
    sf.meta["claimed_epsilons"] = {
        "papernot_steinke": pt["epsilon_U_P"],
        "algorithm3_mu_G": pt["epsilon_U_G"],
        "algorithm3_mu_O": pt["epsilon_U_O"],
        "exact": pt["epsilon_exact"],
    }
    sf.meta.update({"epsilon_B": float(epsilon_B), "tau": float(tau), "steps": int(steps),
                    "sigma": pt["sigma"]})
    return sf
