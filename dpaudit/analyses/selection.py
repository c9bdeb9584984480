"""Pipeline wrappers for the private-selection paper (Xiang, Wang, Wang 2024; arXiv:2402.13087).

Thin wrappers around :mod:`dpaudit.accounting.selection`, :mod:`dpaudit.accounting.selection_tables`
and :mod:`dpaudit.mechanisms.selection_game` (see docs/mechanisms/selection.md), so that the
pipeline can run them:

* analyses (``f(**params) -> tidy DataFrame`` with columns x, y, series): Example 1 and its
  output law (Section 4, Eq. 6-8, Appendix A.1), Table 3's epsilon_U (Papernot-Steinke),
  Table 4 (Algorithm 3 for the binary xi of Eq. 21) and the bounds of Fig. 6;
* the mechanism of the Fig. 6 audit, :func:`reduced_game_score_file`: the reduced tuning game of
  Fig. 5 for a DP-SGD budget epsilon_B, written as a ``multi_run`` score file whose claimed
  epsilon is the paper's improved bound epsilon_U-O and which also carries Papernot-Steinke,
  epsilon_U-G and the exact epsilon of the game (columns ``claimed_epsilon_<name>`` of the audit
  table).

The paper values copied into :mod:`dpaudit.accounting.selection_tables` are only put next to
ours (column ``paper``); they never enter a computation.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
import pandas as pd

from dpaudit.accounting import selection as sel
from dpaudit.accounting import selection_tables as tables
from dpaudit.scores import ScoreFile

DELTA = tables.DELTA
STEPS = tables.STEPS


def _check_delta(delta: float) -> None:
    if not (isinstance(delta, int | float) and 0 < delta < 1):
        raise ValueError(f"delta must lie in (0, 1), got {delta!r}")


def _check_budgets(epsilon_bases: Sequence[float]) -> list[float]:
    out = [float(e) for e in epsilon_bases]
    if not out or any(not (math.isfinite(e) and e > 0) for e in out):
        raise ValueError(f"epsilon_bases must be finite numbers > 0, got {epsilon_bases!r}")
    return out


def _check_tau(tau: float) -> float:
    if not (isinstance(tau, int | float) and 0 < tau <= 1):
        raise ValueError(f"tau (the sample rate) must lie in (0, 1], got {tau!r}")
    return float(tau)


# ---------------------------------------------------------------------------------------------
# Example 1 (Section 4, Eq. 6-8) and its approximate-DP version (Appendix A.1)
# ---------------------------------------------------------------------------------------------
def example1_curve(
    delta: float = DELTA,
    max_orders: Sequence[float] = (32, 63, 100, 256, 1000, 10_000, 1_000_000),
) -> pd.DataFrame:
    """Example 1, xi = TNB(1, 1e-3) (geometric, mean 1000), base (1, 0)-DP (Eq. 6).

    Series: the Papernot-Steinke prediction at ``delta`` against the largest Renyi order of the
    conversion grid (x), next to the exact epsilon of the tuned mechanism (pure and at ``delta``,
    Theorem 2) and the pure bound 3 epsilon of Liu-Talwar / Papernot-Steinke. The paper's 3.11
    is reproduced by a grid ending near alpha = 100; the prediction falls to 3.00 as the grid
    grows (docs/mechanisms/selection.md, "Finding (Papernot-Steinke in Example 1)").
    """
    _check_delta(delta)
    if not max_orders or any(float(a) <= 1 for a in max_orders):
        raise ValueError(f"max_orders must be Renyi orders > 1, got {max_orders!r}")
    rows = []
    for amax in max_orders:
        ex = sel.example1(delta, max_order=float(amax))
        common = {"x": float(amax), "delta": delta, "max_order": float(amax)}
        rows += [
            {**common, "y": ex["papernot_steinke"], "series": "Papernot-Steinke (delta)",
             "quantity": "papernot_steinke",
             "paper": tables.PAPER_EXAMPLE1["papernot_steinke"],
             "note": "depends on the largest Renyi order; 3.11 needs a grid ending near 100"},
            {**common, "y": ex["epsilon_delta"], "series": "exact tuned mechanism (delta)",
             "quantity": "epsilon_delta", "paper": tables.PAPER_EXAMPLE1["epsilon_delta"],
             "note": "the paper truncates 2.925 to 2.92"},
            {**common, "y": ex["epsilon_pure"], "series": "exact tuned mechanism (pure)",
             "quantity": "epsilon_pure", "paper": tables.PAPER_EXAMPLE1["epsilon_pure"],
             "note": ""},
            {**common, "y": ex["liu_talwar_pure"], "series": "Liu-Talwar / PS pure bound (3 eps)",
             "quantity": "liu_talwar_pure", "paper": 3.0, "note": ""},
        ]
    return pd.DataFrame(rows)


def example1_output_law(b: float = 1e-3, d: float = 1e2, epsilon: float = 1.0) -> pd.DataFrame:
    """Eq. 6 (the base) and Eq. 8 (the tuned mechanism, Theorem 2 with TNB(1, 1e-3)): the
    probabilities of outputs A, B, C (x = 1, 2, 3) under X and X'."""
    p, q = sel.example1_base(b, d, epsilon)
    xi = sel.TruncatedNegativeBinomial(1.0, 1e-3)
    laws = {
        "base M(X)": p,
        "base M(X')": q,
        "tuned H(X)": sel.selection_output_law(p, xi),
        "tuned H(X')": sel.selection_output_law(q, xi),
    }
    return pd.DataFrame(
        [
            {"x": j + 1, "output": "ABC"[j], "y": float(law[j]), "series": name}
            for name, law in laws.items()
            for j in range(3)
        ]
    )


