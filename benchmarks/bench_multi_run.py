"""Speed of the multi-run Clopper-Pearson audit: pruned threshold search vs the full sweep.

Both compute Algorithm 5 of Annamalai et al. (every threshold, Eq. 1 with Clopper-Pearson
bounds, maximum); the pruned search skips thresholds whose Eq. 1 value at a cheap lower bound
of the Clopper-Pearson bounds cannot beat the best exact value. Gaussian scores N(mu, 1) vs
N(0, 1), runs per side as given. Usage::

    OMP_NUM_THREADS=1 python benchmarks/bench_multi_run.py
"""

from __future__ import annotations

import time

import numpy as np

from dpaudit.estimators.multi_run import bound as mr
from dpaudit.estimators.multi_run import definition

DELTA = 1e-5


def _time(func, repeat: int = 3) -> tuple[float, float]:
    best, val = np.inf, 0.0
    for _ in range(repeat):
        t0 = time.perf_counter()
        val = func()
        best = min(best, time.perf_counter() - t0)
    return best, val


def main() -> None:
    rng = np.random.default_rng(0)
    print("| runs/side | mu | full sweep s | pruned s | speed-up | eps full | eps pruned |")
    print("|---|---|---|---|---|---|---|")
    for n in (10**4, 10**5, 10**6):
        for mu in (0.5, 3.0):
            s = np.concatenate([rng.normal(mu, 1, n), rng.normal(0, 1, n)])
            m = np.concatenate([np.ones(n, np.int8), np.zeros(n, np.int8)])
            rep = 3 if n < 10**6 else 1

            def full(s=s, m=m):
                return float(
                    definition.sweep_epsilons(
                        definition.sweep(s, m), DELTA, definition.rate_level(0.95)
                    )[0].max()
                )

            def pruned(s=s, m=m):
                return mr.threshold_audit(s, m, DELTA, 0.95, "same_data").epsilon

            tf, ef = _time(full, rep)
            tp, ep = _time(pruned, rep)
            print(f"| {n:,} | {mu} | {tf:.3f} | {tp:.3f} | {tf / tp:.1f}x | {ef:.4f} | {ep:.4f} |",
                  flush=True)


if __name__ == "__main__":
    main()
