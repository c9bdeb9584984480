"""Claimed epsilon of DP-SGD with Poisson subsampling, from four accountants.

The mechanism: ``steps`` compositions of the Poisson-subsampled Gaussian mechanism with noise
multiplier ``sigma`` (noise std / clipping norm) and sample rate ``q``. Each accountant returns
an upper bound on epsilon at ``delta`` (PLD and PRV are numerically tight; RDP is looser; GDP is
a central-limit *approximation*, not a bound):

``rdp``  Opacus ``RDPAccountant``: Mironov, Talwar, Zhang (2019) RDP of the sampled Gaussian,
         converted with Balle et al. (2020), Theorem 21, over Opacus' default orders.
``prv``  Opacus ``PRVAccountant``: Gopi, Lee, Wutschitz (2021); the returned value is the upper
         end of its error bracket.
``gdp``  Opacus ``GaussianAccountant``: Bu, Dong, Long, Su (2020) CLT, mu = q sqrt(T (e^{1/sigma^2}
         - 1)) for Poisson sampling, then mu-GDP -> (epsilon, delta) (Dong, Roth, Su, Cor. 2.13).
``pld``  Google ``dp_accounting`` privacy-loss distribution of the event, self-composed as its
         ``PLDAccountant`` does (Meiser and Mohammadi 2018; Koskela et al.), pessimistic
         discretisation, interval 1e-4 (see docs/accounting.md).

PRV and PLD discretise on grids whose size grows without bound as the noise shrinks (sigma 0.1,
q 1, 1000 steps: about 10^9 PRV points, tens of GB). Both grids are computed first and a grid
above :data:`MAX_GRID_POINTS` raises :class:`GridTooLargeError` before anything is allocated;
:func:`accountant_table` then reports that accountant's error and the others' values.

:func:`accountant_table` puts them side by side; :func:`noise_multiplier` calibrates sigma for a
target epsilon (Opacus' ``get_noise_multiplier`` for rdp/prv/gdp, the same bisection for pld).

A training run's claim (:func:`poisson_epsilon`, :func:`calibrate_noise`; the trainers of
:mod:`dpaudit.training` and the config check call them) is always the Poisson-subsampled
Gaussian accountant's, whatever sampler actually ran (the shuffling paper's point, Annamalai
et al. 2024, arXiv:2411.10614, §1; the score file records both), with one of
:data:`OPACUS_ACCOUNTANTS` exactly as Opacus's ``PrivacyEngine`` computes it.
"""

from __future__ import annotations

import functools
import math
import os
import warnings
from collections.abc import Callable, Sequence

import numpy as np

from dpaudit.opacus_import import import_opacus

#: The accountants that report DP-SGD's epsilon (``dpaudit accountant``), in the table's order.
EPSILON_ACCOUNTANTS: tuple[str, ...] = ("pld", "prv", "rdp", "gdp")

#: The accountants a training run's claim may name (config key ``train.accountant``):
#: Opacus's, the ones its ``PrivacyEngine`` calibrates and reports with
#: (:func:`poisson_epsilon`, :func:`calibrate_noise`).
OPACUS_ACCOUNTANTS: tuple[str, ...] = ("rdp", "prv", "gdp")

#: Discretisation interval of the dp_accounting PLD (smaller = tighter and slower).
PLD_DISCRETIZATION = 1e-4

#: Largest noise multiplier the calibration tries (as Opacus' MAX_SIGMA).
MAX_SIGMA = 1e6


#: Largest grid (points) the PRV or PLD accountant may discretise on; the environment variable
#: ``DPAUDIT_ACCOUNTANT_MAX_GRID_POINTS`` or a ``max_grid_points`` argument (CLI
#: ``--max-grid-points``) replaces it. 2**25 points is about 2.1 GiB.
MAX_GRID_POINTS = 2**25
MAX_GRID_ENV = "DPAUDIT_ACCOUNTANT_MAX_GRID_POINTS"
#: Peak resident bytes per grid point (growth of ``ru_maxrss`` over one call, grids of 10-14
#: million points; opacus 1.6, dp_accounting 0.4): PRV's discretisation and FFT composition,
#: PLD's FFT self-composition. Both about 67.
BYTES_PER_POINT = {"prv": 68, "pld": 68}


