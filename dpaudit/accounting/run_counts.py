"""The run-count distributions xi of private selection (hyper-parameter tuning with a random
number of runs).

Xiang, Wang, Wang (2024), "How Does Selection Leak Privacy: Revisiting Private Selection and
Improved Results for Hyper-parameter Tuning" (arXiv:2402.13087), Appendix A.1 and Eq. 21: the
tuning protocol (their Algorithm 2) runs a DP base algorithm K ~ xi times and releases only the
best run. :class:`TruncatedNegativeBinomial`, :class:`PoissonRuns`, :class:`BinaryRuns` and
:class:`FixedRuns` (a point mass, for checks) each know their pmf, mean, probability generating
function G and G'; :func:`make_distribution` builds one by name. The bounds that use them are in
:mod:`dpaudit.accounting.selection`.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np
from scipy import special, stats


class RunCountDistribution(ABC):
    """A law of the number of runs K in {0, 1, 2, ...} (K = 0 releases a data-free Null)."""

    name: str

    @abstractmethod
    def pmf(self, k: np.ndarray) -> np.ndarray:
        """P[K = k]."""

    @abstractmethod
    def mean(self) -> float:
        """E[K]."""

    @abstractmethod
    def pgf(self, u: np.ndarray) -> np.ndarray:
        """G(u) = E[u^K] for u in [0, 1]."""

    @abstractmethod
    def log_pgf_derivative_at_cdf(self, x: np.ndarray) -> np.ndarray:
        """log G'(Phi(x)), evaluated stably for x in the far tails."""

    @abstractmethod
    def sample(self, size: int, rng: np.random.Generator) -> np.ndarray:
        """``size`` i.i.d. draws of K (exact)."""

    def p_zero(self) -> float:
        """P[K = 0] (the atom at Null, identical under both datasets)."""
        return 0.0

    def log_max_density(self, x: np.ndarray) -> np.ndarray:
        """log of the density of the max of K draws of N(0, 1) on K >= 1 (mass 1 - P[K=0]).

        Algorithm 3, lines 3-4: E_k[k F(x)^{k-1} f(x)] = f(x) G'(F(x)).
        """
        x = np.asarray(x, dtype=float)
        return stats.norm.logpdf(x) + self.log_pgf_derivative_at_cdf(x)


def _check_prob(name: str, value: float, lo_open: float = 0.0, hi_open: float = 1.0) -> None:
    if not (isinstance(value, int | float | np.floating) and lo_open < value < hi_open):
        raise ValueError(f"{name} must lie in ({lo_open}, {hi_open}), got {value!r}")


@dataclass(frozen=True)
class TruncatedNegativeBinomial(RunCountDistribution):
    """TNB(eta, nu) on {1, 2, ...} (Appendix A.1; Papernot and Steinke 2022, Definition 1).

    P[K=k] = (1-nu)^k / (nu^{-eta} - 1) prod_{l=0}^{k-1} (l+eta)/(l+1)   (eta != 0),
    P[K=k] = (1-nu)^k / (k log(1/nu))                                      (eta = 0, logarithmic).
    eta = 1 is the geometric law of Liu and Talwar. E[K] = eta (1-nu) / (nu (1 - nu^eta)), or
    (1/nu - 1)/log(1/nu) at eta = 0 (Papernot-Steinke; the paper writes only "E_xi").
    """

    eta: float
    nu: float
    name: str = "tnb"

    def __post_init__(self) -> None:
        if not (isinstance(self.eta, int | float | np.floating) and -1 < self.eta < math.inf):
            raise ValueError(f"TNB eta must lie in (-1, inf), got {self.eta!r}")
        _check_prob("TNB nu", self.nu)

    def _norm(self) -> float:  # nu^{-eta} - 1, divided by eta (positive for every eta > -1)
        return math.expm1(-self.eta * math.log(self.nu)) / self.eta

    def pmf(self, k: np.ndarray) -> np.ndarray:
        k = np.asarray(k)
        kk = np.maximum(k, 1).astype(float)
        log1mnu = math.log1p(-self.nu)
        if self.eta == 0:
            logp = kk * log1mnu - np.log(kk) - math.log(math.log(1 / self.nu))
        else:
            # prod_{l<k} (l+eta)/(l+1) = Gamma(k+eta) / (Gamma(eta) k!)  (sign-safe form below)
            logprod = (
                special.gammaln(kk + self.eta)
                - special.gammaln(1 + self.eta)
                - special.gammaln(kk + 1)
            )
            # = eta * Gamma(k+eta)/(Gamma(1+eta) k!) / eta; the 1/eta goes into _norm
            logp = kk * log1mnu + logprod - math.log(self._norm())
        return np.where(k >= 1, np.exp(logp), 0.0)

    def mean(self) -> float:
        nu, eta = self.nu, self.eta
        if eta == 0:
            return (1 / nu - 1) / math.log(1 / nu)
        return eta * (1 - nu) / (nu * (1 - nu**eta))

    def pgf(self, u: np.ndarray) -> np.ndarray:
        u = np.asarray(u, dtype=float)
        base = 1 - (1 - self.nu) * u
        if self.eta == 0:
            return np.log(base) / math.log(self.nu)
        return np.expm1(-self.eta * np.log(base)) / math.expm1(-self.eta * math.log(self.nu))

    def log_pgf_derivative_at_cdf(self, x: np.ndarray) -> np.ndarray:
        # 1 - (1-nu) Phi(x) = nu + (1-nu) Phi(-x), accurate for large x
        log_base = np.logaddexp(math.log(self.nu), math.log1p(-self.nu) + special.log_ndtr(-x))
        log1mnu = math.log1p(-self.nu)
        if self.eta == 0:
            return log1mnu - math.log(math.log(1 / self.nu)) - log_base
        return log1mnu - math.log(self._norm()) - (self.eta + 1) * log_base

    def sample(self, size: int, rng: np.random.Generator) -> np.ndarray:
        if self.eta == 0:
            return stats.logser.rvs(1 - self.nu, size=size, random_state=rng).astype(np.int64)
        if self.eta > 0:
            # zero-truncated NB(eta, nu): draw NB and redraw the zeros (exact)
            out = rng.negative_binomial(self.eta, self.nu, size=size)
            bad = out == 0
            while bad.any():
                out[bad] = rng.negative_binomial(self.eta, self.nu, size=int(bad.sum()))
                bad = out == 0
            return out.astype(np.int64)
        # -1 < eta < 0: inverse cdf on a table; the tail beyond it has mass < 1e-15
        kmax = int(math.ceil(40.0 / self.nu)) + 10
        cdf = np.cumsum(self.pmf(np.arange(1, kmax + 1)))
        u = rng.random(size) * cdf[-1]
        return (np.searchsorted(cdf, u, side="right") + 1).astype(np.int64)


