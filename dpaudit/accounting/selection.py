"""Privacy of private selection (hyper-parameter tuning with a random number of runs).

Xiang, Wang, Wang (2024), "How Does Selection Leak Privacy: Revisiting Private Selection and
Improved Results for Hyper-parameter Tuning" (arXiv:2402.13087). The tuning protocol
(their Algorithm 2) runs a DP base algorithm K ~ xi times and releases only the best run.

This module holds (the run-count distributions xi are in :mod:`dpaudit.accounting.run_counts`)

* the RDP -> (epsilon, delta) conversion they use (Appendix A.2, Theorem 3 = Balle et al. 2020,
  Theorem 20): :func:`rdp_to_dp`;
* the Papernot-Steinke bounds (Appendix A.1, Theorems 1 and 2): :func:`papernot_steinke_rdp`,
  :func:`papernot_steinke_epsilon` (the paper's epsilon_U = epsilon_U-P);
* the improved bound (Section 5.3, Algorithm 3): the Renyi divergence of the reduced game "max of
  K ~ xi draws of N(0, 1) vs N(mu, 1)", :func:`reduced_game_rdp` and
  :func:`reduced_game_epsilon_rdp` (epsilon_U-O with mu_O = tau sqrt(N)/sigma, Eq. 19, and
  epsilon_U-G with the GDP mu of Corollary 7);
* the exact (hockey-stick) epsilon of the reduced game, :func:`reduced_game_epsilon_exact`, which
  the paper does not compute (it is the tight value that Algorithm 3 upper-bounds);
* the discrete output law of the tuned mechanism (Theorem 2) used by Example 1:
  :func:`selection_output_law`, :func:`discrete_epsilon`;
* the four upper bounds of one point of Fig. 6 (Section 5.4), :func:`fig6_point`.

Numerics of Algorithm 3 (our implementation): the density of the max of K draws is
f(x) G'(F(x)) (a closed form of the paper's E_k[k F^{k-1} f]); all densities are kept in log space
(``scipy.special.log_ndtr``), and the x-grid is widened until the integrand at both ends is below
e^-40 of its peak. The integrand of D_alpha peaks near x = -(alpha - 1) mu and x = alpha mu, far
outside [-6, 6] for large alpha: truncating there under-estimates the divergence, which we believe
explains why some of the paper's Table 4 cells are lower than ours (docs/mechanisms/selection.md).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from functools import lru_cache

import numpy as np
from scipy import optimize, special

from dpaudit.accounting.run_counts import (
    PoissonRuns,
    RunCountDistribution,
    TruncatedNegativeBinomial,
)
from dpaudit.opacus_import import import_opacus

#: The paper's delta and number of DP-SGD steps N (Table 3, Table 4, Fig. 6).
DELTA = 1e-5
STEPS = 500

#: Orders alpha for the RDP -> DP conversion: 1.01 ... 257, geometric, then refined.
DEFAULT_ORDERS = 1 + np.geomspace(0.01, 256.0, 120)

#: Grid spacing of the x-integrals (the integrands vary on a scale of about 0.1 or more).
DX = 0.01

#: A grid end is wide enough when the log-integrand there is this far below its maximum.
TAIL_MARGIN = 40.0


# ---------------------------------------------------------------------------------------------
# RDP -> (epsilon, delta)
# ---------------------------------------------------------------------------------------------
def _check_delta(delta: float) -> None:
    if not (isinstance(delta, int | float | np.floating) and 0 < delta < 1):
        raise ValueError(f"delta must lie in (0, 1), got {delta!r}")


def rdp_to_dp(orders: np.ndarray, rdp: np.ndarray, delta: float) -> tuple[float, float]:
    """min over alpha of gamma + log((alpha-1)/alpha) - (log delta + log alpha)/(alpha - 1).

    Appendix A.2, Theorem 3 (Balle et al. 2020, Theorem 20); the same formula as Opacus'
    ``privacy_analysis.get_privacy_spent``. Returns (epsilon, best alpha); epsilon >= 0.
    """
    _check_delta(delta)
    a = np.asarray(orders, dtype=float)
    g = np.asarray(rdp, dtype=float)
    if a.shape != g.shape or np.any(a <= 1):
        raise ValueError("orders and rdp must have one shape and every order must be > 1")
    eps = g + np.log1p(-1 / a) - (math.log(delta) + np.log(a)) / (a - 1)
    i = int(np.nanargmin(eps))
    return max(0.0, float(eps[i])), float(a[i])


def _minimise_over_orders(
    rdp_fn: Callable[[np.ndarray], np.ndarray], delta: float, orders: np.ndarray | None
) -> tuple[float, float]:
    """Grid search over ``orders``, then a bounded scalar refinement between the neighbours."""
    orders = DEFAULT_ORDERS if orders is None else np.asarray(orders, dtype=float)
    gam = rdp_fn(orders)
    eps, best = rdp_to_dp(orders, gam, delta)
    i = int(np.searchsorted(orders, best))
    if i == len(orders) - 1 and len(orders) > 1:
        warnings.warn(
            f"the best Renyi order is the largest one tried ({best:g}); epsilon may be loose",
            stacklevel=3,
        )
    lo, hi = orders[max(i - 1, 0)], orders[min(i + 1, len(orders) - 1)]
    if hi > lo:

        def f(a: float) -> float:
            return rdp_to_dp(np.array([a]), rdp_fn(np.array([a])), delta)[0]

        res = optimize.minimize_scalar(
            f, bounds=(lo, hi), method="bounded", options={"xatol": 1e-6}
        )
        if res.fun < eps:
            eps, best = float(res.fun), float(res.x)
    return max(0.0, eps), best


def gaussian_rdp(mu: float) -> Callable[[np.ndarray], np.ndarray]:
    """The RDP curve alpha mu^2 / 2 of N(0,1) vs N(mu,1) (Mironov 2017, Prop. 7)."""
    return lambda a: np.asarray(a, dtype=float) * mu * mu / 2


# ---------------------------------------------------------------------------------------------
# Papernot-Steinke (Appendix A.1, Theorems 1 and 2)
# ---------------------------------------------------------------------------------------------
def papernot_steinke_rdp(
    xi: RunCountDistribution,
    base_rdp: Callable[[np.ndarray], np.ndarray],
    base_delta: Callable[[float], float] | None = None,
    pure_epsilon: float | None = None,
    max_order_prime: float = 1000.0,
    optimise_order_prime: bool = True,
) -> Callable[[np.ndarray], np.ndarray]:
    """The tuned mechanism's RDP curve alpha -> gamma_hat(alpha).

    TNB (Theorem 1): gamma_hat = gamma(alpha) + C + log E[K]/(alpha - 1) with
    C = min over alpha' of (1+eta)(1 - 1/alpha') gamma(alpha') + (1+eta) log(1/nu)/alpha'
    (alpha' in (1, max_order_prime], as autodp does; plus alpha' = infinity, gamma' =
    ``pure_epsilon``, when the base is (pure_epsilon, 0)-DP). ``optimise_order_prime=False``
    uses alpha' = infinity only (needs ``pure_epsilon``), as the paper's Example 1 does.

    Poisson (Theorem 2): gamma_hat = gamma(alpha) + mean delta' + log(mean)/(alpha - 1), with
    the base (epsilon', delta')-DP at e^{epsilon'} = 1 + 1/(alpha - 1), i.e. delta' =
    ``base_delta(log(alpha/(alpha-1)))``.
    """
    if isinstance(xi, TruncatedNegativeBinomial):
        eta, nu = xi.eta, xi.nu

        def c_of(ap: float) -> float:
            g = float(np.asarray(base_rdp(np.array([ap])))[0])
            return (1 + eta) * ((1 - 1 / ap) * g + math.log(1 / nu) / ap)

        const = math.inf
        if optimise_order_prime:
            grid = 1 + np.geomspace(1e-3, max_order_prime - 1, 400)
            vals = np.array([c_of(a) for a in grid])
            j = int(np.argmin(vals))
            lo, hi = grid[max(j - 1, 0)], grid[min(j + 1, len(grid) - 1)]
            res = optimize.minimize_scalar(c_of, bounds=(lo, hi), method="bounded")
            const = min(float(vals[j]), float(res.fun))
        elif pure_epsilon is None:
            raise ValueError("optimise_order_prime=False needs pure_epsilon (alpha' = infinity)")
        if pure_epsilon is not None:
            const = min(const, (1 + eta) * float(pure_epsilon))
        log_mean = math.log(xi.mean())
        return lambda a: base_rdp(a) + const + log_mean / (np.asarray(a, dtype=float) - 1)
    if isinstance(xi, PoissonRuns):
        if base_delta is None:
            raise ValueError("the Poisson bound (Theorem 2) needs base_delta(epsilon')")
        m = xi.mean()

        def rdp(a: np.ndarray) -> np.ndarray:
            a = np.asarray(a, dtype=float)
            dprime = np.array([base_delta(math.log(ai / (ai - 1))) for ai in a.ravel()])
            return base_rdp(a) + m * dprime.reshape(a.shape) + math.log(m) / (a - 1)

        return rdp
    raise ValueError(
        f"the Papernot-Steinke bound covers TNB and Poisson run counts, not {xi.name!r}"
    )


def papernot_steinke_epsilon(
    xi: RunCountDistribution,
    mu: float,
    delta: float,
    orders: np.ndarray | None = None,
) -> float:
    """epsilon_U-P: Papernot-Steinke for a base Gaussian mechanism N(0,1) vs N(mu,1).

    The base is DP-SGD with tau = 1 (gamma(alpha) = alpha mu^2 / 2, Section 5.1); converted with
    :func:`rdp_to_dp`.
    """
    from dpaudit.accounting.gaussian import gaussian_delta

    _check_mu(mu)
    _check_delta(delta)
    rdp = papernot_steinke_rdp(xi, gaussian_rdp(mu), base_delta=lambda e: gaussian_delta(e, mu))
    return _minimise_over_orders(rdp, delta, orders)[0]


# ---------------------------------------------------------------------------------------------
# The reduced game: max of K ~ xi draws of N(0,1) vs N(mu,1) (Section 5.1-5.3, Algorithm 3)
# ---------------------------------------------------------------------------------------------
def _check_mu(mu: float) -> None:
    if not (isinstance(mu, int | float | np.floating) and math.isfinite(mu) and mu > 0):
        raise ValueError(f"mu must be a finite number > 0, got {mu!r}")


def _log_densities(xi: RunCountDistribution, mu: float, x: np.ndarray):
    return xi.log_max_density(x), xi.log_max_density(x - mu)


def reduced_game_rdp(
    xi: RunCountDistribution,
    mu: float,
    orders: Sequence[float] | np.ndarray,
    x_range: tuple[float, float] | None = None,
    dx: float = DX,
) -> np.ndarray:
    """Algorithm 3: gamma(alpha) = max{D_alpha(N_xi || N'_xi), D_alpha(N'_xi || N_xi)}.

    N_xi has density f(x) G'(Phi(x)) and N'_xi is N_xi shifted by mu; the Null atom P[K=0]
    (Poisson only) adds P[K=0] to both integrals of p^alpha q^{1-alpha}. Trapezoid rule in log
    space on a uniform grid. With ``x_range=None`` the grid starts at
    [-(alpha_max-1) mu - 30, alpha_max mu + 30] and is doubled until both ends are TAIL_MARGIN
    below the peak; a fixed ``x_range`` reproduces a truncated integration (as used to explain
    the paper's Table 4).
    """
    _check_mu(mu)
    a = np.atleast_1d(np.asarray(orders, dtype=float))
    if np.any(a <= 1):
        raise ValueError("Renyi orders must be > 1")
    log_p0 = math.log(xi.p_zero()) if xi.p_zero() > 0 else -math.inf
    out = np.empty(a.size)
    for i, alpha in enumerate(a.ravel()):
        if x_range is not None:
            lo, hi = float(x_range[0]), float(x_range[1])
        else:  # the peaks of the two integrands: near -(alpha-1) mu and alpha mu
            lo, hi = -(alpha - 1) * mu - 20.0, alpha * mu + 20.0
        while True:
            n = int(math.ceil((hi - lo) / dx)) + 1
            x = np.linspace(lo, hi, n)
            lp, lq = _log_densities(xi, mu, x)
            logw = np.full(n, math.log(x[1] - x[0]))
            logw[[0, -1]] -= math.log(2.0)
            vals, ends_ok = [], True
            for l1, l2 in ((lp, lq), (lq, lp)):
                integrand = alpha * l1 + (1 - alpha) * l2
                if max(integrand[0], integrand[-1]) > integrand.max() - TAIL_MARGIN:
                    ends_ok = False
                vals.append(np.logaddexp(special.logsumexp(integrand + logw), log_p0))
            if ends_ok or x_range is not None:
                break
            width = hi - lo
            lo, hi = lo - width / 2, hi + width / 2
        out[i] = max(vals) / (alpha - 1)
    return out.reshape(a.shape)


def reduced_game_epsilon_rdp(
    xi: RunCountDistribution,
    mu: float,
    delta: float,
    orders: np.ndarray | None = None,
    x_range: tuple[float, float] | None = None,
    dx: float = DX,
) -> float:
    """epsilon_U-O / epsilon_U-G: Algorithm 3's RDP curve converted by Theorem 3 (A.2),
    minimised over ``orders`` (default 1.01..257 geometric, then refined)."""
    _check_delta(delta)
    return _minimise_over_orders(
        lambda a: reduced_game_rdp(xi, mu, a, x_range=x_range, dx=dx), delta, orders
    )[0]


def reduced_game_delta_exact(
    xi: RunCountDistribution, mu: float, epsilon: float | np.ndarray, dx: float = 1e-3
) -> float | np.ndarray:
    """The hockey-stick delta(epsilon) of the reduced game (both directions, the max).

    delta(eps) = max{ int (p - e^eps q)_+, int (q - e^eps p)_+ } over x in [-40, 40 + mu]
    (the Null atom contributes nothing for eps >= 0). Vectorised over ``epsilon``.
    """
    _check_mu(mu)
    eps = np.atleast_1d(np.asarray(epsilon, dtype=float))
    if np.any(~(eps >= 0)):
        raise ValueError(f"epsilon must be >= 0, got {epsilon!r}")
    x = np.arange(-40.0, 40.0 + mu + dx, dx)
    lp, lq = _log_densities(xi, mu, x)
    w = np.full(x.size, dx)
    w[[0, -1]] /= 2
    out = np.zeros(eps.size)
    for l1, l2 in ((lp, lq), (lq, lp)):
        p1 = np.exp(l1)
        d = np.maximum(0.0, -np.expm1(eps[:, None] + (l2 - l1)[None, :]))
        out = np.maximum(out, (d * (p1 * w)[None, :]).sum(axis=1))
    return float(out[0]) if np.ndim(epsilon) == 0 else out


def reduced_game_epsilon_exact(
    xi: RunCountDistribution, mu: float, delta: float, dx: float = 1e-3
) -> float:
    """The smallest epsilon with delta(epsilon) <= ``delta`` for the reduced game: the exact
    privacy of the tuned DP-SGD under the paper's reduction (not computed in the paper)."""
    _check_delta(delta)
    if reduced_game_delta_exact(xi, mu, 0.0, dx) <= delta:
        return 0.0
    hi = 1.0
    while reduced_game_delta_exact(xi, mu, hi, dx) > delta:
        hi *= 2
    return float(
        optimize.brentq(
            lambda e: reduced_game_delta_exact(xi, mu, e, dx) - delta, 0.0, hi, xtol=1e-6
        )
    )


# ---------------------------------------------------------------------------------------------
# Calibration of the base (the setting of Table 3, Table 4 and Fig. 6)
# ---------------------------------------------------------------------------------------------
#: The RDP orders of the base accountant: Opacus' defaults (TF-privacy style).
def _opacus_orders() -> np.ndarray:
    import_opacus()
    from opacus.accountants import RDPAccountant

    return np.asarray(RDPAccountant.DEFAULT_ALPHAS, dtype=float)


def base_mu(
    epsilon_base: float,
    delta: float,
    tau: float = 1.0,
    steps: int = 500,
    variant: str = "O",
    epsilon_tolerance: float = 1e-4,
) -> tuple[float, float]:
    """(mu, sigma) of DP-SGD with budget ``epsilon_base`` (RDP accountant, as the paper's
    TF-privacy epsilon_B), sample rate ``tau`` and ``steps`` = N.

    variant "O": mu_O = tau sqrt(N)/sigma (Eq. 19); "G": mu_G of Corollary 7 (Bu et al.'s CLT
    for uniform subsampling, Opacus ``compute_mu_uniform``). sigma comes from Opacus'
    ``get_noise_multiplier`` (accountant "rdp"), within ``epsilon_tolerance`` below the target.
    """
    from dpaudit.accounting.dpsgd import dpsgd_gdp_mu, noise_multiplier

    if variant not in ("O", "G"):
        raise ValueError(f"variant must be 'O' or 'G', got {variant!r}")
    sigma = noise_multiplier(epsilon_base, delta, tau, steps, "rdp", epsilon_tolerance)
    if variant == "O":
        return tau * math.sqrt(steps) / sigma, sigma
    return dpsgd_gdp_mu(sigma, tau, steps, poisson=False), sigma


def gaussian_mu_rdp(epsilon_base: float, delta: float, orders: np.ndarray | None = None) -> float:
    """The mu at which the Gaussian mechanism's RDP curve alpha mu^2/2 converts to exactly
    ``epsilon_base`` (RDP accountant with Opacus' default orders; tau = 1 DP-SGD)."""
    _check_delta(delta)
    if not (math.isfinite(epsilon_base) and epsilon_base > 0):
        raise ValueError(f"epsilon_base must be a finite number > 0, got {epsilon_base!r}")
    orders = _opacus_orders() if orders is None else np.asarray(orders, dtype=float)

    def f(mu: float) -> float:
        return rdp_to_dp(orders, orders * mu * mu / 2, delta)[0] - epsilon_base

    hi = 1.0
    while f(hi) < 0:
        hi *= 2
    return float(optimize.brentq(f, 1e-6, hi, xtol=1e-12))


# ---------------------------------------------------------------------------------------------
# Discrete base mechanisms: Theorem 2 and Example 1
# ---------------------------------------------------------------------------------------------
def selection_output_law(base_probs: Sequence[float], xi: RunCountDistribution) -> np.ndarray:
    """Theorem 2 for a base with finitely many outputs listed in increasing score order (no
    ties): P_H(y_j) = G(P[score <= y_j]) - G(P[score < y_j]); the Null atom is left out."""
    p = np.asarray(base_probs, dtype=float)
    if p.ndim != 1 or np.any(p < 0) or not math.isclose(p.sum(), 1.0, abs_tol=1e-12):
        raise ValueError("base_probs must be a 1-D probability vector summing to 1")
    cdf = np.concatenate([[0.0], np.cumsum(p)])
    cdf[-1] = 1.0
    g = xi.pgf(cdf)
    return np.diff(g)


def discrete_delta(p: np.ndarray, q: np.ndarray, epsilon: float) -> float:
    """max of the two hockey-stick divergences of two discrete laws at ``epsilon``."""
    p, q = np.asarray(p, float), np.asarray(q, float)
    e = math.exp(epsilon)
    return float(max(np.maximum(0, p - e * q).sum(), np.maximum(0, q - e * p).sum()))


def discrete_epsilon(p: np.ndarray, q: np.ndarray, delta: float = 0.0) -> float:
    """The smallest epsilon with (epsilon, delta)-indistinguishability of two discrete laws
    (delta = 0: the max absolute log-ratio)."""
    p, q = np.asarray(p, float), np.asarray(q, float)
    if delta == 0:
        with np.errstate(divide="ignore"):
            return float(np.max(np.abs(np.log(p) - np.log(q))))
    _check_delta(delta)
    if discrete_delta(p, q, 0.0) <= delta:
        return 0.0
    hi = discrete_epsilon(p, q, 0.0)
    return float(optimize.brentq(lambda e: discrete_delta(p, q, e) - delta, 0.0, hi, xtol=1e-10))


def discrete_rdp(p: np.ndarray, q: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """alpha -> max{D_alpha(p||q), D_alpha(q||p)} for discrete laws with full support."""
    lp, lq = np.log(np.asarray(p, float)), np.log(np.asarray(q, float))

    def rdp(a: np.ndarray) -> np.ndarray:
        a = np.atleast_1d(np.asarray(a, dtype=float))
        d1 = special.logsumexp(a[:, None] * lp + (1 - a[:, None]) * lq, axis=1)
        d2 = special.logsumexp(a[:, None] * lq + (1 - a[:, None]) * lp, axis=1)
        return np.maximum(d1, d2) / (a - 1)

    return rdp


def example1_base(b: float = 1e-3, d: float = 1e2, epsilon: float = 1.0):
    """Eq. 6: the 3-outcome (epsilon, 0)-DP base, outputs (A, B, C) in increasing score."""
    e = math.exp(epsilon)
    p = np.array([1 - b * e - d * b, b * e, d * b])
    q = np.array([1 - b - d * b * e, b, d * b * e])
    return p, q


def example1(delta: float = 1e-5, max_order: float = 100.0) -> dict[str, float]:
    """Example 1 and its approximate-DP version (A.1) for xi = TNB(1, 1e-3) (geometric, mean
    1000): the tuned mechanism's exact epsilon (pure, and at ``delta``) and the Papernot-Steinke
    prediction at ``delta`` (Theorem 1 with the base's exact RDP curve and alpha' = infinity,
    gamma' = 1, converted over orders 1.01..``max_order``).

    The Papernot-Steinke value decreases with ``max_order`` towards the pure bound 3: it is 3.19
    with Opacus' orders (<= 63), 3.116 at 100, 3.04 at 256, 3.0007 at 1e4. The paper's 3.11
    matches a grid ending near alpha = 100; the paper does not state its grid.
    ``papernot_steinke_limit`` is the value at max_order = 1e6.
    """
    xi = TruncatedNegativeBinomial(1.0, 1e-3)
    p, q = example1_base()
    hp, hq = selection_output_law(p, xi), selection_output_law(q, xi)
    base_eps = discrete_epsilon(p, q)
    rdp = papernot_steinke_rdp(
        xi, discrete_rdp(p, q), pure_epsilon=base_eps, optimise_order_prime=False
    )

    def ps(amax: float) -> float:
        orders = 1 + np.geomspace(0.01, amax - 1, 400)
        return rdp_to_dp(orders, rdp(orders), delta)[0]

    return {
        "base_epsilon": base_eps,
        "epsilon_pure": discrete_epsilon(hp, hq),
        "epsilon_delta": discrete_epsilon(hp, hq, delta),
        "papernot_steinke": ps(max_order),
        "papernot_steinke_limit": ps(1e6),
        "liu_talwar_pure": 3 * base_eps,
    }


# ---------------------------------------------------------------------------------------------
# Fig. 6: the bounds of one (epsilon_B, tau, xi) point
# ---------------------------------------------------------------------------------------------
def check_budgets(epsilon_bases: Sequence[float]) -> list[float]:
    """The base budgets epsilon_B as floats; each must be finite and > 0."""
    out = [float(e) for e in epsilon_bases]
    if not out or any(not (math.isfinite(e) and e > 0) for e in out):
        raise ValueError(f"epsilon_bases must be finite numbers > 0, got {epsilon_bases!r}")
    return out


def check_tau(tau: float) -> float:
    """The sample rate tau as a float; it must lie in (0, 1]."""
    if not (isinstance(tau, int | float) and 0 < tau <= 1):
        raise ValueError(f"tau (the sample rate) must lie in (0, 1], got {tau!r}")
    return float(tau)


#: Orders at which the base DP-SGD's RDP is tabulated for Papernot-Steinke at tau < 1: steps of
#: 0.05 up to 11 (where the optimal orders lie for epsilon_B <= 4), then integers (Opacus computes
#: integer orders fast and fractional ones slowly, ~0.02 s each at tau = 0.5).
RDP_TABLE_ORDERS = np.concatenate(
    [np.round(np.arange(1.05, 11.0, 0.05), 2), np.arange(11.0, 257.0)]
)


def opacus_rdp(tau: float, sigma: float, steps: int) -> Callable[[np.ndarray], np.ndarray]:
    """The base DP-SGD's RDP curve (Opacus' sampled-Gaussian RDP, N = ``steps``) as a step
    function that can only over-state it: tabulated at :data:`RDP_TABLE_ORDERS` and, between two
    orders, the value at the larger one (RDP is nondecreasing in alpha); +inf above 256.

    Opacus' series loses precision at large fractional orders (negative values above alpha ~ 280
    at sigma ~ 9); a tabulated value that is not finite and >= 0 is replaced by +inf. Both only
    raise the bound built on the curve, so it stays an upper bound."""
    import_opacus()
    from opacus.accountants.analysis.rdp import compute_rdp

    grid = RDP_TABLE_ORDERS
    g = np.asarray(compute_rdp(q=tau, noise_multiplier=sigma, steps=steps, orders=list(grid)))
    g = np.where(np.isfinite(g) & (g >= 0), g, np.inf)
    g = np.maximum.accumulate(g)
    table = np.append(g, np.inf)

    def rdp(a: np.ndarray) -> np.ndarray:
        a = np.asarray(a, dtype=float)
        return table[np.searchsorted(grid, a, side="left")]

    return rdp


@lru_cache(maxsize=256)
def fig6_point(
    epsilon_base: float,
    tau: float,
    eta: float,
    nu: float,
    steps: int = STEPS,
    delta: float = DELTA,
) -> dict[str, float]:
    """The four Fig. 6 bounds of one (epsilon_B, tau, TNB(eta, nu)) point.

    epsilon_U-P: Papernot-Steinke (A.1 Theorem 1) on the base DP-SGD's RDP curve (tau = 1:
    alpha mu^2/2; tau < 1: Opacus' sampled-Gaussian RDP tabulated, :func:`opacus_rdp`,
    alpha' <= 256); epsilon_U-O /
    epsilon_U-G: Algorithm 3 with mu_O (Eq. 19) / mu_G (Corollary 7); exact: the hockey-stick
    epsilon of the reduced game at mu_O (not in the paper).
    """
    _check_delta(delta)
    check_budgets([epsilon_base])
    tau = check_tau(tau)
    xi = TruncatedNegativeBinomial(float(eta), float(nu))
    # base_mu for both variants, with one (slow) noise calibration instead of two
    from dpaudit.accounting.dpsgd import dpsgd_gdp_mu, noise_multiplier

    sigma = noise_multiplier(epsilon_base, delta, tau, steps, "rdp", 1e-4)
    mu_o = tau * math.sqrt(steps) / sigma
    mu_g = dpsgd_gdp_mu(sigma, tau, steps, poisson=False)
    if tau == 1.0:
        ps = papernot_steinke_epsilon(xi, mu_o, delta)
    else:
        rdp = papernot_steinke_rdp(xi, opacus_rdp(tau, sigma, steps), max_order_prime=256.0)
        orders = DEFAULT_ORDERS
        ps = rdp_to_dp(orders, rdp(orders), delta)[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {
            "mu_O": mu_o,
            "mu_G": mu_g,
            "sigma": sigma,
            "mean_runs": xi.mean(),
            "epsilon_U_P": ps,
            "epsilon_U_G": reduced_game_epsilon_rdp(xi, mu_g, delta),
            "epsilon_U_O": reduced_game_epsilon_rdp(xi, mu_o, delta),
            "epsilon_exact": reduced_game_epsilon_exact(xi, mu_o, delta),
        }
