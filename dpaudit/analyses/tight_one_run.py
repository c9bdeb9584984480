"""Pipeline wrappers for "Tight Privacy Audit in One Run" (Xiang, Wang, Xiao, Tian, Wang 2025;
Sec. 6): their f-DP bound (:mod:`dpaudit.estimators.fdp_one_run`) against the one-run bound of
Steinke, Nasr, Jagielski (:mod:`dpaudit.estimators.one_run.bound`) on the same released guesses,
as n, r and delta vary (the paper's Figs. 3-5 and 7-12, as far as the library supports them).

Every point is noise-free: the number of wrong guesses is the expected count (rounded) of the
mechanism's own channels, so the curves are those of :mod:`dpaudit.mechanisms.fdp_one_run_sim`
(benchmarks/fdp_idealised_comparison.py). Two guessing rules:

* ``independent``: the r most confident of n independent f-DP channels (top r by |privacy
  loss|, the paper's "special case", Figs. 3, 4, 7, 9; Theorem 3's sum of v_j);
* ``one_run`` (Gaussian only): Steinke et al.'s guessing, IN for the r/2 highest scores and OUT
  for the r/2 lowest (the paper's "general case", Figs. 5, 11, 12); the expected accuracy is
  P[IN | score above the r/(2n) upper quantile] (as :func:`dpaudit.analyses.one_run_theory.
  gaussian_accuracy`, with S = +-1 and sigma = 2 / mu).

Each table also gives both methods at their own best r over 1, 2, 5 x 10^k <= n and n (our
addition for a fair comparison: at the paper's r = n/5 the one-run bound is far from its own
optimum, which the paper's Sec. 6.4 and Fig. 12 show falls again as r grows). A best-r value
is a maximum over r on the same guesses, not a valid bound (column ``valid`` False, dashed in
figures).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

from dpaudit.analyses import tight_one_run_comparison as cmp
from dpaudit.analyses.one_run_theory import gaussian_accuracy
from dpaudit.estimators.fdp_one_run import bound as fdp_bound
from dpaudit.estimators.fdp_one_run import families, tails
from dpaudit.estimators.one_run import bound as one_run

#: mechanism -> (null family of the paper, its parameter's name).
MECHANISMS: dict[str, tuple[str, str]] = {
    "gaussian": ("gdp", "mu"),
    "laplace": ("laplace", "mu"),
    "randomized_response": ("approx_dp", "epsilon"),
    "subsampled_gaussian": ("subsampled_gaussian", "mu"),
}
GUESSING = ("independent", "one_run")


def _family(mechanism: str, guessing: str, q: float | None) -> str:
    if mechanism not in MECHANISMS:
        raise ValueError(f"unknown mechanism {mechanism!r}; allowed: {sorted(MECHANISMS)}")
    if guessing not in GUESSING:
        raise ValueError(f"unknown guessing {guessing!r}; allowed: {', '.join(GUESSING)}")
    if guessing == "one_run" and mechanism != "gaussian":
        raise ValueError("guessing 'one_run' is implemented for the gaussian mechanism only")
    if mechanism == "subsampled_gaussian" and not (q is not None and 0 < q <= 1):
        raise ValueError(f"mechanism subsampled_gaussian needs q in (0, 1], got {q!r}")
    return MECHANISMS[mechanism][0]


def r_grid(n: int) -> list[int]:
    """1, 2, 5 x 10^k <= n, and n (the grid of each method's own best r)."""
    return sorted({c * 10**e for e in range(12) for c in (1, 2, 5) if c * 10**e <= n} | {n})


def true_epsilon(mechanism: str, theta: float, delta: float, q: float | None = None) -> float:
    """The mechanism's exact epsilon at ``delta`` (Algorithm 2 on its own trade-off curve)."""
    family = _family(mechanism, "independent", q)
    if family == "approx_dp":
        return float(theta)
    return float(families.to_epsilon(family, theta, delta, q))


def point(
    mechanism: str,
    theta: float,
    n: int,
    r: int,
    delta: float = 1e-5,
    q: float | None = None,
    guessing: str = "independent",
    confidence: float = 0.95,
) -> dict[str, float]:
    """Both bounds for r guesses of n with the expected number of wrong ones."""
    family = _family(mechanism, guessing, q)
    if not (isinstance(n, int) and isinstance(r, int) and 1 <= r <= n):
        raise ValueError(f"need integers 1 <= r <= n, got n={n!r}, r={r!r}")
    if guessing == "independent":
        c = cmp.idealised_point(family, float(theta), n, r, delta, confidence, q)
        wrong, ours, theirs = c.wrong, c.fdp_epsilon, c.one_run_epsilon
    else:
        if not theta > 0:
            raise ValueError(f"mu must be > 0, got {theta!r}")
        acc = gaussian_accuracy(r, n, 2.0 / float(theta))
        wrong = int(round(r * (1 - acc)))
        ours = fdp_bound.epsilon_lower_bound(n, r, wrong, family, delta, confidence, q).epsilon
        theirs = one_run.epsilon_lower_bound(n, r, r - wrong, delta, confidence)
    return {"n": n, "r": r, "wrong": wrong, "accuracy": 1 - wrong / r, "ours": ours,
            "one_run": theirs}


#: The series of the paper's method, named for the paper (Xiang et al. 2025, arXiv:2509.08704):
#: its "ours" is the f-DP audit, not this library.
FDP_SERIES = "Xiang et al. (f-DP)"


def _rows(x: float, pt: dict, label: str, valid: bool, extra: dict) -> list[dict]:
    ratio = pt["ours"] / pt["one_run"] if pt["one_run"] > 0 else math.inf
    common = {"x": x, **{k: pt[k] for k in ("n", "r", "wrong", "accuracy")}, "valid": valid,
              **extra}
    return [
        {**common, "y": pt["ours"], "series": f"{FDP_SERIES}, {label}",
         "method": "fdp_one_run", "ratio": ratio},
        {**common, "y": pt["one_run"], "series": f"one-run (Steinke et al.), {label}",
         "method": "one_run", "ratio": ratio},
    ]


def versus_n(
    mechanism: str = "gaussian",
    theta: float = 1.0,
    ns: Sequence[int] = (100, 1000, 10_000, 100_000),
    r_fraction: float = 0.2,
    r: int | None = None,
    delta: float = 1e-5,
    q: float | None = None,
    guessing: str = "independent",
    best_r: bool = True,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Both bounds against n (x) at r = ``r_fraction`` n (Figs. 3, 4, 5, 7, 9) or at a fixed
    ``r`` (Fig. 11), and (``best_r``) each method at its own best r; plus the true epsilon."""
    family = _family(mechanism, guessing, q)
    if r is None and not 0 < r_fraction <= 1:
        raise ValueError(f"r_fraction must lie in (0, 1], got {r_fraction!r}")
    label = f"r={r}" if r is not None else f"r={r_fraction:g}n"
    extra = {"mechanism": mechanism, "family": family, MECHANISMS[mechanism][1]: theta,
             "theta": theta, "delta": delta, "q": q, "guessing": guessing}
    truth = true_epsilon(mechanism, theta, delta, q)
    rows = []
    for n in ns:
        n = int(n)
        rr = min(n, int(r)) if r is not None else max(1, round(r_fraction * n))
        rows += _rows(n, point(mechanism, theta, n, rr, delta, q, guessing, confidence), label,
                      True, extra)
        if best_r:
            sweep = [point(mechanism, theta, n, g, delta, q, guessing, confidence)
                     for g in r_grid(n)]
            b_ours = max(sweep, key=lambda p: p["ours"])
            b_one = max(sweep, key=lambda p: p["one_run"])
            rows += [_rows(n, b_ours, "own best r", False, extra)[0],
                     _rows(n, b_one, "own best r", False, extra)[1]]
        rows.append({"x": n, "n": n, "y": truth, "series": "true epsilon", "valid": True,
                     **extra})
    return pd.DataFrame(rows)


def versus_r(
    mechanism: str = "gaussian",
    theta: float = 0.8,
    n: int = 100_000,
    rs: Sequence[int] = (100, 300, 1000, 3000, 10_000, 30_000, 50_000, 100_000),
    delta: float = 1e-5,
    q: float | None = None,
    guessing: str = "one_run",
    accuracy: bool = True,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Both bounds against r (x) at fixed n (Fig. 12: 0.8-GDP, n = 1e5), with the accuracy
    c/r of the released guesses (the paper's right axis) and the true epsilon."""
    family = _family(mechanism, guessing, q)
    extra = {"mechanism": mechanism, "family": family, "theta": theta, "delta": delta, "q": q,
             "guessing": guessing}
    truth = true_epsilon(mechanism, theta, delta, q)
    rows = []
    for r in rs:
        pt = point(mechanism, theta, int(n), int(r), delta, q, guessing, confidence)
        rows += _rows(int(r), pt, f"n={n}", True, extra)
        if accuracy:
            rows.append({"x": int(r), "n": n, "r": int(r), "y": pt["accuracy"],
                         "series": "accuracy c/r", "valid": True, **extra})
        rows.append({"x": int(r), "n": n, "r": int(r), "y": truth, "series": "true epsilon",
                     "valid": True, **extra})
    return pd.DataFrame(rows)


def versus_delta(
    mechanism: str = "randomized_response",
    theta: float = 3.2,
    n: int = 10_000,
    r: int = 2000,
    deltas: Sequence[float] = (1e-7, 1e-5, 1e-3, 1e-2, 1e-1),
    q: float | None = None,
    guessing: str = "independent",
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Both bounds against delta (x). For randomized response delta is the mechanism's own
    (Fig. 7's two panels, as a curve); otherwise it is the delta of the (epsilon, delta) report
    and of the one-run bound's 2 m delta term (Fig. 11 of Steinke et al.)."""
    family = _family(mechanism, guessing, q)
    rows = []
    for d in deltas:
        d = float(d)
        extra = {"mechanism": mechanism, "family": family, "theta": theta, "delta": d, "q": q,
                 "guessing": guessing}
        pt = point(mechanism, theta, int(n), int(r), d, q, guessing, confidence)
        rows += _rows(d, pt, f"n={n}, r={r}", True, extra)
        rows.append({"x": d, "n": n, "r": r, "y": true_epsilon(mechanism, theta, d, q),
                     "series": "true epsilon", "valid": True, **extra})
    return pd.DataFrame(rows)


def p_values(
    epsilon: float = 1.0,
    deltas: Sequence[float] = (0.01, 0.1),
    n: int = 100,
    wrong: Sequence[int] = tuple(range(0, 31)),
) -> pd.DataFrame:
    """Fig. 10: p-values of the null "(epsilon, delta)-DP" against the number of wrong guesses
    (x) with n = r: Xiang et al.'s (Proposition 1's Chernoff bound, never below the exact
    tail), the exact tail (an extension, not in the paper: at n = r the binomial law of the
    wrong count, see :func:`dpaudit.estimators.fdp_one_run.tails.exact_log_cdf`) and Steinke et
    al.'s Theorem 3.1; plus the expected number of errors under the null (sum_j v_j) in column
    ``expected_errors``."""
    rows = []
    for d in deltas:
        d = float(d)
        expected = float(sum(tails.v_vector("approx_dp", epsilon, n, n, delta=d)))
        for u in wrong:
            u = int(u)
            common = {"x": u, "wrong": u, "n": n, "r": n, "epsilon": epsilon, "delta": d,
                      "expected_errors": expected}
            rows += [
                {**common, "series": f"Xiang et al. (Chernoff), delta={d:g}",
                 "y": tails.p_value(n, n, u, "approx_dp", epsilon, delta=d)},
                {**common, "series": f"exact tail (extension), delta={d:g}",
                 "y": tails.p_value(n, n, u, "approx_dp", epsilon, delta=d, tail="exact")},
                {**common, "series": f"one-run (Steinke et al.), delta={d:g}",
                 "y": one_run.p_value(n, n, n - u, epsilon, d)},
            ]
    return pd.DataFrame(rows)