class GridTooLargeError(ValueError):
    """An accountant would discretise on a grid above the limit; raised before allocating."""


def max_grid_points_limit(max_grid_points: int | None = None) -> int:
    """The grid limit in force: ``max_grid_points`` if given, else the environment variable
    :data:`MAX_GRID_ENV`, else :data:`MAX_GRID_POINTS`."""
    source = "max_grid_points"
    if max_grid_points is None:
        env = os.environ.get(MAX_GRID_ENV, "").strip()
        if not env:
            return MAX_GRID_POINTS
        source, max_grid_points = MAX_GRID_ENV, env
    try:
        limit = int(max_grid_points)
    except (TypeError, ValueError):
        limit = 0
    if limit < 1:
        raise ValueError(f"{source} must be an integer >= 1, got {max_grid_points!r}")
    return limit


def _setting(sigma: float, q: float, steps: int) -> str:
    return f"noise multiplier {sigma:g}, sample rate {q:g}, {steps} steps"


def check_grid(accountant: str, points: int, limit: int, setting: str, what: str) -> None:
    """Raise :class:`GridTooLargeError` when ``points`` exceeds ``limit``, naming the grid
    size, its estimated memory and the ways out."""
    if points <= limit:
        return
    gib = points * BYTES_PER_POINT[accountant] / 2**30
    raise GridTooLargeError(
        f"{accountant} accountant ({setting}): {what} would have {points:,} points "
        f"(about {gib:,.1f} GiB), above the limit of {limit:,} points. Such a setting has tiny "
        "noise or a huge epsilon; use the rdp accountant (config key train.accountant; "
        "`dpaudit accountant` reports rdp and gdp beside it), or raise the limit "
        f"(--max-grid-points, or the environment variable {MAX_GRID_ENV}) if the machine "
        "has the memory"
    )


@functools.cache
def _guarded_prv_class():
    """Opacus' ``PRVAccountant`` that checks its domain's size before discretising on it."""
    import_opacus()
    from opacus.accountants import PRVAccountant

    class GuardedPRVAccountant(PRVAccountant):
        """PRV accountant whose grid is checked against :func:`max_grid_points_limit`."""

        max_grid_points: int | None = None

        def _get_domain(self, prvs, num_self_compositions, eps_error, delta_error):
            domain = super()._get_domain(prvs, num_self_compositions, eps_error, delta_error)
            sigma, q, _ = self.history[-1] if self.history else (math.nan, math.nan, 0)
            steps = sum(num_self_compositions)
            check_grid(
                "prv",
                int(domain.size),
                max_grid_points_limit(self.max_grid_points),
                _setting(sigma, q, steps),
                f"its domain at eps_error {eps_error:g}",
            )
            return domain

    return GuardedPRVAccountant


def guarded_prv_accountant(max_grid_points: int | None = None):
    """A fresh Opacus PRV accountant whose grid is checked before it is allocated."""
    acc = _guarded_prv_class()()
    acc.max_grid_points = max_grid_points
    return acc


#: The name under which the guarded PRV accountant is registered with Opacus, for Opacus'
#: ``get_noise_multiplier`` (which creates accountants by name).
GUARDED_PRV = "dpaudit_prv"


def guarded_accountant_name(accountant: str) -> str:
    """The Opacus mechanism name to calibrate with: the guarded PRV for ``"prv"`` (registered
    on first use; the default grid limit applies), else ``accountant`` itself."""
    if accountant != "prv":
        return accountant
    import_opacus()
    try:
        from opacus.accountants.registry import register_accountant
    except ImportError:  # an Opacus without the registry: its own PRV, unguarded
        return accountant
    register_accountant(GUARDED_PRV, _guarded_prv_class(), force=True)
    return GUARDED_PRV