# ---------------------------------------------------------------------------------------------
# Table 3's epsilon_U and the other bounds of the audit setting (TNB(0, 1e-2), tau = 1)
# ---------------------------------------------------------------------------------------------
def table3_epsilon_u(epsilon_bases: Sequence[float] = (1.0, 2.0, 4.0)) -> pd.DataFrame:
    """epsilon_U-P (Papernot-Steinke, A.1 Theorem 1) for xi = TNB(0, 1e-2), tau = 1, delta =
    1e-5, base mu RDP-calibrated to epsilon_B; with Algorithm 3's epsilon_U-O and the exact
    epsilon of the reduced game (neither printed in Table 3) and the paper's column."""
    budgets = _check_budgets(epsilon_bases)
    t = tables.table3_epsilon_u(tuple(budgets))
    rows = []
    for r in t.itertuples():
        base = {"x": r.epsilon_B, "epsilon_B": r.epsilon_B, "mu": r.mu}
        rows += [
            {**base, "y": r.epsilon_U_P, "series": "epsilon_U-P (Papernot-Steinke)",
             "paper": r.paper_epsilon_U, "rel_diff": r.rel_diff,
             "note": "ours ~1% high: the paper's RDP order grid / sigma calibration is unstated"},
            {**base, "y": r.epsilon_U_O, "series": "epsilon_U-O (Algorithm 3)",
             "paper": math.nan, "rel_diff": math.nan, "note": "not printed in Table 3"},
            {**base, "y": r.epsilon_exact, "series": "exact epsilon (reduced game)",
             "paper": math.nan, "rel_diff": math.nan, "note": "not in the paper"},
            {**base, "y": r.paper_epsilon_U, "series": "paper epsilon_U (Table 3)",
             "paper": r.paper_epsilon_U, "rel_diff": math.nan, "note": "copied from the paper"},
        ]
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------
# Table 4: Algorithm 3 for the binary xi (Eq. 21), N = 500
# ---------------------------------------------------------------------------------------------
def _table4_note(v: str, paper: float, ours: float, truncated: float, exact: float) -> str:
    if not math.isfinite(paper):
        return "not printed in the paper"
    diff = ours - paper
    if abs(diff) <= 0.05:
        return f"agrees ({diff:+.2f})"
    text = f"paper {paper:.2f} vs ours {ours:.2f} ({diff:+.2f})"
    if abs(truncated - paper) < abs(diff):
        text += f"; integrating only x in [-6, 6] gives {truncated:.2f} (tails cut)"
    if v == "O" and paper < exact:
        text += f"; paper below the exact epsilon {exact:.2f} (mu calibration)"
    return text