@dataclass(frozen=True)
class PoissonRuns(RunCountDistribution):
    """K ~ Poisson(mean) (Papernot and Steinke 2022; Appendix A.1, Theorem 2). K = 0 is allowed
    and releases Null, which carries no information."""

    mean_runs: float
    name: str = "poisson"

    def __post_init__(self) -> None:
        if not (isinstance(self.mean_runs, int | float | np.floating) and self.mean_runs > 0):
            raise ValueError(f"Poisson mean must be > 0, got {self.mean_runs!r}")

    def pmf(self, k: np.ndarray) -> np.ndarray:
        return stats.poisson.pmf(k, self.mean_runs)

    def mean(self) -> float:
        return float(self.mean_runs)

    def p_zero(self) -> float:
        return math.exp(-self.mean_runs)

    def pgf(self, u: np.ndarray) -> np.ndarray:
        return np.exp(self.mean_runs * (np.asarray(u, dtype=float) - 1))

    def log_pgf_derivative_at_cdf(self, x: np.ndarray) -> np.ndarray:
        return math.log(self.mean_runs) - self.mean_runs * special.ndtr(-np.asarray(x))

    def sample(self, size: int, rng: np.random.Generator) -> np.ndarray:
        return rng.poisson(self.mean_runs, size=size).astype(np.int64)


@dataclass(frozen=True)
class BinaryRuns(RunCountDistribution):
    """The paper's two-point law (Eq. 21): P[K=1] = s, P[K=L] = 1 - s."""

    big_l: int
    s: float
    name: str = "binary"

    def __post_init__(self) -> None:
        if isinstance(self.big_l, bool) or not isinstance(self.big_l, int | np.integer):
            raise ValueError(f"binary L must be an integer >= 2, got {self.big_l!r}")
        if self.big_l < 2:
            raise ValueError(f"binary L must be an integer >= 2, got {self.big_l!r}")
        _check_prob("binary s", self.s)

    def pmf(self, k: np.ndarray) -> np.ndarray:
        k = np.asarray(k)
        return np.where(k == 1, self.s, 0.0) + np.where(k == self.big_l, 1 - self.s, 0.0)

    def mean(self) -> float:
        return self.s + (1 - self.s) * self.big_l

    def pgf(self, u: np.ndarray) -> np.ndarray:
        u = np.asarray(u, dtype=float)
        return self.s * u + (1 - self.s) * u**self.big_l

    def log_pgf_derivative_at_cdf(self, x: np.ndarray) -> np.ndarray:
        return np.logaddexp(
            math.log(self.s),
            math.log1p(-self.s) + math.log(self.big_l) + (self.big_l - 1) * special.log_ndtr(x),
        )

    def sample(self, size: int, rng: np.random.Generator) -> np.ndarray:
        return np.where(rng.random(size) < self.s, 1, self.big_l).astype(np.int64)


@dataclass(frozen=True)
class FixedRuns(RunCountDistribution):
    """K = k always (no privacy amplification from randomness; for checks: k = 1 is the base)."""

    k: int
    name: str = "fixed"

    def __post_init__(self) -> None:
        if isinstance(self.k, bool) or not isinstance(self.k, int | np.integer) or self.k < 1:
            raise ValueError(f"fixed number of runs must be an integer >= 1, got {self.k!r}")

    def pmf(self, k: np.ndarray) -> np.ndarray:
        return np.where(np.asarray(k) == self.k, 1.0, 0.0)

    def mean(self) -> float:
        return float(self.k)

    def pgf(self, u: np.ndarray) -> np.ndarray:
        return np.asarray(u, dtype=float) ** self.k

    def log_pgf_derivative_at_cdf(self, x: np.ndarray) -> np.ndarray:
        return math.log(self.k) + (self.k - 1) * special.log_ndtr(x)

    def sample(self, size: int, rng: np.random.Generator) -> np.ndarray:
        return np.full(size, self.k, dtype=np.int64)


def make_distribution(kind: str, **params: float) -> RunCountDistribution:
    """Build a xi by name: tnb (eta, nu), poisson (mean), binary (L, s), fixed (k)."""
    if kind == "tnb":
        return TruncatedNegativeBinomial(float(params["eta"]), float(params["nu"]))
    if kind == "poisson":
        return PoissonRuns(float(params["mean"]))
    if kind == "binary":
        return BinaryRuns(int(params["L"]), float(params["s"]))
    if kind == "fixed":
        return FixedRuns(int(params["k"]))
    raise ValueError(
        f"unknown run-count distribution {kind!r}; allowed: tnb, poisson, binary, fixed"
    )