def check_dpsgd(sigma: float, q: float, steps: int, delta: float) -> None:
    """Raise ValueError naming the first bad DP-SGD parameter."""
    if not (isinstance(sigma, int | float | np.floating) and math.isfinite(sigma) and sigma > 0):
        raise ValueError(f"noise multiplier must be a finite number > 0, got {sigma!r}")
    if not (isinstance(q, int | float | np.floating) and 0 < q <= 1):
        raise ValueError(f"sample rate must lie in (0, 1], got {q!r}")
    if isinstance(steps, bool) or not isinstance(steps, int | np.integer) or steps < 1:
        raise ValueError(f"steps must be an integer >= 1, got {steps!r}")
    if not (isinstance(delta, int | float | np.floating) and 0 < delta < 1):
        raise ValueError(f"delta must lie in (0, 1), got {delta!r}")


def epsilon_rdp(
    sigma: float, q: float, steps: int, delta: float, orders: Sequence[float] | None = None
) -> float:
    """RDP accountant (Opacus), minimised over ``orders`` (default: Opacus' DEFAULT_ALPHAS)."""
    import_opacus()
    from opacus.accountants import RDPAccountant

    check_dpsgd(sigma, q, steps, delta)
    acc = RDPAccountant()
    acc.history = [(float(sigma), float(q), int(steps))]
    return float(acc.get_epsilon(delta=delta, alphas=None if orders is None else list(orders)))


def epsilon_prv(
    sigma: float,
    q: float,
    steps: int,
    delta: float,
    eps_error: float = 0.01,
    max_grid_points: int | None = None,
) -> float:
    """PRV accountant (Opacus): the upper end of its estimate, within ``eps_error``.

    Raises :class:`GridTooLargeError` before discretising when its grid would exceed
    ``max_grid_points`` (default: :func:`max_grid_points_limit`).
    """
    check_dpsgd(sigma, q, steps, delta)
    acc = guarded_prv_accountant(max_grid_points)
    acc.history = [(float(sigma), float(q), int(steps))]
    return float(acc.get_epsilon(delta=delta, eps_error=eps_error))


def epsilon_gdp(sigma: float, q: float, steps: int, delta: float, poisson: bool = True) -> float:
    """GDP CLT approximation (Opacus ``GaussianAccountant``); Poisson or uniform subsampling.

    Not an upper bound: it is accurate only for many steps and small q (Bu et al. 2020).
    """
    from dpaudit.accounting.gaussian import gdp_epsilon

    check_dpsgd(sigma, q, steps, delta)
    return gdp_epsilon(delta, dpsgd_gdp_mu(sigma, q, steps, poisson))


def dpsgd_gdp_mu(sigma: float, q: float, steps: int, poisson: bool = True) -> float:
    """The CLT mu of DP-SGD (Opacus ``compute_mu_poisson`` / ``compute_mu_uniform``).

    ``poisson=False`` is Bu et al.'s formula that Xiang, Wang, Wang (2024) quote as Corollary 7
    (their mu_G): mu = sqrt(2) c sqrt(e^{1/sigma^2} Phi(1.5/sigma) + 3 Phi(-0.5/sigma) - 2),
    c = q sqrt(T).
    """
    import_opacus()
    from opacus.accountants.analysis import gdp

    fn = gdp.compute_mu_poisson if poisson else gdp.compute_mu_uniform
    mu = float(fn(steps=int(steps), noise_multiplier=float(sigma), sample_rate=float(q)))
    if not (math.isfinite(mu) and mu > 0):
        raise ValueError(
            f"the GDP mu is not finite for noise multiplier {sigma} (e^(1/sigma^2) overflows)"
        )
    return mu


