"""Time of the attack metrics and of the multi_split selection on a one-run file with m = 10^5
canaries, side by side with the one-run bound (Bonferroni) on the same file.

    python benchmarks/bench_attack_metrics.py
"""

from __future__ import annotations

import time

from dpaudit.audit import run_estimator
from dpaudit.mechanisms.one_run_ideal import gaussian_score_file

M = 100_000


def _time(spec: dict) -> tuple[float, float]:
    t0 = time.perf_counter()
    table = run_estimator(SF, "x", spec)
    return time.perf_counter() - t0, float(table["epsilon"].iloc[-1])


SF = gaussian_score_file(M, 2.0, 1e-5, seed=0)  # mu = 1


def main() -> None:
    base, eps = _time({"method": "one_run", "selections": ["bonferroni"]})
    print(f"m = {M:,} canaries (idealised Gaussian, mu = 1)\n")
    print("| estimator | epsilon column | seconds | ratio to one_run Bonferroni |")
    print("| --- | --- | --- | --- |")
    print(f"| one_run, Bonferroni | {eps:.3f} | {base:.2f} | 1.0 |")
    for spec, name in (
        ({"method": "attack_metrics", "resamples": 0}, "attack_metrics, no bootstrap"),
        ({"method": "attack_metrics", "resamples": 200}, "attack_metrics, 200 resamples"),
        ({"method": "attack_metrics", "resamples": 1000}, "attack_metrics, 1000 (default)"),
        (
            {"method": "one_run", "selections": ["multi_split"], "splits": 10},
            "one_run, multi_split (10 splits)",
        ),
    ):
        t, e = _time(spec)
        print(f"| {name} | {e:.3f} | {t:.2f} | {t / base:.1f} |", flush=True)


if __name__ == "__main__":
    main()
