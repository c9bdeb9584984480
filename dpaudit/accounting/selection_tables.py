"""Reproductions of the selection paper's printed numbers (Xiang, Wang, Wang 2024).

The paper values below are copied from the paper (Table 3's epsilon_U column, Table 4, Example 1
and Appendix A.1) so that our numbers can be put next to them; they are never used to compute
anything. See docs/mechanisms/selection.md for the comparison and its explanation.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from dpaudit.accounting import selection as sel

DELTA = 1e-5
STEPS = 500  # N of Fig. 6 and Table 4

#: Table 3 / Section 6: epsilon_U (Papernot-Steinke, TNB(0, 1e-2), tau = 1) per epsilon_B.
PAPER_TABLE3_EPSILON_U = {1.0: 1.86, 2.0: 3.59, 4.0: 6.79}

#: Table 4 columns (L, s) of the binary xi (Eq. 21).
TABLE4_COLUMNS = ((10, 1e-1), (10, 1e-2), (100, 1e-2), (100, 1e-3), (1000, 1e-3))

#: Table 4 cells: (epsilon_B, tau) -> ((G, O) per column), delta = 1e-5, N = 500.
PAPER_TABLE4 = {
    (1.0, 1.0): ((1.13, 1.12), (1.29, 1.28), (2.58, 2.57), (3.34, 3.33), (5.42, 5.40)),
    (1.0, 0.5): ((1.13, 1.12), (1.30, 1.28), (2.59, 2.57), (3.36, 3.33), (5.43, 5.40)),
    (1.0, 0.1): ((1.13, 1.08), (1.30, 1.24), (2.59, 2.49), (3.36, 3.23), (5.44, 5.25)),
    (2.0, 1.0): ((2.23, 2.21), (2.39, 2.38), (4.28, 4.25), (5.56, 5.53), (8.27, 8.23)),
    (2.0, 0.5): ((2.25, 2.21), (2.41, 2.38), (4.30, 4.25), (5.59, 5.53), (8.31, 8.23)),
    (2.0, 0.1): ((2.40, 2.19), (2.56, 2.36), (4.48, 4.23), (5.83, 5.50), (8.57, 8.20)),
    (4.0, 1.0): ((4.51, 4.43), (4.52, 4.44), (5.93, 5.90), (7.85, 7.80), (10.22, 10.20)),
    (4.0, 0.5): ((4.51, 4.35), (4.52, 4.37), (5.93, 5.88), (7.85, 7.76), (10.22, 10.18)),
    (4.0, 0.1): ((4.96, 4.15), (4.98, 4.16), (6.15, 5.79), (8.05, 7.63), (10.27, 10.12)),
}

#: Example 1 and A.1: tuned (2.96, 0) and (2.92, 1e-5); Papernot-Steinke (3.11, 1e-5).
PAPER_EXAMPLE1 = {"epsilon_pure": 2.96, "epsilon_delta": 2.92, "papernot_steinke": 3.11}


def table3_epsilon_u(epsilon_bases=(1.0, 2.0, 4.0)):
    """epsilon_U-P for the audit setting (TNB(0, 1e-2), tau = 1, delta = 1e-5) next to the
    paper's Table 3, plus Algorithm 3's epsilon_U-O and the exact epsilon (not in the paper)."""
    import pandas as pd

    xi = sel.TruncatedNegativeBinomial(0.0, 1e-2)
    rows = []
    for eb in epsilon_bases:
        mu = sel.gaussian_mu_rdp(eb, DELTA)
        ps = sel.papernot_steinke_epsilon(xi, mu, DELTA)
        rows.append(
            {
                "epsilon_B": eb,
                "mu": mu,
                "paper_epsilon_U": PAPER_TABLE3_EPSILON_U.get(eb, math.nan),
                "epsilon_U_P": ps,
                "rel_diff": ps / PAPER_TABLE3_EPSILON_U.get(eb, math.nan) - 1,
                "epsilon_U_O": sel.reduced_game_epsilon_rdp(xi, mu, DELTA),
                "epsilon_exact": sel.reduced_game_epsilon_exact(xi, mu, DELTA),
            }
        )
    return pd.DataFrame(rows)


def table4_cell(
    epsilon_base: float,
    tau: float,
    big_l: int,
    s: float,
    mus: dict[str, float] | None = None,
    truncated_range: tuple[float, float] = (-6.0, 6.0),
) -> dict[str, float]:
    """One Table 4 cell: epsilon_U-G and epsilon_U-O converged, and with the x-integral
    truncated to ``truncated_range`` (our explanation of the paper's lower values)."""
    if mus is None:
        mus = {v: sel.base_mu(epsilon_base, DELTA, tau, STEPS, v)[0] for v in ("G", "O")}
    xi = sel.BinaryRuns(big_l, s)
    out: dict[str, float] = {"epsilon_B": epsilon_base, "tau": tau, "L": big_l, "s": s}
    paper = dict(zip(TABLE4_COLUMNS, PAPER_TABLE4.get((epsilon_base, tau), ()), strict=False))
    for j, v in enumerate(("G", "O")):
        out[f"mu_{v}"] = mus[v]
        out[f"paper_{v}"] = paper[(big_l, s)][j] if (big_l, s) in paper else math.nan
        out[f"ours_{v}"] = sel.reduced_game_epsilon_rdp(xi, mus[v], DELTA)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out[f"truncated_{v}"] = sel.reduced_game_epsilon_rdp(
                xi, mus[v], DELTA, x_range=truncated_range
            )
        out[f"diff_{v}"] = out[f"ours_{v}"] - out[f"paper_{v}"]
    out["exact_O"] = sel.reduced_game_epsilon_exact(xi, mus["O"], DELTA)
    return out


def table4(epsilon_bases=(1.0, 2.0, 4.0), taus=(1.0, 0.5, 0.1), columns=TABLE4_COLUMNS):
    """All Table 4 cells (about 45 x 5 Algorithm 3 evaluations: minutes of CPU)."""
    import pandas as pd

    rows = []
    for eb in epsilon_bases:
        for tau in taus:
            mus = {v: sel.base_mu(eb, DELTA, tau, STEPS, v)[0] for v in ("G", "O")}
            for big_l, s in columns:
                rows.append(table4_cell(eb, tau, big_l, s, mus))
    return pd.DataFrame(rows)


def example1_table():
    """Example 1 / A.1: ours next to the paper's."""
    import pandas as pd

    ours = sel.example1(DELTA)
    return pd.DataFrame(
        [
            {"quantity": k, "paper": v, "ours": ours[k], "diff": ours[k] - v}
            for k, v in PAPER_EXAMPLE1.items()
        ]
        + [
            {
                "quantity": "papernot_steinke_limit",
                "paper": np.nan,
                "ours": ours["papernot_steinke_limit"],
                "diff": np.nan,
            }
        ]
    )
