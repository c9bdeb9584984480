"""dpaudit's estimators against the peer libraries, on the same scores, side by side in one run.

Peers (benchmark-only dependencies, never imported by the library or the tests; ``pip install
-e '.[bench]'`` or ``pip install jax-privacy xbern-confidence-intervals``):

* jax_privacy's ``auditing`` module (``CanaryScoreAuditor``): the one-run bound of Steinke,
  Nasr, Jagielski 2023 (arXiv:2305.08846), the one-run f-DP bound of Mahloujifar, Melis,
  Chaudhuri 2025 (arXiv:2410.22235; dpaudit's ``fdp_abstention``), the multi-run
  Clopper-Pearson bound and the GDP fit of Nasr et al. 2023 (arXiv:2302.07956);
* ``xbern-confidence-intervals`` (Pillutla et al. 2023, arXiv:2305.18447): the XBern Wilson
  and Bernstein intervals.

A peer that is not installed is skipped (its columns read "-"). Each time is the median of 5-9
calls, the peer's and dpaudit's alternating (after one untimed call of each), from scores in
memory to the result (for jax_privacy including the construction of
the ``CanaryScoreAuditor``, which sorts the scores). Inputs: Gaussian scores, members shifted by 1,
fair-coin membership (seeded). The estimators' conventions differ in places (dpaudit's one-run
grid is two-sided and smaller; its multi-run bound is two-sided with a stratified split; its GDP
fit is the uncorrected maximum over thresholds, the peer's is Bonferroni-corrected), so the
results are printed next to each other but need not agree. Usage::

    OMP_NUM_THREADS=1 python benchmarks/bench_peers.py [--quick] [--only one-run]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dpaudit.estimators import (  # noqa: E402
    fdp_abstention,
    fdp_one_run_audit,
    multi_run,
    one_run,
    xbern,
)

try:
    from jax_privacy import auditing as jaxa
except ImportError:  # benchmark-only dependency
    jaxa = None
try:
    import xbern_confidence_intervals as xb
except ImportError:  # benchmark-only dependency
    xb = None

DELTA = 1e-5
CONFIDENCE = 0.95


def best_time(func: Callable[[], object], repeat: int) -> tuple[float, object]:
    """(median wall time in seconds over ``repeat`` calls, the last result)."""
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = func()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), out


def paired_times(
    peer: Callable[[], object] | None, ours: Callable[[], object], repeat: int
) -> tuple[tuple[float, object] | None, tuple[float, object]]:
    """Median wall times of ``peer`` and ``ours``, called alternately (so that a change of the
    machine's load falls on both), after one untimed call of each; with their last results."""
    if peer is None:
        ours()
        return None, best_time(ours, repeat)
    peer(), ours()
    t_peer, t_ours, v_peer, v_ours = [], [], None, None
    for _ in range(repeat):
        t0 = time.perf_counter()
        v_peer = peer()
        t1 = time.perf_counter()
        v_ours = ours()
        t2 = time.perf_counter()
        t_peer.append(t1 - t0)
        t_ours.append(t2 - t1)
    return (float(np.median(t_peer)), v_peer), (float(np.median(t_ours)), v_ours)


def scores(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    member = rng.integers(0, 2, n).astype(np.int8)
    return rng.normal(size=n) + member, member


def auditor(s: np.ndarray, member: np.ndarray):
    return jaxa.CanaryScoreAuditor(s[member == 1], s[member == 0])


def row(name: str, size: str, peer: tuple[float, object] | None, ours: tuple[float, object]):
    t_ours, v_ours = ours
    if peer is None:
        print(f"| {name} | {size} | - | {t_ours * 1e3:.1f} | - | {_fmt(v_ours)} | - |", flush=True)
        return
    t_peer, v_peer = peer
    print(
        f"| {name} | {size} | {t_peer * 1e3:.1f} | {t_ours * 1e3:.1f} | "
        f"{t_peer / t_ours:.1f}x | {_fmt(v_ours)} | {_fmt(v_peer)} |",
        flush=True,
    )


def _fmt(v: object) -> str:
    if isinstance(v, tuple):
        return "(" + ", ".join(f"{float(x):.4f}" for x in v) + ")"
    return f"{float(v):.4f}"


def one_run_pair(s: np.ndarray, mem: np.ndarray) -> tuple[Callable, Callable]:
    """(dpaudit, jax_privacy): the one-run bound, Bonferroni over each one's thresholds."""

    def ours():
        rows = one_run.audit_scores(s, mem, DELTA, CONFIDENCE, selections=("bonferroni",))
        return rows[0].epsilon

    def peer():
        return auditor(s, mem).epsilon_one_run(1 - CONFIDENCE, DELTA)

    return ours, peer


def fdp_abstention_threshold_pair(s: np.ndarray, mem: np.ndarray) -> tuple[Callable, Callable]:
    """(dpaudit, jax_privacy): the one-run f-DP bound of Mahloujifar et al. (GDP null) at one
    explicit threshold, the top 10% of scores guessed IN (the same counts: equal results)."""
    threshold = float(np.quantile(s, 0.9))
    r = int(np.sum(s >= threshold))

    def ours():
        rows = fdp_one_run_audit.audit_scores(
            s,
            mem,
            delta=DELTA,
            confidence=CONFIDENCE,
            guess="top_in",
            selections=("fixed",),
            r_fixed=r,
            bound=fdp_abstention.epsilon_lower_bound,
        )
        return rows[0]["epsilon"]

    def peer():
        return auditor(s, mem).epsilon_one_run_fdp(
            1 - CONFIDENCE, DELTA, threshold_strategy=jaxa.Explicit(threshold)
        )

    return ours, peer


def fdp_abstention_pair(s: np.ndarray, mem: np.ndarray) -> tuple[Callable, Callable]:
    """(dpaudit, jax_privacy): the one-run f-DP bound of Mahloujifar et al. (GDP null),
    Bonferroni over each one's thresholds (dpaudit: its 1-2-5 grid of guess counts, two-sided
    guesses; jax_privacy: every threshold, IN guesses only), so the results differ."""

    def ours():
        rows = fdp_one_run_audit.audit_scores(
            s,
            mem,
            delta=DELTA,
            confidence=CONFIDENCE,
            selections=("bonferroni",),
            bound=fdp_abstention.epsilon_lower_bound,
        )
        return rows[0]["epsilon"]

    def peer():
        return auditor(s, mem).epsilon_one_run_fdp(1 - CONFIDENCE, DELTA)

    return ours, peer


def multi_run_cp_pair(s: np.ndarray, mem: np.ndarray) -> tuple[Callable, Callable]:
    """(dpaudit, jax_privacy): the Clopper-Pearson bound, threshold chosen on half the runs."""

    def ours():
        return multi_run.threshold_audit(s, mem, DELTA, CONFIDENCE, "heldout").epsilon

    def peer():
        return auditor(s, mem).epsilon_clopper_pearson(
            1 - CONFIDENCE, DELTA, one_sided=False, threshold_strategy=jaxa.Split(0.5, 0)
        )

    return ours, peer


def gdp_pair(s: np.ndarray, mem: np.ndarray) -> tuple[Callable, Callable]:
    """(dpaudit, jax_privacy): the GDP fit (Nasr et al. 2023) as epsilon at DELTA."""

    def ours():
        return multi_run.threshold_audit(
            s, mem, DELTA, CONFIDENCE, "same_data", estimate="gdp"
        ).epsilon

    def peer():
        return auditor(s, mem).epsilon_from_gdp(1 - CONFIDENCE, DELTA)

    return ours, peer


def bench_scores(name: str, size_name: str, pair, sizes: list[int], seed: int) -> None:
    """One row per size: dpaudit and jax_privacy on the same Gaussian scores."""
    for n in sizes:
        ours, peer = pair(*scores(n, seed))
        rep = 9 if n <= 10**5 else 5
        row(name, f"{size_name} = {n:,}", *paired_times(peer if jaxa else None, ours, rep))


def bench_xbern(cases: list[tuple[int, int]]) -> None:
    rng = np.random.default_rng(4)
    for n, K in cases:
        q = rng.beta(1.2, 2.8, size=(n, 1))
        x = (rng.random((n, K)) < q).astype(np.int8)
        for interval in ("wilson", "bernstein"):

            def ours(x=x, interval=interval):
                # one summary (the moments up to order 4), then the three orders' bounds
                s = xbern.XBernSummary.from_binary(x, order=4)
                return tuple(
                    float(v) for o in (1, 2, 4) for v in xbern.bounds(s, 0.05, interval, o)
                )

            def peer(x=x, interval=interval):
                fn = (
                    xb.get_wilson_confidence_intervals
                    if interval == "wilson"
                    else xb.get_bernstein_confidence_intervals
                )
                with contextlib.redirect_stdout(io.StringIO()):  # it prints missing roots
                    lo, hi = fn(x, 0.05)
                return tuple(
                    v
                    for o in ("1st", "2nd", "4th")
                    for v in (
                        lo[f"{o}-Order {interval.capitalize()}"],
                        hi[f"{o}-Order {interval.capitalize()}"],
                    )
                )

            name = f"XBern {interval}, orders 1+2+4"
            row(name, f"n = {n:,}, K = {K}", *paired_times(peer if xb else None, ours, 9))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="only the two smaller sizes")
    ap.add_argument("--only", default="", help="only the rows whose name contains this")
    args = ap.parse_args()
    small = [10**3, 10**4] if args.quick else [10**3, 10**4, 10**5]
    large = [10**4, 10**5] if args.quick else [10**4, 10**5, 10**6]
    print(
        f"peers: jax_privacy {'yes' if jaxa else 'not installed'}, "
        f"xbern-confidence-intervals {'yes' if xb else 'not installed'}"
    )
    print()
    print(
        "| estimator | size | peer (ms) | dpaudit (ms) | dpaudit speed vs peer "
        "| dpaudit result | peer result |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, size, pair, sizes, seed in (
        ("one-run, Bonferroni", "m", one_run_pair, small, 1),
        ("one-run f-DP (Mahloujifar et al.), one threshold", "m", fdp_abstention_threshold_pair,
         small, 1),
        ("one-run f-DP (Mahloujifar et al.), Bonferroni", "m", fdp_abstention_pair, small, 1),
        ("multi-run CP, held-out threshold", "n", multi_run_cp_pair, large, 2),
        ("GDP fit", "n", gdp_pair, large, 3),
    ):
        if args.only in name:
            bench_scores(name, size, pair, sizes, seed)
    if args.only in "XBern":
        bench_xbern([(1024, 32), (4096, 64), (65536, 256)])


if __name__ == "__main__":
    main()
