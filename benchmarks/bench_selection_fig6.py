"""Cost of one Fig. 6 point at tau < 1 (dpaudit/accounting/selection.py): Papernot-Steinke on the
base DP-SGD's RDP curve evaluated by Opacus at every order the optimiser asks for (continuous,
fractional orders) against the tabulated step function of ``opacus_rdp`` (integer orders, value
at the next tabulated order: an upper bound), side by side in one run, with the resulting
epsilon_U-P of each.

    PYTHONPATH=. OMP_NUM_THREADS=1 python benchmarks/bench_selection_fig6.py
"""

from __future__ import annotations

import time

import numpy as np
from opacus.accountants.analysis.rdp import compute_rdp

from dpaudit.accounting import run_counts as runs
from dpaudit.accounting import selection as sel
from dpaudit.accounting.dpsgd import noise_multiplier
from dpaudit.accounting.selection import opacus_rdp


def continuous(tau: float, sigma: float, steps: int):
    def rdp(a):
        a = np.atleast_1d(np.asarray(a, dtype=float))
        g = np.asarray(compute_rdp(q=tau, noise_multiplier=sigma, steps=steps, orders=list(a)))
        return np.where(np.isfinite(g) & (g >= 0), g, np.inf).reshape(a.shape)

    return rdp


def main() -> None:
    xi = runs.TruncatedNegativeBinomial(0.0, 1e-2)
    print("| epsilon_B | tau | base RDP | epsilon_U-P | time (s) | ratio |")
    print("|---|---|---|---|---|---|")
    for eb, tau in ((1.0, 0.5), (4.0, 0.1)):
        t0 = time.perf_counter()
        sigma = noise_multiplier(eb, 1e-5, tau, 500, "rdp", 1e-4)
        t_cal = time.perf_counter() - t0
        times = {}
        for name, make in (("continuous (Opacus per order)", continuous),
                           ("tabulated step (ours)", opacus_rdp)):
            t0 = time.perf_counter()
            rdp = sel.papernot_steinke_rdp(xi, make(tau, sigma, 500), max_order_prime=256.0)
            eps = sel.rdp_to_dp(sel.DEFAULT_ORDERS, rdp(sel.DEFAULT_ORDERS), 1e-5)[0]
            times[name] = time.perf_counter() - t0
            ratio = times[name] / times["continuous (Opacus per order)"]
            print(f"| {eb:g} | {tau:g} | {name} | {eps:.4f} | {times[name]:.3f} | {ratio:.3f} |")
        print(f"| {eb:g} | {tau:g} | (noise calibration, once per point) | | {t_cal:.2f} | |")


if __name__ == "__main__":
    main()
