"""Table 1 of Mahloujifar, Melis, Chaudhuri, "Auditing f-Differential Privacy in One Run"
(ICML 2025, arXiv:2410.22235): the idealised Gaussian setting of their App. D (Alg. 4).

The setting: m orthogonal unit canaries; canary i has a sign s_i = +1 (in) or -1 (out) by a
fair coin, and the auditor observes s_i + N(0, (2 sigma)^2), a Gaussian mechanism of
mu = 1 / sigma. For c' guesses the auditor guesses "in" on the c'/2 largest observations (and
"out" on the c'/2 smallest, the same accuracy by symmetry); the paper sets the number of
correct guesses to c = ceil(c' * the fraction of the c'/2 largest with s = +1), the fraction
averaged over 100 repetitions (:func:`ideal_counts`). Each method audits the same (m, c', c)
and reports its best epsilon over c' at delta = 1e-5 (Table 1):

* ``theoretical``: the epsilon of mu-GDP at delta;
* ``Steinke et al.``: the (epsilon, delta) one-run test of Steinke, Nasr, Jagielski (2023)
  (:mod:`dpaudit.estimators.one_run.bound`) at delta;
* ``Steinke et al. (pointwise)``: Sec. 4.2 of Mahloujifar et al.: one game, the (m, c') that is
  best for Steinke et al. at delta = 1e-5; then the (epsilon_delta', delta') test at 60 values
  delta' = 10^-x, x evenly spaced in [3, 9]; the Gaussian curve mu is rejected when any one
  test rejects (as the paper states: no correction for the 60 tests), reported at delta
  (:func:`steinke_pointwise`);
* ``ours (Mahloujifar et al.)``: the recursion of their Algorithm 3 with the mu-GDP family at
  tau = 0.05 (:mod:`dpaudit.estimators.fdp_abstention.bound`).

Our choices where the paper is silent: the c' grid (:func:`guess_grid`, geometric, even
values), the seed. The paper's printed values (:data:`PAPER_TABLE1`) are kept only to be put
next to ours (column ``paper``); they never enter a computation. Findings
(docs/estimators/fdp_abstention.md, "Table 1"): the counts reproduce the paper's own
(c' = 1500, c = 1429 at m = 10^5, sigma = 1, App. B), the Steinke et al. columns agree, and the
paper's own bound on these counts stays below its printed column.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy import special, stats

from dpaudit.estimators.fdp_abstention import bound as fdp_abstention
from dpaudit.estimators.fdp_one_run.families import from_epsilon, to_epsilon
from dpaudit.estimators.one_run import bound as one_run
from dpaudit.seeding import derive_seed

#: Table 1 of the paper (delta = 1e-5): sigma -> (m, theoretical, Steinke et al.,
#: Steinke et al. (pointwise), ours).
PAPER_TABLE1 = {
    0.5: (100_000, 9.99, 4.99, 5.01, 8.16),
    1.0: (100_000, 4.37, 2.61, 2.71, 3.61),
    2.0: (100_000, 1.99, 1.33, 1.35, 1.59),
    4.0: (1_000_000, 0.92, 0.61, 0.67, 0.82),
}
#: The series names of the table, in the paper's column order.
SERIES = (
    "theoretical",
    "Steinke et al.",
    "Steinke et al. (pointwise)",
    "ours (Mahloujifar et al.)",
)
#: Sec. 4.2: the deltas of the pointwise audit, 10^-x for 60 x evenly spaced in [3, 9].
POINTWISE_DELTAS = tuple(float(10.0**-x) for x in np.linspace(3.0, 9.0, 60))


def guess_grid(m: int, size: int = 40, smallest: int = 10) -> list[int]:
    """Our c' grid (the paper does not state its own): ``size`` geometric values from
    ``smallest`` to m, each rounded to an even number (c'/2 guesses each way), deduplicated."""
    if m < 2 or size < 1 or smallest < 2:
        raise ValueError(f"need m >= 2, size >= 1, smallest >= 2; got {m}, {size}, {smallest}")
    values = np.geomspace(min(smallest, m), m, size)
    return sorted({max(2, 2 * (int(round(v)) // 2)) for v in values})


def ideal_fractions(
    m: int, sigma: float, guesses: Sequence[int], repetitions: int = 100, seed: int = 0
) -> np.ndarray:
    """The fraction of s = +1 among the c'/2 largest observations of App. D's Gaussian
    mechanism, per repetition (rows) and per c' of ``guesses`` (columns)."""
    if sigma <= 0 or repetitions < 1:
        raise ValueError(f"need sigma > 0 and repetitions >= 1, got {sigma}, {repetitions}")
    halves = np.array([int(g) // 2 for g in guesses])
    if len(halves) == 0 or halves.min() < 1 or 2 * halves.max() > m:
        raise ValueError(f"each c' must lie in [2, m = {m}], got {list(guesses)}")
    rng = np.random.default_rng(derive_seed(seed, "fdp_abstention_ideal", m, sigma))
    top = int(halves.max())
    out = np.empty((repetitions, len(halves)))
    for t in range(repetitions):
        signs = rng.integers(0, 2, size=m) * 2 - 1
        obs = signs + rng.normal(0.0, 2.0 * sigma, size=m)
        idx = np.argpartition(-obs, top - 1)[:top]
        idx = idx[np.argsort(-obs[idx], kind="stable")]
        inside = np.cumsum(signs[idx] > 0)
        out[t] = inside[halves - 1] / halves
    return out


def ideal_counts(
    m: int, sigma: float, guesses: Sequence[int], repetitions: int = 100, seed: int = 0
) -> list[int]:
    """App. D, Alg. 4: c = ceil(c' * the mean fraction over ``repetitions``), per c'."""
    mean = ideal_fractions(m, sigma, guesses, repetitions, seed).mean(axis=0)
    # the product is a ratio of integers: drop float noise before the ceiling
    return [
        min(int(g), math.ceil(round(int(g) * f, 9))) for g, f in zip(guesses, mean, strict=True)
    ]


def steinke_pointwise(
    m: int,
    guesses: int,
    correct: int,
    deltas: Sequence[float] = POINTWISE_DELTAS,
    delta: float = 1e-5,
    confidence: float = 0.95,
) -> tuple[float, float]:
    """Sec. 4.2's pointwise audit: (mu, epsilon at ``delta``) of the least private Gaussian
    curve rejected by any of the (epsilon_d, d) tests of Steinke et al. at the ``deltas``.

    The test at d rejects mu-GDP when its epsilon at d lies below the test's bound eps_d, i.e.
    when mu is below the mu whose GDP epsilon at d is eps_d; the union rejects every mu below
    the largest of these."""
    mu = 0.0
    for d in deltas:
        eps_d = one_run.epsilon_lower_bound(m, guesses, correct, d, confidence)
        if eps_d > 0.0:
            mu = max(mu, from_epsilon("gdp", eps_d, d))
    return mu, to_epsilon("gdp", mu, delta)


def _ours_best(m: int, grid: list[int], counts: list[int], delta: float, confidence: float):
    by_r = dict(zip(grid, counts, strict=True))
    r, (bound, _, _) = fdp_abstention.best_over_grid(
        m, grid, confidence, counts=lambda g: (g // 2, g - g // 2, g - by_r[g]), delta=delta
    )
    return r, bound


def table1_rows(
    sigma: float,
    m: int,
    repetitions: int = 100,
    seed: int = 0,
    grid_size: int = 40,
    delta: float = 1e-5,
    confidence: float = 0.95,
) -> list[dict]:
    """The four Table 1 entries for one sigma (one row each; x = sigma, y = epsilon)."""
    grid = guess_grid(m, grid_size)
    counts = ideal_counts(m, sigma, grid, repetitions, seed)
    paper = PAPER_TABLE1.get(float(sigma))
    rows = []

    def row(series: str, eps: float, mu: float, r: int | None, c: int | None) -> None:
        printed = paper[1 + SERIES.index(series)] if paper and paper[0] == m else math.nan
        rows.append(
            {"x": float(sigma), "y": eps, "series": series, "m": m, "mu": mu,
             "guesses": r, "correct": c, "paper": printed, "difference": eps - printed}
        )  # fmt: skip

    mu_true = 1.0 / sigma
    row("theoretical", to_epsilon("gdp", mu_true, delta), mu_true, None, None)
    (e_s, g_s, c_s), (e_o, r, c_o, mu_o) = _both(m, grid, counts, delta, confidence)
    row("Steinke et al.", e_s, from_epsilon("gdp", e_s, delta), g_s, c_s)
    mu_p, eps_p = steinke_pointwise(m, g_s, c_s, POINTWISE_DELTAS, delta, confidence)
    row("Steinke et al. (pointwise)", eps_p, mu_p, g_s, c_s)
    row("ours (Mahloujifar et al.)", e_o, mu_o, r, c_o)
    return rows


def table1(
    sigmas: Sequence[float] = (0.5, 1.0, 2.0, 4.0),
    ms: Sequence[int] = (100_000, 100_000, 100_000, 1_000_000),
    repetitions: int = 100,
    seed: int = 0,
    grid_size: int = 40,
    delta: float = 1e-5,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Table 1 (idealised Gaussian, App. D): theoretical epsilon, Steinke et al., Steinke et
    al. (pointwise) and the paper's bound per sigma, with the paper's printed value beside ours
    (columns ``paper``, ``difference``). Tidy: x = sigma, y = epsilon, series = the column."""
    if len(sigmas) != len(ms):
        raise ValueError(f"sigmas and ms must have the same length, got {sigmas} and {ms}")
    rows = []
    for sigma, m in zip(sigmas, ms, strict=True):
        rows += table1_rows(float(sigma), int(m), repetitions, seed, grid_size, delta, confidence)
    return pd.DataFrame(rows)


def argmax_accuracy(k: int, sigma: float) -> float:
    """P[the argmax of k coordinates is the shifted one]: one coordinate 1 + N(0, s^2), the
    other k - 1 N(0, s^2), s = sigma sqrt(2) (so that any two options are (1/sigma)-GDP apart,
    as the membership setting of App. D), by quadrature of
    integral phi(z) Phi(z + 1/s)^(k - 1) dz."""
    if k < 2 or sigma <= 0:
        raise ValueError(f"need k >= 2 and sigma > 0, got {k}, {sigma}")
    shift = 1.0 / (sigma * math.sqrt(2.0))
    z = np.linspace(-12.0, 12.0, 24_001)
    log_cdf = special.log_ndtr(z + shift) * (k - 1)
    return float(np.trapezoid(np.exp(log_cdf) * stats.norm.pdf(z), z))


def reconstruction_curve(
    sigma: float = 0.6,
    m: int = 10_000,
    ks: Sequence[int] = (50, 100, 200, 500, 1000, 2000, 5000),
    delta: float = 1e-5,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """App. B, Fig. 5 as an idealised target: the reconstruction game (Alg. 2) on m canaries of
    k options, no abstention (c' = m), the auditor naming the argmax; c = floor(m x the
    expected accuracy, :func:`argmax_accuracy`), the bound of Theorem 3.1 with k options and
    the mu-GDP family, mu = 1/sigma, beside the theoretical epsilon. Our choices (the paper
    shows the curves only in a figure): the mechanism (orthogonal options, noise sigma sqrt(2)
    per coordinate) and the expected count in place of repetitions. x = k, y = epsilon."""
    truth = to_epsilon("gdp", 1.0 / sigma, delta)
    rows = []
    for k in ks:
        acc = argmax_accuracy(int(k), sigma)
        c = int(math.floor(m * acc))
        b = fdp_abstention.epsilon_lower_bound(m, m, m - c, "gdp", delta, confidence, k=int(k))
        common = {"x": int(k), "k": int(k), "m": m, "sigma": sigma, "accuracy": acc, "correct": c}
        rows.append({**common, "y": b.epsilon, "mu": b.param, "series": f"ours, m = {m}"})
        rows.append({**common, "y": truth, "mu": 1.0 / sigma, "series": "theoretical"})
    return pd.DataFrame(rows)


# ------------------------------------------------------------------ Figs. 1 and 6-11


def expected_counts(m: int, sigma: float, guesses: Sequence[int]) -> list[int]:
    """Noise-free counts of App. D's setting: c = ceil(c' x the expected accuracy of the c'/2
    largest observations) (:func:`dpaudit.analyses.one_run_theory.gaussian_accuracy` with
    noise 2 sigma), in place of the 100-repetition mean at scales where simulating m
    observations 100 times is too slow (m up to 10^7; our choice)."""
    from dpaudit.analyses.one_run_theory import gaussian_accuracy

    out = []
    for g in guesses:
        acc = gaussian_accuracy(int(g), int(m), 2.0 * sigma)
        out.append(min(int(g), math.ceil(round(int(g) * acc, 9))))
    return out


def _both(m: int, grid: list[int], counts: list[int], delta: float, confidence: float):
    """Steinke et al.'s best over the grid, (epsilon, c', c), and ours, (epsilon, c', c, mu)."""
    steinke = [
        one_run.epsilon_lower_bound(m, g, c, delta, confidence)
        for g, c in zip(grid, counts, strict=True)
    ]
    i = int(np.argmax(steinke))
    r, bound = _ours_best(m, grid, counts, delta, confidence)
    return (steinke[i], grid[i], counts[i]), (bound.epsilon, r, r - bound.wrong, bound.param)


def _row(x, series: str, eps: float, sigma: float, m: int, r, c, **extra) -> dict:
    return {"x": x, "y": eps, "series": series, "sigma": sigma, "m": m, "guesses": r,
            "correct": c, **extra}  # fmt: skip


def versus_m(
    sigma: float = 1.0,
    ms: Sequence[int] = (100, 1000, 10_000, 100_000, 1_000_000, 10_000_000),
    grid_size: int = 40,
    delta: float = 1e-5,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Fig. 1 as an idealised target: Steinke et al. and the paper's bound, each at its best c'
    of our grid, as the number of canaries m grows (noise-free counts, :func:`expected_counts`),
    beside the theoretical epsilon. x = m."""
    truth = to_epsilon("gdp", 1.0 / sigma, delta)
    rows = []
    for m in ms:
        grid = guess_grid(int(m), grid_size)
        counts = expected_counts(int(m), sigma, grid)
        (es, gs, cs), (eo, go, co, _) = _both(int(m), grid, counts, delta, confidence)
        rows += [
            _row(int(m), "Steinke et al.", es, sigma, int(m), gs, cs),
            _row(int(m), "ours (Mahloujifar et al.)", eo, sigma, int(m), go, co),
            _row(int(m), "theoretical", truth, sigma, int(m), None, None),
        ]
    return pd.DataFrame(rows)


def versus_guesses(
    sigma: float = 1.0,
    m: int = 10_000_000,
    guesses: Sequence[int] = (100, 200, 500, 1000, 2000, 5000, 10_000, 20_000, 50_000, 100_000),
    delta: float = 1e-5,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Figs. 6-9 as idealised targets: both bounds at each c' (m = 10^7, noise-free counts).
    x = c'."""
    counts = expected_counts(int(m), sigma, guesses)
    rows = []
    for g, c in zip(guesses, counts, strict=True):
        es = one_run.epsilon_lower_bound(int(m), int(g), c, delta, confidence)
        eo = fdp_abstention.epsilon_lower_bound(
            int(m), int(g), int(g) - c, "gdp", delta, confidence
        )
        rows += [
            _row(int(g), "Steinke et al.", es, sigma, int(m), int(g), c),
            _row(int(g), "ours (Mahloujifar et al.)", eo.epsilon, sigma, int(m), int(g), c),
        ]
    return pd.DataFrame(rows)


def versus_delta_confidence(
    vary: str = "delta",
    values: Sequence[float] = (1e-9, 1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3),
    m: int = 100_000,
    guesses: int = 1500,
    correct: int = 1429,
    delta: float = 1e-5,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Figs. 10-11 as idealised targets: the paper's counts (m = 10^5, c' = 1500, c = 1429,
    sigma = 1, App. B), both bounds as delta (``vary: delta``) or the confidence (``vary:
    confidence``) varies, the other held at ``delta`` / ``confidence``. x = the varied value."""
    if vary not in ("delta", "confidence"):
        raise ValueError(f"vary must be 'delta' or 'confidence', got {vary!r}")
    rows = []
    for v in values:
        d, conf = (float(v), confidence) if vary == "delta" else (delta, float(v))
        es = one_run.epsilon_lower_bound(m, guesses, correct, d, conf)
        eo = fdp_abstention.epsilon_lower_bound(m, guesses, guesses - correct, "gdp", d, conf)
        extra = {"delta": d, "confidence": conf}
        rows += [
            _row(float(v), "Steinke et al.", es, 1.0, m, guesses, correct, **extra),
            _row(float(v), "ours (Mahloujifar et al.)", eo.epsilon, 1.0, m, guesses, correct,
                 **extra),
            _row(float(v), "theoretical", to_epsilon("gdp", 1.0, d), 1.0, m, None, None, **extra),
        ]  # fmt: skip
    return pd.DataFrame(rows)
