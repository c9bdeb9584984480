"""dpaudit's estimators against the peer libraries, on the same scores, side by side in one run.

Peers (benchmark-only dependencies, never imported by the library or the tests; ``pip install
-e '.[bench]'`` or ``pip install jax-privacy xbern-confidence-intervals``):

* jax_privacy's ``auditing`` module (``CanaryScoreAuditor``): the one-run bound of Steinke,
  Nasr, Jagielski 2023 (arXiv:2305.08846), the one-run f-DP bound of Mahloujifar, Melis,
  Chaudhuri 2025 (arXiv:2410.22235; dpaudit's ``fdp_abstention``), the multi-run
  Clopper-Pearson bound and the GDP fit of Nasr et al. 2023 (arXiv:2302.07956);
* ``xbern-confidence-intervals`` (Pillutla et al. 2023, arXiv:2305.18447): the XBern Wilson
  and Bernstein intervals;
* Microsoft's ``privacy-estimates`` (module ``privacy_estimates``; Zanella-Beguelin et al.
  2023, "Bayesian estimation of differential privacy", arXiv:2206.05199): ``compute_eps_lo``
  from attack counts; its Clopper-Pearson method (``beta``) gives dpaudit's
  ``definition.epsilon_from_counts`` at one threshold, and, called at every threshold in a
  Python loop (it has no sweep), dpaudit's ``same_data`` maximum;
* ML Privacy Meter (``privacy-meter`` 1.0.1, module ``privacy_meter``; Murakonda and Shokri
  2020, arXiv:2007.09339; Ye et al. 2022, arXiv:2111.09679): ``MetricResult``'s AUROC
  (``sklearn``'s, as dpaudit's ``attack_metrics``) and the population attack's TPR at a target
  FPR. Its ``metric`` module imports TensorFlow, so the population attack is composed here
  from the two parts that do not (:func:`privacy_meter_population`).

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

from dpaudit.estimators.attack_metrics import metrics as attack_metrics
from dpaudit.estimators.fdp_abstention import bound as fdp_abstention
from dpaudit.estimators.fdp_one_run import audit as fdp_one_run_audit
from dpaudit.estimators.lidp import xbern
from dpaudit.estimators.multi_run import bound as multi_run
from dpaudit.estimators.multi_run import definition
from dpaudit.estimators.one_run import bound as one_run

try:
    from jax_privacy import auditing as jaxa
except ImportError:  # benchmark-only dependency
    jaxa = None
try:
    import xbern_confidence_intervals as xb
except ImportError:  # benchmark-only dependency
    xb = None
try:
    import privacy_estimates as pe
except ImportError:  # benchmark-only dependency
    pe = None
try:  # the parts of privacy_meter that import without TensorFlow
    from privacy_meter import hypothesis_test as pm_test
    from privacy_meter import metric_result as pm_result
except ImportError:  # benchmark-only dependency
    pm_test = pm_result = None

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


def privacy_estimates_eps_lo(
    false_pos: int, n_out: int, false_neg: int, n_in: int, method: str = "beta"
) -> float:
    """privacy-estimates' ``compute_eps_lo`` at significance 1 - CONFIDENCE from the counts of
    one threshold. With ``beta`` it bounds each rate by a one-sided Clopper-Pearson bound at
    (1 - CONFIDENCE) / 2 (a central two-sided interval at 1 - CONFIDENCE), as dpaudit's
    ``rate_level`` does."""
    counts = pe.AttackResults(
        FN=int(false_neg), FP=int(false_pos), TN=int(n_out - false_pos), TP=int(n_in - false_neg)
    )
    return float(pe.compute_eps_lo(counts, DELTA, 1 - CONFIDENCE, method))


def privacy_meter_population(ins: np.ndarray, outs: np.ndarray, fprs: np.ndarray):
    """privacy_meter's population attack on scores in memory, as
    ``PopulationMetric.run_metric`` composes it (that class's module imports TensorFlow): the
    thresholds are ``linear_itp_threshold_func``'s quantiles of the reference signals at the
    target FPRs, "member iff signal < threshold", the result a ``CombinedMetricResult``. The
    reference signals are the OUT scores themselves, and the signals are the negated scores
    (privacy_meter's signals are losses: lower means member). ``linear_itp_threshold_func``
    replaces the first and the last FPR by thresholds below (above) every signal, so the FPRs
    wanted go between a leading 0 and a trailing 1."""
    fprs = np.asarray(fprs, dtype=np.float64)
    thresholds = pm_test.linear_itp_threshold_func(-outs, fprs).reshape(-1, 1)
    signals = -np.concatenate([ins, outs])
    labels = np.concatenate([np.ones(ins.size), np.zeros(outs.size)])
    predicted = np.less(signals[None, :], thresholds)
    return pm_result.CombinedMetricResult("population_metric", predicted, labels)


def metrics_pair(s: np.ndarray, mem: np.ndarray) -> tuple[Callable, Callable]:
    """(dpaudit, privacy_meter): AUROC from the scores, ``attack_metrics`` without intervals
    (it also computes the TPR at two FPRs, the balanced accuracy and the raw-count epsilon)
    against ``MetricResult`` (sklearn's ROC curve, AUROC, and the accuracy and confusion matrix
    at one threshold, here the median score). Same definition: equal results."""
    labels = (s > np.median(s)).astype(np.int8)

    def ours():
        est = attack_metrics.attack_metrics(s, mem, delta=DELTA, resamples=0).estimate
        return est["auroc"]

    def peer():
        return pm_result.MetricResult("auroc", labels, mem, predictions_proba=s).roc_auc

    return ours, peer


def population_tpr_pair(s: np.ndarray, mem: np.ndarray) -> tuple[Callable, Callable]:
    """(dpaudit, privacy_meter): TPR at FPR 0.001 and 0.01. dpaudit: the best threshold with at
    most floor(a n_out) false positives; privacy_meter's population attack with the OUT scores
    as reference: the interpolated a-quantile of the OUT scores, below which lie
    floor(a (n_out - 1)) + 1 of them (when a (n_out - 1) is not an integer), usually one more
    than a n_out allows, so its FPR slightly exceeds a and its TPR can be larger."""
    ins, outs = s[mem == 1], s[mem == 0]
    grid = np.array([0.0, 0.001, 0.01, 1.0])

    def ours():  # the attack_metrics columns alone (attack_metrics.tpr_at_fpr; same values)
        est = attack_metrics.tpr_at_fpr(s, mem, (0.001, 0.01))
        return est["tpr_at_fpr_0.001"], est["tpr_at_fpr_0.01"]

    def peer():
        res = privacy_meter_population(ins, outs, grid)
        tpr = res.tp / ins.size
        return float(tpr[1]), float(tpr[2])

    return ours, peer


def cp_counts_pair(s: np.ndarray, mem: np.ndarray) -> tuple[Callable, Callable]:
    """(dpaudit, privacy-estimates): the Clopper-Pearson bound (Eq. 1) from the counts at one
    threshold (the median score), from the counts to the bound. Same bound: equal results."""
    t = np.median(s)
    fp, n_out = int(np.sum(s[mem == 0] > t)), int(np.sum(mem == 0))
    fn, n_in = int(np.sum(s[mem == 1] <= t)), int(np.sum(mem == 1))

    def ours():
        return definition.epsilon_from_counts(fp, n_out, fn, n_in, DELTA, CONFIDENCE)[0]

    def peer():
        return privacy_estimates_eps_lo(fp, n_out, fn, n_in)

    return ours, peer


def cp_sweep_pair(s: np.ndarray, mem: np.ndarray) -> tuple[Callable, Callable]:
    """(dpaudit, privacy-estimates): the largest Clopper-Pearson bound over every threshold on
    the same runs (dpaudit's ``same_data``, uncorrected, ``valid`` False). privacy-estimates
    has no sweep: ``compute_eps_lo`` in a Python loop over dpaudit's thresholds' counts."""

    def ours():
        return multi_run.threshold_audit(s, mem, DELTA, CONFIDENCE, "same_data").epsilon

    def peer():
        sw = definition.sweep(s, mem)
        return max(
            privacy_estimates_eps_lo(fp, sw.n_nonmembers, fn, sw.n_members)
            for fp, fn in zip(sw.false_pos.tolist(), sw.false_neg.tolist(), strict=True)
        )

    return ours, peer


def bench_scores(
    name: str, size_name: str, pair, sizes: list[int], seed: int, peer_lib=True, rep=None
) -> None:
    """One row per size: dpaudit and the peer (jax_privacy unless ``peer_lib`` says another
    peer's module) on the same Gaussian scores."""
    lib = jaxa if peer_lib is True else peer_lib
    for n in sizes:
        ours, peer = pair(*scores(n, seed))
        r = rep or (9 if n <= 10**5 else 5)
        row(name, f"{size_name} = {n:,}", *paired_times(peer if lib else None, ours, r))


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
        f"xbern-confidence-intervals {'yes' if xb else 'not installed'}, "
        f"privacy-estimates {'yes' if pe else 'not installed'}, "
        f"privacy-meter {'yes' if pm_result else 'not installed'}"
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
    tiny = [10**3, 10**4]
    pe_counts = "privacy-estimates: CP bound from counts, one threshold"
    pe_sweep = "privacy-estimates: CP bound, max over every threshold (same_data)"
    pm_tpr = "privacy_meter: TPR at FPR 0.001, 0.01 (population attack)"
    for name, size, pair, sizes, seed, lib, rep in (
        (pe_counts, "n", cp_counts_pair, [10**4], 4, pe, 9),
        (pe_sweep, "n", cp_sweep_pair, tiny, 4, pe, 3),
        ("privacy_meter: AUROC", "m", metrics_pair, large, 5, pm_result, None),
        (pm_tpr, "m", population_tpr_pair, large, 5, pm_result, None),
    ):
        if args.only in name:
            bench_scores(name, size, pair, sizes, seed, lib, rep)
    if args.only in "XBern":
        bench_xbern([(1024, 32), (4096, 64), (65536, 256)])


if __name__ == "__main__":
    main()
