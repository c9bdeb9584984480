"""Gaussian-mechanism LiDP study: Gram (Bartlett) sampling vs direct sampling, and a check of
the paper's Section 4 numbers with it.

    OMP_NUM_THREADS=1 python benchmarks/bench_lidp_gaussian.py

Table 1: seconds to sample n trials of K inserted + K null scores at d = 10^4, both samplers in
one run (the direct sampler on fewer trials, scaled per trial). Table 2: Fig. 3 left of the
paper (eps = 2, delta = 1e-5, beta = 0.05, d = 10^4, K = sqrt(n), threshold tuned on n held-out
trials and the bound computed on n fresh ones, 25 repetitions): LiDP + 2nd-order Wilson should
give about 0.67 at n = 1024 and 0.85 at n = 4096; DP + Wilson (K = 1) 0.67 only at n = 4096.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dpaudit.estimators.lidp import bound as lidp
from dpaudit.mechanisms import lidp_gaussian as lg  # noqa: E402


def timing(d: int = 10**4) -> list[tuple[int, int, int, float, float]]:
    rows = []
    for K, n_gram, n_direct in ((16, 2000, 20), (64, 500, 10), (256, 100, 4)):
        t = time.perf_counter()
        lg.sample_scores(n_gram, K, K, d, 1.0, 0, "gram")
        tg = (time.perf_counter() - t) / n_gram
        t = time.perf_counter()
        lg.sample_scores(n_direct, K, K, d, 1.0, 0, "direct")
        td = (time.perf_counter() - t) / n_direct
        rows.append((K, n_gram, n_direct, tg, td))
    return rows


def fig3_left(reps: int = 25, d: int = 10**4) -> list[tuple[str, int, int, float, float]]:
    sigma = lg.sigma_for_epsilon(2.0, 1e-5)
    rows = []
    for n in (1024, 4096):
        for label, K, order in (("DP + Wilson", 1, 1), ("LiDP + 2nd-order Wilson", int(n**0.5), 2)):
            rng = np.random.default_rng(1000 + n + K)
            si, so = lg.sample_scores(n, K, K, d, sigma, rng)  # tuning trials
            tau, _ = lidp.tune_threshold(si, so, lidp.BoundSpec(1e-5, 0.95, "wilson", order))
            eps = []
            for _ in range(reps):
                si, so = lg.sample_scores(n, K, K, d, sigma, rng)  # fresh trials
                eps.append(
                    lidp.epsilon_lower_bound(
                        si >= tau, so >= tau, lidp.BoundSpec(1e-5, 0.95, "wilson", order)
                    ).epsilon
                )
            rows.append((label, n, K, float(np.mean(eps)), float(np.std(eps) / np.sqrt(reps))))
    return rows


def main() -> None:
    print("### Gaussian mechanism, d = 10^4, m = K: seconds per trial\n")
    print("| K | trials (gram) | trials (direct) | gram | direct | speed-up |")
    print("|---|---|---|---|---|---|")
    for K, ng, nd, tg, td in timing():
        print(f"| {K} | {ng} | {nd} | {tg:.2e} | {td:.2e} | {td / tg:.0f}x |")
    print("\n### Section 4 / Fig. 3 left (eps = 2, d = 10^4, 25 reps, mean +- s.e.)\n")
    print("| method | n | K | eps_hat | s.e. | paper |")
    print("|---|---|---|---|---|---|")
    paper = {
        ("LiDP + 2nd-order Wilson", 1024): "0.67",
        ("LiDP + 2nd-order Wilson", 4096): "0.85",
        ("DP + Wilson", 4096): "0.67",
        ("DP + Wilson", 1024): "< 0.67",
    }
    for label, n, K, m, se in fig3_left():
        print(f"| {label} | {n} | {K} | {m:.3f} | {se:.3f} | {paper.get((label, n), '')} |")


if __name__ == "__main__":
    main()