def table4(
    epsilon_bases: Sequence[float] = (1.0, 2.0, 4.0),
    taus: Sequence[float] = (1.0, 0.5, 0.1),
    columns: Sequence[Sequence[float]] = tables.TABLE4_COLUMNS,
) -> pd.DataFrame:
    """Table 4's cells epsilon_U-G / epsilon_U-O (Algorithm 3 with mu_G, mu_O; N = 500,
    delta = 1e-5), converged and with the x-integral truncated to [-6, 6], next to the paper.

    Tidy: one row per (cell, variant, quantity); x = the paper's value (so that ours plotted
    against it lies on the diagonal "paper" series where they agree), y = ours. The ``note``
    column explains each difference (docs/mechanisms/selection.md, Table 4). About 4 minutes of
    one core for the full table (the tau < 1 calibrations dominate).
    """
    budgets = _check_budgets(epsilon_bases)
    taus = [_check_tau(t) for t in taus]
    cols = []
    for c in columns:
        if len(c) != 2:
            raise ValueError(f"each Table 4 column is [L, s], got {c!r}")
        cols.append((int(c[0]), float(c[1])))
    t = tables.table4(tuple(budgets), tuple(taus), tuple(cols))
    rows = []
    for r in t.to_dict("records"):
        cell = {k: r[k] for k in ("epsilon_B", "tau", "L", "s")}
        cell["cell"] = f"eps_B={r['epsilon_B']:g}, tau={r['tau']:g}, L={r['L']}, s={r['s']:g}"
        for v in ("G", "O"):
            paper = float(r[f"paper_{v}"])
            note = _table4_note(v, paper, r[f"ours_{v}"], r[f"truncated_{v}"], r["exact_O"])
            base = {**cell, "variant": v, "mu": r[f"mu_{v}"], "x": paper, "paper": paper,
                    "note": note}
            rows += [
                {**base, "quantity": "converged", "y": r[f"ours_{v}"],
                 "series": f"ours, Algorithm 3 converged ({v})",
                 "diff": r[f"ours_{v}"] - paper},
                {**base, "quantity": "truncated", "y": r[f"truncated_{v}"],
                 "series": f"ours, x in [-6, 6] ({v})", "diff": r[f"truncated_{v}"] - paper},
                {**base, "quantity": "paper", "y": paper, "series": f"paper ({v})", "diff": 0.0},
            ]
            if v == "O":
                rows.append({**base, "quantity": "exact", "y": r["exact_O"],
                             "series": "exact epsilon of the game (mu_O)",
                             "diff": r["exact_O"] - paper})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------
# Fig. 6: the bounds as functions of epsilon_B, and the audited game
# ---------------------------------------------------------------------------------------------
#: Orders at which the base DP-SGD's RDP is tabulated for Papernot-Steinke at tau < 1: steps of
#: 0.05 up to 11 (where the optimal orders lie for epsilon_B <= 4), then integers (Opacus computes
#: integer orders fast and fractional ones slowly, ~0.02 s each at tau = 0.5).
RDP_TABLE_ORDERS = np.concatenate([np.round(np.arange(1.05, 11.0, 0.05), 2),
                                   np.arange(11.0, 257.0)])


