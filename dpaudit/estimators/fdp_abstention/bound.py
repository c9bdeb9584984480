"""f-DP auditing in one run with abstention (Mahloujifar, Melis and Chaudhuri, "Auditing
f-Differential Privacy in One Run", ICML 2025, PMLR 267:42615-42641; arXiv:2410.22235).

m canaries, each included by a fair coin, one run of the mechanism; the auditor guesses the
membership of c' of them and abstains on the rest, and c of the c' guesses are correct. The
null hypothesis is "the mechanism is f-DP" for a trade-off curve f of a one-parameter family
(mu-GDP, the Laplace trade-off, f_{eps,delta}, and the DP-SGD curves of the paper's Sec. 4:
Poisson-subsampled Gaussian steps of fixed rate q and number, varying noise). The paper bounds
the probability of at least c correct guesses under any f-DP mechanism by a numerical
recursion on the "blow-up" function f_bar(x) = 1 - f(x) (their Algorithm 3, auditing with
abstention; alphabet k = 2, member or not, or k > 2 options per canary in the reconstruction
game of their Alg. 2, which multiplies f_bar^{-1} by k - 1):

* start with r = tau c / m and h = tau (c' - c) / m;
* for i = c - 1, ..., 0: h_new = max(h, (k - 1) f_bar^{-1}(r)),
  r <- r + i / (c' - i) (h_new - h), h <- h_new;
* if r + h > c' / m at the end, P[at least c correct] <= tau: the null is rejected at level
  tau.

Both r and h only grow along the recursion, so it stops as soon as r + h exceeds c' / m (a
rejection) or h stops changing (then nothing changes any more). The lower bound is the least
private member of the family that is still rejected at level 1 - confidence, found by bisection
on the family parameter (rejection is monotone in it: a larger parameter gives a pointwise
smaller f_bar^{-1}); the rejected, conservative end of the final bracket is returned and
reported as (epsilon, delta) by the family's own conversion (mu-GDP to (epsilon, delta) by the
exact GDP profile).

Unlike the tight one-run bound of :mod:`.fdp_one_run` (Xiang et al.) this test uses only the
counts (c', c), not which guesses were the most confident, and it is valid for every f-DP
mechanism of the family, including f_{eps,delta} with delta > 0.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy import special

from dpaudit.estimators.common.checks import check_confidence, check_integers
from dpaudit.estimators.common.search import bisect_rejected, bracket
from dpaudit.estimators.fdp_one_run.bound import PARAM_MAX, FdpBound, no_guess_bound
from dpaudit.estimators.fdp_one_run.families import canonical_family, to_epsilon

#: The null families this test supports.
ABSTENTION_FAMILIES = ("gdp", "laplace", "approx_dp", "subsampled_gaussian")
#: Absolute tolerance of the bisection on the family parameter.
PARAM_TOL = 1e-7
#: The same for ``subsampled_gaussian``, whose every parameter costs a privacy-loss
#: distribution (the rejected end is returned either way, so a coarser bracket only loosens).
SGM_PARAM_TOL = 1e-4
#: Value discretisation of the (pessimistic) privacy-loss distribution of ``subsampled_gaussian``.
SGM_DISCRETIZATION = 1e-2
#: Name of the test in the ``tail`` column of a row (the recursion replaces a tail bound).
TAIL = "recursion"


def check_family(family: str) -> str:
    """The canonical name of a family this test supports (a clear error otherwise)."""
    family = canonical_family(family)
    if family not in ABSTENTION_FAMILIES:
        raise ValueError(
            f"family {family!r} is not supported by the f-DP abstention audit; allowed: "
            f"{', '.join(ABSTENTION_FAMILIES)}"
        )
    return family


def inverse_blow_up(
    family: str, theta: float, delta: float = 0.0, q: float | None = None, steps: int = 1
):
    """f_bar^{-1} of the family's trade-off curve f_theta, f_bar(x) = 1 - f(x): the smallest
    type-I error x whose power 1 - f(x) reaches y (a scalar function of y in [0, 1]).

    * ``gdp``: f(x) = Phi(Phi^{-1}(1 - x) - mu), so f_bar^{-1}(y) = Phi(Phi^{-1}(y) - mu).
    * ``laplace``: the trade-off of Lap(0, 1) against Lap(mu, 1): f_bar^{-1}(y) = y e^{-mu}
      for y < 1/2, e^{-mu} / (4 (1 - y)) up to 1 - e^{-mu}/2, then 1 - e^{mu} (1 - y).
    * ``approx_dp``: f(x) = max(0, 1 - delta - e^eps x, e^{-eps}(1 - delta - x)), so
      f_bar^{-1}(y) = max(0, (y - delta) e^{-eps}, 1 - delta - e^eps (1 - y)).
    * ``subsampled_gaussian`` (needs ``q``): ``steps`` Poisson-subsampled Gaussian steps of rate
      q and noise multiplier 1 / mu (DP-SGD with clipping norm 1), both neighbouring
      directions: :func:`sgm_curve` (numerical, no root finding: an interpolation along the
      curve's vertices).
    """
    family = check_family(family)
    theta = float(theta)
    if theta < 0 or math.isnan(theta):
        raise ValueError(f"the family parameter must be >= 0, got {theta}")
    if family == "subsampled_gaussian":
        alpha, power = sgm_curve(theta, _check_q(q), _check_steps(steps))

        def sgm(y: float) -> float:
            if y >= 1.0:
                return 1.0
            return float(np.interp(y, power, alpha)) if y > power[0] else 0.0

        return sgm
    if family == "gdp":
        mu = theta

        def gdp(y: float) -> float:
            if y <= 0.0:
                return 0.0
            if y >= 1.0:
                return 1.0
            return float(special.ndtr(special.ndtri(y) - mu))

        return gdp
    if family == "laplace":
        e_neg = math.exp(-theta)
        knee = 1.0 - e_neg / 2

        def laplace(y: float) -> float:
            if y < 0.5:
                return max(0.0, y * e_neg)
            if y <= knee:
                return e_neg / (4.0 * (1.0 - y))
            return min(1.0, 1.0 - (1.0 - y) / e_neg)

        return laplace
    if not 0.0 <= delta < 1.0:
        raise ValueError(f"family approx_dp needs delta in [0, 1), got {delta}")
    e_pos = math.exp(min(theta, 700.0))

    def approx_dp(y: float) -> float:
        if y >= 1.0:
            return 1.0
        return max(0.0, (y - delta) / e_pos, 1.0 - delta - e_pos * (1.0 - y))

    return approx_dp


def _check_q(q: float | None) -> float:
    if q is None or not 0.0 < float(q) <= 1.0:
        raise ValueError(f"family subsampled_gaussian needs a sampling rate q in (0, 1], got {q}")
    return float(q)


def _check_steps(steps: int) -> int:
    if not isinstance(steps, int | np.integer) or steps < 1:
        raise ValueError(f"steps must be an integer >= 1, got {steps!r}")
    return int(steps)


def _pair_vertices(pmf) -> tuple[np.ndarray, np.ndarray]:
    """(type-I error, power) of the likelihood-ratio tests of one discretised privacy-loss
    distribution (dp_accounting's ``DensePLDPmf``: mass p_j of the loss l_j under the upper
    distribution U; the lower one L puts p_j e^{-l_j} there and the rest at loss -inf; U's
    infinity mass has loss +inf): rejecting L when the loss is at least each l_j, from the
    largest loss down. Exact for that pair. A sparse PMF (few losses) is made dense first."""
    if not hasattr(pmf, "_probs"):
        pmf = pmf.to_dense_pmf()
    p = np.maximum(np.asarray(pmf._probs, dtype=float), 0.0)  # FFT round-off: tiny negatives
    losses = (pmf._lower_loss + np.arange(len(p))) * pmf._discretization
    with np.errstate(divide="ignore", over="ignore"):
        lower = np.minimum(np.exp(np.log(p) - losses), 1.0)  # L's mass: at most 1 each
    lower[p == 0] = 0.0
    alpha = np.concatenate(([0.0], np.minimum(np.cumsum(lower[::-1]), 1.0), [1.0]))
    power = np.concatenate(([0.0], np.cumsum(p[::-1]), [1.0])) + float(pmf._infinity_mass)
    return alpha, np.minimum(power, 1.0)


def _upper_hull(alpha: np.ndarray, power: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The upper concave hull of the points (alpha, power), from alpha = 0 (monotone chain)."""
    order = np.lexsort((-power, alpha))
    xs, ys = alpha[order], power[order]
    hx: list[float] = []
    hy: list[float] = []
    for x, y in zip(xs.tolist(), ys.tolist(), strict=True):
        if hx and x == hx[-1]:
            continue  # the larger power at this alpha came first
        while len(hx) >= 2 and (hx[-1] - hx[-2]) * (y - hy[-2]) >= (hy[-1] - hy[-2]) * (x - hx[-2]):
            hx.pop(), hy.pop()
        hx.append(x), hy.append(y)
    return np.array(hx), np.array(hy)


@functools.lru_cache(maxsize=1024)  # a bisection's dyadic parameters recur across audits
def sgm_curve(
    mu: float, q: float, steps: int, discretization: float = SGM_DISCRETIZATION
) -> tuple[np.ndarray, np.ndarray]:
    """Vertices (alpha, power) of f_bar = 1 - f for ``steps`` Poisson-subsampled Gaussian steps
    (rate q, noise multiplier 1 / mu), f = the symmetrised trade-off curve: the upper concave
    hull of the likelihood-ratio tests of both neighbouring directions (remove and add) of
    dp_accounting's pessimistic privacy-loss distribution
    (:func:`dpaudit.accounting.dpsgd.dpsgd_pld`), i.e. the convex minorant of the two trade-off
    curves, min(f_remove, f_add)** (Dong, Roth, Su 2022, arXiv:1905.02383, Sec. 4.1 for the
    symmetrisation). The pessimistic discretisation (dp_accounting's connect-the-dots, Doroshenko,
    Ghazi, Kamath, Kumar, Manurangsi 2022; truncated tails moved to the infinite loss) dominates
    the exact pair, so this f lies below the exact curve (tested: never above it at q = 1 and
    at one step): the null is weaker and the test stays valid. mu = 0 is the identity
    (f(x) = 1 - x). Cached per setting; the cost grows with mu (about 0.3 s at mu = 1.4, 4 s
    at mu = 8, 9 s at mu = 32 for q = 0.5 and 4 steps under load)."""
    if mu <= 0.0:
        return np.array([0.0, 1.0]), np.array([0.0, 1.0])
    from dpaudit.accounting.dpsgd import dpsgd_pld

    pld = dpsgd_pld(1.0 / mu, q, steps, discretization)
    parts = [_pair_vertices(pld._pmf_remove), _pair_vertices(pld._pmf_add)]
    alpha = np.concatenate([a for a, _ in parts] + [np.array([0.0, 1.0])])
    power = np.concatenate([b for _, b in parts] + [np.array([0.0, 1.0])])
    hx, hy = _upper_hull(alpha, power)
    keep = np.concatenate(([True], np.diff(hy) > 0))  # strictly increasing power: invertible
    return hx[keep], hy[keep]


def sgm_epsilon(mu: float, q: float, steps: int, delta: float) -> float:
    """(epsilon, delta) of the ``subsampled_gaussian`` null at mu: the same pessimistic
    privacy-loss distribution's epsilon at ``delta`` (0 at mu = 0, inf at delta = 0)."""
    if mu <= 0.0:
        return 0.0
    if delta <= 0.0:
        return math.inf
    from dpaudit.accounting.dpsgd import dpsgd_pld

    pld = dpsgd_pld(1.0 / mu, q, steps, SGM_DISCRETIZATION)
    return max(0.0, float(pld.get_epsilon_for_delta(delta)))


def _check_k(k: int) -> int:
    if not isinstance(k, int | np.integer) or k < 2:
        raise ValueError(f"the number of options per canary k must be an integer >= 2, got {k!r}")
    return int(k)


def _check_counts(m: int, guesses: int, correct: int) -> None:
    check_integers(m=m, guesses=guesses, correct=correct)
    if m < 1:
        raise ValueError(f"need m >= 1 canaries, got m={m}")
    if not 0 <= guesses <= m:
        raise ValueError(f"need 0 <= guesses <= m, got guesses={guesses}, m={m}")
    if not 0 <= correct <= guesses:
        raise ValueError(f"need 0 <= correct <= guesses, got correct={correct}, guesses={guesses}")


def rejects(m: int, guesses: int, correct: int, inverse, tau: float, k: int = 2) -> bool:
    """True when ``correct`` of ``guesses`` guesses on ``m`` canaries has probability at most
    ``tau`` under every mechanism whose blow-up inverse is ``inverse`` (the recursion above).

    ``k`` is the number of options per canary: 2 for membership (Alg. 1), k > 2 for the
    reconstruction game (Alg. 2: each canary is one of k examples drawn uniformly, the auditor
    names it or abstains); Theorem 3.1's f_bar argument is divided by k - 1, so the recursion
    takes h_new = max(h, (k - 1) f_bar^{-1}(r))."""
    _check_counts(m, guesses, correct)
    if not 0.0 < tau < 1.0:
        raise ValueError(f"the level tau must lie in (0, 1), got {tau}")
    k = _check_k(k)
    r = tau * correct / m
    h = tau * (guesses - correct) / m
    limit = guesses / m
    for i in range(correct - 1, -1, -1):
        h_new = max(h, (k - 1) * inverse(r))
        if h_new == h:  # a fixed point: nothing changes any more
            break
        r = min(1.0, r + i / (guesses - i) * (h_new - h))
        h = h_new
        if r + h > limit:  # r and h only grow: the end is a rejection
            return True
    return r + h > limit


def param_lower_bound(
    m: int,
    guesses: int,
    correct: int,
    family: str = "gdp",
    confidence: float = 0.95,
    delta: float = 0.0,
    q: float | None = None,
    steps: int = 1,
    k: int = 2,
) -> float:
    """The largest family parameter whose f-DP null is rejected at level 1 - confidence (0 if
    none is; PARAM_MAX if every one up to it is), to PARAM_TOL (SGM_PARAM_TOL for
    ``subsampled_gaussian``, with its ``q`` and ``steps``), on the rejected side; ``k``
    options per canary (:func:`rejects`)."""
    family = check_family(family)
    _check_counts(m, guesses, correct)
    k = _check_k(k)
    if family == "subsampled_gaussian":
        q, steps = _check_q(q), _check_steps(steps)
    elif q is not None or steps != 1:
        raise ValueError(f"q and steps belong to family subsampled_gaussian, not {family!r}")
    tol = SGM_PARAM_TOL if family == "subsampled_gaussian" else PARAM_TOL
    check_confidence(confidence)
    tau = 1.0 - confidence

    def rejected(theta: float) -> bool:
        inverse = inverse_blow_up(family, theta, delta, q, steps)
        return rejects(m, guesses, correct, inverse, tau, k)

    if correct == 0 or not rejected(0.0):
        return 0.0
    lo, hi = bracket(rejected, PARAM_MAX)
    if hi > PARAM_MAX:
        return PARAM_MAX if rejected(PARAM_MAX) else bisect_rejected(rejected, lo, PARAM_MAX, tol)
    return bisect_rejected(rejected, lo, hi, tol)


def epsilon_lower_bound(
    n: int,
    r: int,
    wrong: int,
    family: str = "gdp",
    delta: float = 1e-5,
    confidence: float = 0.95,
    q: float | None = None,
    tail: str = TAIL,
    steps: int = 1,
    k: int = 2,
) -> FdpBound:
    """The audit's lower bound for r released guesses on n canaries, ``wrong`` of them wrong
    (the signature of :func:`dpaudit.estimators.fdp_one_run.bound.epsilon_lower_bound`, so that the
    same selection rules run it). ``delta`` is the delta of the f_{eps,delta} null and the
    delta of the (epsilon, delta) report; ``q`` and ``steps`` are the sampling rate and the
    number of steps of the ``subsampled_gaussian`` family (its epsilon: :func:`sgm_epsilon`);
    ``k`` the options per canary (2: membership; k > 2: the reconstruction game, Alg. 2);
    ``tail`` is not used."""
    family = check_family(family)
    if not 0.0 <= delta < 1.0:
        raise ValueError(f"delta must lie in [0, 1), got {delta}")
    if not 0 <= wrong <= r:
        raise ValueError(f"need 0 <= wrong <= r, got wrong={wrong}, r={r}")
    theta = param_lower_bound(n, r, r - wrong, family, confidence, delta, q, steps, k)
    if family == "subsampled_gaussian":
        epsilon = sgm_epsilon(theta, float(q), int(steps), delta)
    else:
        epsilon = to_epsilon(family, theta, delta)
    return FdpBound.of(family, theta, epsilon, math.nan, (n, r, wrong), (delta, confidence, TAIL))


def best_over_grid(
    n: int,
    grid,
    level: float,
    *,
    counts,
    family: str = "gdp",
    delta: float = 1e-5,
    k: int = 2,
) -> tuple[int, tuple[FdpBound, int, int]]:
    """The result of ``selection.rules.best_of`` over the guess counts ``grid`` (the first r,
    in grid order, with the largest epsilon of :func:`epsilon_lower_bound` at ``level``;
    ``counts(r)`` gives (k_plus, k_minus, wrong)), without running every bisection.

    The candidates are visited in decreasing order of a cheap proxy (the plug-in accuracy's
    lower ``level`` Wilson bound; speed only). A candidate is bounded in full only if its test
    still rejects the null at the largest parameter found so far: otherwise its own parameter,
    the largest rejected one, lies strictly below (rejection is monotone in the parameter,
    Mahloujifar et al. 2025, as the bisection of :func:`param_lower_bound` assumes), and so
    does its epsilon: the bisections' ends lie on dyadic grids at least 2^-24 apart, over
    which the (increasing) conversion to epsilon changes by far more than its 1e-12 tolerance.
    Such a candidate can neither be the maximum nor tie with it (when the best epsilon is
    positive; an epsilon of 0, which a range of parameters maps to, bounds every candidate in
    full), so the pick is the loop's. ``k``: options per canary (:func:`rejects`). Not for
    ``subsampled_gaussian`` (coarser bisection; the selection rules' own loop runs it)."""
    family = check_family(family)
    if family == "subsampled_gaussian":
        raise ValueError("best_over_grid does not take family subsampled_gaussian")
    tau = 1.0 - level
    asked, cands = [], []  # each r asked for; (guesses made, k_plus, k_minus, wrong) there
    for r in grid:
        kp, km, wrong = counts(r)  # kp + km <= r: ties straddling a cut abstain (.ties)
        asked.append(int(r))
        cands.append((kp + km, kp, km, wrong))
    if not cands:
        raise ValueError("the candidate grid is empty")
    z = float(special.ndtri(level))
    proxy = []
    for r, _, _, wrong in cands:
        if r == 0:  # no guess made (:mod:`.common.ties`): bound 0, visited last
            proxy.append(-math.inf)
            continue
        p = (r - wrong) / r
        centre = (p + z * z / (2 * r)) / (1 + z * z / r)
        half = z * math.sqrt(p * (1 - p) / r + z * z / (4 * r * r)) / (1 + z * z / r)
        proxy.append(centre - half)
    order = sorted(range(len(cands)), key=lambda i: -proxy[i])
    done: dict[int, FdpBound] = {}
    best_theta = 0.0
    for i in order:
        r, _, _, wrong = cands[i]
        if best_theta > 0.0 and (
            r == 0
            or not rejects(n, r, r - wrong, inverse_blow_up(family, best_theta, delta), tau, k)
        ):
            continue  # its parameter, hence its epsilon, is below the best's
        b = _bound_or_none(n, r, wrong, family, delta, level, k)
        done[i] = b
        best_theta = max(best_theta, b.param)
    if not max(b.epsilon for b in done.values()) > 0.0:
        # epsilon 0 is reached by a range of parameters (ties): every candidate in full
        for i in range(len(cands)):
            if i not in done:
                r, _, _, wrong = cands[i]
                done[i] = _bound_or_none(n, r, wrong, family, delta, level, k)
    best = None
    for i in sorted(done):  # the loop's choice among the candidates that can be the maximum
        if best is None or done[i].epsilon > done[best].epsilon:
            best = i
    _, kp, km, _ = cands[best]
    return asked[best], (done[best], kp, km)


def _bound_or_none(
    n: int, r: int, wrong: int, family: str, delta: float, level: float, k: int = 2
) -> FdpBound:
    """:func:`epsilon_lower_bound`, or the bound of no guess where every guess was abstained
    on (r = 0, :mod:`.common.ties`)."""
    if r == 0:
        return no_guess_bound(n, family, delta, level, TAIL)
    return epsilon_lower_bound(n, r, wrong, family, delta, level, k=k)


def rejection_rate(
    n: int,
    r: int,
    wrong_pmf: np.ndarray,
    family: str,
    theta: float,
    delta: float = 0.0,
    confidence: float = 0.95,
    q: float | None = None,
    steps: int = 1,
    k: int = 2,
) -> float:
    """The exact probability that the test rejects the f_theta null when the wrong count of
    the r guesses on n canaries has law ``wrong_pmf`` (index u = number wrong): a validity
    check on a mechanism whose wrong-count law is known (rejection is monotone in the number
    of correct guesses, so the sum stops at the first u not rejected)."""
    inverse = inverse_blow_up(family, theta, delta, q, steps)
    rate = 0.0
    for u in range(r + 1):
        if not rejects(n, r, r - u, inverse, 1.0 - confidence, k):
            break
        rate += float(wrong_pmf[u])
    return rate