def pld_grid_points(
    sigma: float, q: float, value_discretization_interval: float = PLD_DISCRETIZATION
) -> int:
    """Points of one step's discretised privacy-loss distribution, computed without building it.

    dp_accounting discretises the loss between its values at the noise's truncation points
    (``GaussianPrivacyLoss.privacy_loss_tail``, the truncation it uses itself), for the
    remove and the add direction; the larger of the two, divided by the interval.
    """
    from dp_accounting.pld import privacy_loss_mechanism as plm

    widths = []
    for adjacency in (plm.AdjacencyType.REMOVE, plm.AdjacencyType.ADD):
        loss = plm.GaussianPrivacyLoss(
            float(sigma), sampling_prob=float(q), adjacency_type=adjacency
        )
        tail = loss.privacy_loss_tail()
        lo = loss.privacy_loss(tail.upper_x_truncation)
        hi = loss.privacy_loss(tail.lower_x_truncation)
        widths.append(abs(hi - lo))
    return int(math.ceil(max(widths) / value_discretization_interval)) + 2


#: Tail mass the PLD self-composition may truncate (dp_accounting's default).
_PLD_TAIL = 1e-15


def _composed_grid_points(pld, steps: int) -> int | None:
    """Length of the FFT that dp_accounting's ``self_compose(steps)`` will allocate (its own
    Chernoff truncation bounds, ``common.compute_self_convolve_bounds``), or ``None`` when this
    dp_accounting version stores its PMFs differently."""
    from dp_accounting.pld import common

    sizes = []
    for name in ("_pmf_remove", "_pmf_add"):
        probs = getattr(getattr(pld, name, None), "_probs", None)
        if probs is None:
            return None
        lo, hi = common.compute_self_convolve_bounds(probs, int(steps), _PLD_TAIL)
        sizes.append(max(hi - lo + 1, len(probs)))
    return max(sizes)


def dpsgd_pld(
    sigma: float,
    q: float,
    steps: int,
    value_discretization_interval: float = PLD_DISCRETIZATION,
    max_grid_points: int | None = None,
):
    """The dp_accounting ``PrivacyLossDistribution`` of ``steps`` Poisson-subsampled Gaussian
    steps (pessimistic, connect-the-dots; what its ``PLDAccountant`` composes for this event).

    Both grids are checked before they are allocated: one step's (:func:`pld_grid_points`)
    and the composition's FFT; either above ``max_grid_points`` raises
    :class:`GridTooLargeError`.
    """
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    limit = max_grid_points_limit(max_grid_points)
    setting = _setting(sigma, q, steps)
    single = pld_grid_points(sigma, q, value_discretization_interval)
    check_grid("pld", single, limit, setting, "one step's privacy-loss grid")
    pld = pld_lib.from_gaussian_mechanism(
        standard_deviation=float(sigma),
        value_discretization_interval=value_discretization_interval,
        sampling_prob=float(q),
    )
    composed = _composed_grid_points(pld, steps)
    if composed is not None:
        check_grid("pld", composed, limit, setting, f"the {steps}-fold composition's FFT grid")
    return pld.self_compose(int(steps), tail_mass_truncation=_PLD_TAIL)


def epsilon_pld(
    sigma: float,
    q: float,
    steps: int,
    delta: float,
    value_discretization_interval: float = PLD_DISCRETIZATION,
    max_grid_points: int | None = None,
) -> float:
    """PLD accountant (dp_accounting), pessimistic estimate, so an upper bound."""
    check_dpsgd(sigma, q, steps, delta)
    pld = dpsgd_pld(sigma, q, steps, value_discretization_interval, max_grid_points)
    return float(pld.get_epsilon_for_delta(delta))


EPSILON_FUNCTIONS: dict[str, Callable[..., float]] = {
    "pld": epsilon_pld,
    "prv": epsilon_prv,
    "rdp": epsilon_rdp,
    "gdp": epsilon_gdp,
}