def _opacus_rdp(tau: float, sigma: float, steps: int):
    """The base DP-SGD's RDP curve (Opacus' sampled-Gaussian RDP, N = ``steps``) as a step
    function that can only over-state it: tabulated at :data:`RDP_TABLE_ORDERS` and, between two
    orders, the value at the larger one (RDP is nondecreasing in alpha); +inf above 256.

    Opacus' series loses precision at large fractional orders (negative values above alpha ~ 280
    at sigma ~ 9); a tabulated value that is not finite and >= 0 is replaced by +inf. Both only
    raise the bound built on the curve, so it stays an upper bound."""
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
    epsilon_base: float, tau: float, eta: float, nu: float, steps: int = STEPS,
    delta: float = DELTA,
) -> dict[str, float]:
    """The four Fig. 6 bounds of one (epsilon_B, tau, TNB(eta, nu)) point.

    epsilon_U-P: Papernot-Steinke (A.1 Theorem 1) on the base DP-SGD's RDP curve (tau = 1:
    alpha mu^2/2; tau < 1: Opacus' sampled-Gaussian RDP tabulated, :func:`_opacus_rdp`,
    alpha' <= 256); epsilon_U-O /
    epsilon_U-G: Algorithm 3 with mu_O (Eq. 19) / mu_G (Corollary 7); exact: the hockey-stick
    epsilon of the reduced game at mu_O (not in the paper).
    """
    _check_delta(delta)
    _check_budgets([epsilon_base])
    tau = _check_tau(tau)
    xi = sel.TruncatedNegativeBinomial(float(eta), float(nu))
    # sel.base_mu for both variants, with one (slow) noise calibration instead of two
    from dpaudit.accounting.dpsgd import dpsgd_gdp_mu, noise_multiplier

    sigma = noise_multiplier(epsilon_base, delta, tau, steps, "rdp", 1e-4)
    mu_o = tau * math.sqrt(steps) / sigma
    mu_g = dpsgd_gdp_mu(sigma, tau, steps, poisson=False)
    if tau == 1.0:
        ps = sel.papernot_steinke_epsilon(xi, mu_o, delta)
    else:
        rdp = sel.papernot_steinke_rdp(xi, _opacus_rdp(tau, sigma, steps), max_order_prime=256.0)
        orders = sel.DEFAULT_ORDERS
        ps = sel.rdp_to_dp(orders, rdp(orders), delta)[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {
            "mu_O": mu_o,
            "mu_G": mu_g,
            "sigma": sigma,
            "mean_runs": xi.mean(),
            "epsilon_U_P": ps,
            "epsilon_U_G": sel.reduced_game_epsilon_rdp(xi, mu_g, delta),
            "epsilon_U_O": sel.reduced_game_epsilon_rdp(xi, mu_o, delta),
            "epsilon_exact": sel.reduced_game_epsilon_exact(xi, mu_o, delta),
        }


FIG6_SERIES = {
    "epsilon_U_P": "epsilon_U-P (Papernot-Steinke)",
    "epsilon_U_G": "epsilon_U-G (Algorithm 3, mu_G)",
    "epsilon_U_O": "epsilon_U-O (Algorithm 3, mu_O)",
    "epsilon_exact": "exact epsilon (reduced game, mu_O)",
}


def fig6_bounds(
    epsilon_bases: Sequence[float] = (1.0, 2.0, 4.0),
    tau: float = 1.0,
    eta: float = 0.0,
    nu: float = 1e-2,
    steps: int = STEPS,
    delta: float = DELTA,
) -> pd.DataFrame:
    """One Fig. 6 panel's upper bounds against epsilon_B (x), with epsilon_B itself. The
    panel's tau values and TNB parameters are not stated in the paper (our choice)."""
    rows = []
    for eb in _check_budgets(epsilon_bases):
        pt = fig6_point(eb, float(tau), float(eta), float(nu), int(steps), float(delta))
        common = {"x": eb, "epsilon_B": eb, "tau": tau, "eta": eta, "nu": nu, **pt}
        rows += [{**common, "y": pt[k], "series": name} for k, name in FIG6_SERIES.items()]
        rows.append({**common, "y": eb, "series": "epsilon_B (base algorithm)"})
    return pd.DataFrame(rows)


def reduced_game_score_file(
    epsilon_B: float,
    n_games: int,
    tau: float = 1.0,
    eta: float = 0.0,
    nu: float = 1e-2,
    steps: int = STEPS,
    delta: float = DELTA,
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
    from dpaudit.mechanisms import selection_game

    pt = fig6_point(float(epsilon_B), float(tau), float(eta), float(nu), int(steps), float(delta))
    xi = sel.TruncatedNegativeBinomial(float(eta), float(nu))
    sf = selection_game.score_file(
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
