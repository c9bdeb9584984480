"""Time of the attack metrics (with their intervals: DeLong, exact order-statistic Clopper-Pearson,
DKW, and the 1000-resample two-stage bootstrap of the raw-count epsilon) and of the
multi_split selection on one-run files, side by side with the one-run bound (Bonferroni) on the
same file, at m = 10^3, 10^4 and 10^5 canaries. Target (issue 14): at most 1 s at m = 10^5.

CPU time of this process (``time.process_time``), the best of ``--repeats`` runs, the estimators
interleaved, so that a loaded machine inflates them alike; single-threaded (set
OMP_NUM_THREADS=1 so that no BLAS call spreads over cores). Files: the idealised Gaussian one-run
game (``gaussian_score_file``) with mu = 1 (sigma = 2), and at m = 10^5 also null scores
(sigma = 10^6, mu ~ 0), the slowest case for the epsilon bootstrap (more blocks of thresholds
are expanded when no threshold stands out).

    OMP_NUM_THREADS=1 python benchmarks/bench_attack_metrics.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import time

from dpaudit.audit import run_estimator
from dpaudit.mechanisms.one_run_ideal import gaussian_score_file

DELTA = 1e-5
BASE = {"method": "one_run", "selections": ["bonferroni"]}
CASES = [
    # (m, sigma, label, estimator spec)
    (1_000, 2.0, "attack_metrics (intervals, 1000 resamples)", {"method": "attack_metrics"}),
    (10_000, 2.0, "attack_metrics (intervals, 1000 resamples)", {"method": "attack_metrics"}),
    (100_000, 2.0, "attack_metrics (intervals, 1000 resamples)", {"method": "attack_metrics"}),
    (
        100_000,
        1e6,
        "attack_metrics (intervals, 1000 resamples), null scores",
        {"method": "attack_metrics"},
    ),
    (100_000, 2.0, "attack_metrics, no intervals", {"method": "attack_metrics", "resamples": 0}),
    (
        100_000,
        2.0,
        "one_run, multi_split (10 splits)",
        {"method": "one_run", "selections": ["multi_split"], "splits": 10},
    ),
]


def _cpu(sf, spec: dict) -> tuple[float, float]:
    t0 = time.process_time()
    table = run_estimator(sf, "x", spec)
    return time.process_time() - t0, float(table["epsilon"].iloc[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print("| m | scores | estimator | epsilon column | CPU s | one_run Bonferroni CPU s | ratio |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for m, sigma, label, spec in CASES:
        sf = gaussian_score_file(m, sigma, DELTA, seed=0)
        best, base = float("inf"), float("inf")
        for _ in range(args.repeats):
            t, eps = _cpu(sf, spec)
            best = min(best, t)
            base = min(base, _cpu(sf, BASE)[0])
        scores = "null" if sigma > 100 else f"mu = {2 / sigma:g}"
        print(
            f"| {m:,} | {scores} | {label} | {eps:.3f} | {best:.3f} | {base:.3f} | "
            f"{best / base:.1f}x |",
            flush=True,
        )


if __name__ == "__main__":
    main()