def epsilon(
    accountant: str,
    sigma: float,
    q: float,
    steps: int,
    delta: float,
    max_grid_points: int | None = None,
) -> float:
    """Epsilon of DP-SGD under the named accountant (one of :data:`EPSILON_ACCOUNTANTS`);
    ``max_grid_points`` bounds the grids of ``prv`` and ``pld`` (:class:`GridTooLargeError`)."""
    try:
        fn = EPSILON_FUNCTIONS[accountant]
    except KeyError:
        raise ValueError(
            f"unknown accountant {accountant!r}; allowed: {', '.join(EPSILON_ACCOUNTANTS)}"
        ) from None
    if accountant in BYTES_PER_POINT:
        return fn(sigma, q, steps, delta, max_grid_points=max_grid_points)
    return fn(sigma, q, steps, delta)


def accountant_table(
    sigma: float,
    q: float,
    steps: int,
    delta: float,
    accountants: Sequence[str] = EPSILON_ACCOUNTANTS,
    max_grid_points: int | None = None,
):
    """One row per accountant for one DP-SGD setting (a pandas DataFrame).

    Columns: accountant, epsilon, is_upper_bound (False for the GDP approximation), error (why
    an accountant gave no value, e.g. the GDP mu overflowing for tiny sigma, or a PRV/PLD grid
    above ``max_grid_points`` (:class:`GridTooLargeError`, raised before allocating); epsilon is
    then NaN and the other accountants still answer), ratio_to_pld (when pld is among
    ``accountants``), and the setting (noise_multiplier, sample_rate, steps, delta).
    """
    import pandas as pd

    check_dpsgd(sigma, q, steps, delta)
    max_grid_points_limit(max_grid_points)  # a bad limit is an error, not a row's
    rows = []
    for name in accountants:
        try:
            eps, err = epsilon(name, sigma, q, steps, delta, max_grid_points), ""
        except (ValueError, OverflowError, FloatingPointError, RuntimeError) as exc:
            # RuntimeError: Opacus' PRV gives up on its own numerics for some tiny noise
            if name not in EPSILON_FUNCTIONS:
                raise
            eps, err = math.nan, str(exc)
        rows.append(
            {"accountant": name, "epsilon": eps, "is_upper_bound": name != "gdp", "error": err}
        )
    df = pd.DataFrame(rows)
    if "pld" in set(accountants):
        df["ratio_to_pld"] = df["epsilon"] / float(
            df.loc[df.accountant == "pld", "epsilon"].iloc[0]
        )
    df["noise_multiplier"] = float(sigma)
    df["sample_rate"] = float(q)
    df["steps"] = int(steps)
    df["delta"] = float(delta)
    return df


def noise_multiplier(
    target_epsilon: float,
    delta: float,
    q: float,
    steps: int,
    accountant: str = "prv",
    epsilon_tolerance: float = 0.01,
) -> float:
    """The noise multiplier at which DP-SGD reaches ``target_epsilon`` under ``accountant``.

    Returns a sigma whose epsilon lies in [target - epsilon_tolerance, target] (the conservative
    side). rdp, prv and gdp use Opacus' ``get_noise_multiplier``; pld uses the same doubling +
    bisection on :func:`epsilon_pld`.
    """
    check_dpsgd(1.0, q, steps, delta)
    if not (math.isfinite(target_epsilon) and target_epsilon > 0):
        raise ValueError(f"target epsilon must be a finite number > 0, got {target_epsilon!r}")
    if not epsilon_tolerance > 0:
        raise ValueError(f"epsilon tolerance must be > 0, got {epsilon_tolerance!r}")
    if accountant not in EPSILON_ACCOUNTANTS:
        raise ValueError(
            f"unknown accountant {accountant!r}; allowed: {', '.join(EPSILON_ACCOUNTANTS)}"
        )
    if accountant != "pld":
        import_opacus()
        from opacus.accountants.utils import get_noise_multiplier

        return float(
            get_noise_multiplier(
                target_epsilon=target_epsilon,
                target_delta=delta,
                sample_rate=q,
                steps=int(steps),
                accountant=guarded_accountant_name(accountant),
                epsilon_tolerance=epsilon_tolerance,
            )
        )
    lo, hi = 0.0, 10.0
    eps_hi = epsilon_pld(hi, q, steps, delta)
    while eps_hi > target_epsilon:
        lo, hi = hi, 2 * hi
        if hi > MAX_SIGMA:
            raise ValueError(f"target epsilon {target_epsilon} is too small to reach")
        eps_hi = epsilon_pld(hi, q, steps, delta)
    while target_epsilon - eps_hi > epsilon_tolerance:
        mid = 0.5 * (lo + hi)
        eps_mid = epsilon_pld(mid, q, steps, delta)
        if eps_mid < target_epsilon:
            hi, eps_hi = mid, eps_mid
        else:
            lo = mid
    return hi


# --------------------------------------------------------------------------------------------
# The claimed epsilon of a training run (Opacus's accountants, as its PrivacyEngine uses them)
# --------------------------------------------------------------------------------------------


def _check_claim(accountant: str, delta: float | None = None) -> None:
    if accountant not in OPACUS_ACCOUNTANTS:
        raise ValueError(f"unknown accountant {accountant!r}; allowed: {list(OPACUS_ACCOUNTANTS)}")
    if delta is not None and not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta!r}")


def poisson_epsilon(
    noise_multiplier: float, sample_rate: float, steps: int, delta: float, accountant: str = "rdp"
) -> float | None:
    """The claimed epsilon at ``delta`` of ``steps`` Poisson-subsampled Gaussian steps under
    one of :data:`OPACUS_ACCOUNTANTS`; ``None`` (no guarantee) when ``noise_multiplier`` is 0.

    The accountant object Opacus's ``PrivacyEngine`` would hold (``create_accountant``; for
    ``prv`` the guarded one, :func:`guarded_accountant_name`), so ``gdp`` is Opacus's
    ``eps_from_mu``, not :func:`epsilon_gdp`'s root find (they agree to round-off)."""
    _check_claim(accountant, delta)
    if noise_multiplier == 0:
        return None
    import_opacus()
    from opacus.accountants import create_accountant

    # prv: checked against the grid limit before it allocates (GridTooLargeError)
    acc = create_accountant(guarded_accountant_name(accountant))
    acc.history = [(float(noise_multiplier), float(sample_rate), int(steps))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eps = float(acc.get_epsilon(delta=delta))
    if not math.isfinite(eps):
        raise RuntimeError(f"accountant {accountant} returned a non-finite epsilon ({eps})")
    return eps


@functools.lru_cache(maxsize=256)
def calibrate_noise(
    target_epsilon: float, delta: float, sample_rate: float, steps: int, accountant: str = "rdp"
) -> float:
    """The noise multiplier for which the accountant (one of :data:`OPACUS_ACCOUNTANTS`)
    claims ``target_epsilon``: :func:`noise_multiplier` (Opacus's ``get_noise_multiplier``,
    tolerance 0.01 in epsilon); cached, as it takes seconds.

    A target the accountant cannot reach with any noise Opacus searches raises ``ValueError``
    naming the target, delta, sample rate and steps (Opacus says only "The privacy budget is
    too low."). With ``prv``, a noise level whose PRV grid would exceed the limit (tiny noise,
    a huge target) raises :class:`GridTooLargeError` before the grid is allocated.
    """
    _check_claim(accountant, delta)
    if not target_epsilon > 0:
        raise ValueError(f"target_epsilon must be > 0, got {target_epsilon}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return noise_multiplier(target_epsilon, delta, sample_rate, steps, accountant)
        except GridTooLargeError:
            raise  # names its own grid, limit and fix
        except ValueError as exc:
            raise ValueError(
                f"target_epsilon {target_epsilon} at delta {delta} cannot be reached by the "
                f"{accountant} accountant with {steps} steps at sample rate {sample_rate:.6g} "
                f"(Opacus: {exc}); raise the target epsilon or delta, or train fewer steps or "
                "with a smaller batch"
            ) from exc


# --------------------------------------------------------------------------------------------
# Trade-off curves of a claim (Annamalai et al. 2024, arXiv:2411.10614, §6.3.1, Figs. 4-5)
# --------------------------------------------------------------------------------------------


def eps_delta_tradeoff(
    alpha: float | np.ndarray, epsilon: float, delta: float
) -> float | np.ndarray:
    """The trade-off function of (epsilon, delta)-DP: the smallest FNR at FPR ``alpha`` that
    the privacy region of Kairouz, Oh, Viswanath (2015) allows,
    max{0, 1 - delta - e^epsilon alpha, e^-epsilon (1 - delta - alpha)} (Dong, Roth, Su 2022,
    arXiv:1905.02383, Eq. 5; the boundary behind Annamalai et al.'s Eq. 1)."""
    if not (math.isfinite(epsilon) and epsilon >= 0):
        raise ValueError(f"epsilon must be a finite number >= 0, got {epsilon!r}")
    if not 0.0 <= delta < 1.0:
        raise ValueError(f"delta must lie in [0, 1), got {delta!r}")
    a = np.asarray(alpha, dtype=np.float64)
    out = np.maximum(
        np.maximum(1.0 - delta - math.exp(epsilon) * a, math.exp(-epsilon) * (1.0 - delta - a)),
        0.0,
    )
    return float(out) if np.ndim(out) == 0 else out


def tradeoff_from_profile(
    alpha: float | np.ndarray, epsilons: Sequence[float], deltas: Sequence[float]
) -> np.ndarray:
    """The trade-off function of a mechanism that is (epsilon_i, delta_i)-DP for every pair of
    its privacy profile: the upper envelope sup_i f_{epsilon_i, delta_i}(alpha) (Dong, Roth, Su
    2022, Prop. 2.12; tight for the PLD's exact profile, and a valid lower curve for any finite
    set of its pairs)."""
    a = np.atleast_1d(np.asarray(alpha, dtype=np.float64))
    out = np.zeros_like(a)
    for eps, dlt in zip(epsilons, deltas, strict=True):
        out = np.maximum(out, eps_delta_tradeoff(a, float(eps), min(float(dlt), 1.0 - 1e-15)))
    return out


@functools.lru_cache(maxsize=32)
def dpsgd_profile(
    sigma: float,
    q: float,
    steps: int,
    points: int = 400,
    value_discretization_interval: float = PLD_DISCRETIZATION,
) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """The PLD accountant's privacy profile of DP-SGD with Poisson sampling: ``points``
    epsilons from 0 to where delta(epsilon) falls below 1e-12, and their deltas (cached: one
    PLD composition per setting)."""
    check_dpsgd(sigma, q, steps, 0.5)
    pld = dpsgd_pld(sigma, q, steps, value_discretization_interval)
    top = 1.0
    while pld.get_delta_for_epsilon(top) > 1e-12 and top < 200:
        top *= 2.0
    epsilons = tuple(float(e) for e in np.linspace(0.0, top, points))
    return epsilons, tuple(float(pld.get_delta_for_epsilon(e)) for e in epsilons)


def dpsgd_tradeoff(alpha: float | np.ndarray, sigma: float, q: float, steps: int) -> np.ndarray:
    """The trade-off curve of DP-SGD with Poisson sampling (the curve a Poisson-accounted claim
    implies; Annamalai et al. 2024, §6.3.1, "PLD analysis of DP-SGD (Poisson)"): the envelope
    of the PLD accountant's (epsilon, delta(epsilon)) pairs (:func:`dpsgd_profile`,
    :func:`tradeoff_from_profile`)."""
    return tradeoff_from_profile(alpha, *dpsgd_profile(float(sigma), float(q), int(steps)))
