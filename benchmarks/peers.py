"""dpaudit's estimators beside the peer libraries, on the same score files.

Writes the tables of docs/peers.md (the text around them is in that page): for a one-run file
(idealised Gaussian, mu = 1, m canaries) and a multi-run file (Batched Gaussian Mechanism with
T = 1, i.e. a Gaussian mechanism), each quantity that dpaudit and a peer both compute, with the
definitions that coincide and those that differ said in docs/peers.md. The peers are
jax_privacy's ``auditing`` module, Microsoft's ``privacy-estimates`` and ML Privacy Meter
(``privacy-meter``); each is imported only if installed (``pip install -e '.[bench]'``), and
without it the dpaudit column is printed alone.

    python benchmarks/peers.py --m 10000 --runs 5000 > peers_tables.md
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from bench_peers import (  # benchmarks/ is the script's directory, hence on sys.path
    pe,
    pm_result,
    privacy_estimates_eps_lo,
    privacy_meter_population,
)

from dpaudit.audit import run_estimator
from dpaudit.estimators.multi_run import bound as multi_run
from dpaudit.estimators.multi_run import definition
from dpaudit.mechanisms.batched_gaussian import bgm_score_file
from dpaudit.mechanisms.one_run_ideal import gaussian_score_file
from dpaudit.scores import ScoreFile

CONF = 0.95
DELTA = 1e-5


def _jax():
    try:
        from jax_privacy import auditing
    except ImportError:
        return None
    return auditing


#: A jax_privacy cell for a quantity it does not offer.
NONE = "(not offered)"


def _cell(value, jx) -> str:
    if jx is None:
        return "not installed"
    return value if isinstance(value, str) else f"{value:.4f}"


def _rows(sf: ScoreFile, spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    table = run_estimator(sf, "x", spec)
    key = "selection" if "selection" in table.columns else "method"
    return {str(r[key]): r for r in table.to_dict("records")}


def _timed(fn):
    t0 = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - t0


def one_run_table(m: int, seed: int) -> list[str]:
    sf = gaussian_score_file(m, 2.0, DELTA, seed=seed)  # mu = 2 / sigma = 1
    score, member = sf.score[0], sf.membership[0]
    ins, outs = score[member == 1], score[member == 0]
    jx = _jax()
    aud = jx.CanaryScoreAuditor(ins, outs) if jx else None
    am = _rows(sf, {"method": "attack_metrics", "resamples": 200})["attack_metrics"]
    one = _rows(sf, {"method": "one_run", "selections": ["bonferroni", "sample_split"]})
    fdp = _rows(sf, {"method": "fdp_one_run", "selections": ["bonferroni"]})
    mmc = _rows(sf, {"method": "fdp_abstention", "selections": ["bonferroni"]})
    # one explicit threshold (the top 10% of scores guessed IN, abstain on the rest): the same
    # counts for both libraries
    threshold = float(np.quantile(score, 0.9))
    mmc_fixed = _rows(
        sf,
        {
            "method": "fdp_abstention",
            "guess": "top_in",
            "selections": ["fixed"],
            "r": int(np.sum(score >= threshold)),
        },
    )
    lines = [
        f"### One run: idealised Gaussian, mu = 1 (true epsilon {sf.claimed_epsilon:.3f} at "
        f"delta = 1e-5), m = {m:,}, seed {seed}",
        "",
        "| quantity | dpaudit | jax_privacy | same definition? |",
        "| --- | --- | --- | --- |",
    ]

    def row(name: str, ours: float, theirs, same: str) -> None:
        lines.append(f"| {name} | {ours:.4f} | {_cell(theirs, jx)} | {same} |")

    hull = "no: jax's is the area under the ROC's convex hull (randomised tests), >= ours"
    row("AUROC", am["auroc"], aud.attack_auroc() if aud else None, hull)
    for a in (0.001, 0.01):
        row(
            f"TPR at FPR {a:g}",
            am[f"tpr_at_fpr_{a:g}"],
            float(aud.tpr_at_given_fpr(a)) if aud else None,
            "no: jax interpolates between two thresholds (a randomised test)",
        )
    row(
        "balanced accuracy (best threshold)",
        am["balanced_accuracy"],
        float(aud.max_accuracy(prevalence=0.5)) if aud else None,
        "yes (max accuracy at prevalence 1/2)",
    )
    row(
        "raw-count epsilon (estimate, min_count 10)",
        am["epsilon"],
        float(aud.epsilon_raw_counts(min_count=10, delta=DELTA, one_sided=False)) if aud else None,
        "almost: jax adds the interpolated point at exactly min_count false positives",
    )

    def jax_bound(method: str, strategy) -> tuple[float | None, float | None]:
        if aud is None:
            return None, None
        return _timed(lambda: getattr(aud, method)(1 - CONF, DELTA, threshold_strategy=strategy))

    theirs_one = jax_bound("epsilon_one_run", jx.Bonferroni() if jx else None)
    row(
        "one-run bound, Bonferroni",
        one["bonferroni"]["epsilon"],
        theirs_one[0],
        "no: jax guesses IN only (k- = 0) over every threshold; dpaudit over a (k+, k-) grid",
    )
    theirs_split = jax_bound("epsilon_one_run", jx.Split(seed=seed) if jx else None)[0]
    row(
        "one-run bound, one split",
        one["sample_split"]["epsilon"],
        theirs_split,
        "same idea, different random split and grid",
    )
    theirs_fdp = jax_bound("epsilon_one_run_fdp", jx.Bonferroni() if jx else None)
    row(
        "f-DP one-run bound (Mahloujifar et al.), one threshold (top 10% IN)",
        mmc_fixed["fixed"]["epsilon"],
        jax_bound("epsilon_one_run_fdp", jx.Explicit(threshold) if jx else None)[0],
        "yes: the same recursion on the same counts (fdp_abstention, GDP null)",
    )
    row(
        "f-DP one-run bound (Mahloujifar et al.), Bonferroni",
        mmc["bonferroni"]["epsilon"],
        theirs_fdp[0],
        "same test; dpaudit over its 1-2-5 grid of guess counts with k+ = k- (fdp_abstention), "
        "jax over every threshold with IN guesses only",
    )
    row(
        "tight f-DP one-run bound (Xiang et al.), Bonferroni",
        fdp["bonferroni"]["epsilon"],
        "(not offered)",
        "dpaudit only (fdp_one_run: released guesses, order statistics, GDP null)",
    )
    lines.append("")
    if aud:
        lines.append(
            f"jax_privacy seconds: one-run Bonferroni {theirs_one[1]:.2f}, "
            f"f-DP Bonferroni {theirs_fdp[1]:.2f}."
        )
    return lines


def multi_run_table(runs: int, seed: int) -> list[str]:
    sf = bgm_score_file(runs, 1, 1.0, seed=seed)  # T = 1: a Gaussian mechanism, sigma = 1
    score, member = sf.score[:, 0], sf.membership[:, 0]
    ins, outs = score[member == 1], score[member == 0]
    jx = _jax()
    aud = jx.CanaryScoreAuditor(ins, outs) if jx else None
    cp = _rows(sf, {"method": "multi_run_cp", "selections": ["same_data", "heldout"]})
    gdp = _rows(sf, {"method": "gdp_fit", "selections": ["same_data"]})
    am = _rows(sf, {"method": "attack_metrics", "resamples": 200})["attack_metrics"]
    lines = [
        f"### Multi run: Gaussian mechanism (BGM, T = 1, sigma = 1; claimed epsilon "
        f"{sf.claimed_epsilon:.3f} at delta = 1e-5), {runs:,} runs per hypothesis, seed {seed}",
        "",
        "| quantity | dpaudit | jax_privacy | same definition? |",
        "| --- | --- | --- | --- |",
    ]

    def row(name: str, ours: float, theirs, same: str) -> None:
        lines.append(f"| {name} | {ours:.4f} | {_cell(theirs, jx)} | {same} |")

    hull = "no: jax's is the area under the ROC's convex hull (randomised tests), >= ours"
    row("AUROC", am["auroc"], aud.attack_auroc() if aud else None, hull)
    row(
        "Clopper-Pearson bound, best threshold on the same runs",
        cp["same_data"]["epsilon"],
        NONE,
        "dpaudit's same_data is uncorrected (valid False); jax has no uncorrected variant",
    )
    bonf = (
        aud.epsilon_clopper_pearson(
            1 - CONF, DELTA, one_sided=False, threshold_strategy=jx.Bonferroni()
        )
        if aud
        else None
    )
    lines.append(
        f"| Clopper-Pearson bound, Bonferroni over every threshold | {NONE} | "
        f"{_cell(bonf, jx)} | jax only |"
    )
    split = (
        aud.epsilon_clopper_pearson(
            1 - CONF, DELTA, one_sided=False, threshold_strategy=jx.Split(seed=seed)
        )
        if aud
        else None
    )
    row(
        "Clopper-Pearson bound, held-out threshold",
        cp["heldout"]["epsilon"],
        split,
        "yes up to the random split (both: each rate at (1 - confidence) / 2)",
    )
    gdp_theirs = aud.epsilon_from_gdp(1 - CONF, DELTA) if aud else None
    row(
        "GDP fit (estimate)",
        gdp["same_data"]["epsilon"],
        gdp_theirs,
        "no: jax Bonferroni-corrects the rates over all thresholds; dpaudit does not",
    )
    lines.append("")
    return lines


def _peer_cell(value, lib) -> str:
    if lib is None:
        return "not installed"
    return value if isinstance(value, str) else f"{value:.4f}"


def _peer_table(title: str, peer: str, module) -> tuple[list[str], Callable[..., None]]:
    """(the lines of a comparison table with its header, a function appending one row: the
    quantity, dpaudit's value, the peer's (None: peer not installed) and a note)."""
    lines = [
        title,
        "",
        f"| quantity | dpaudit | {peer} | same definition? |",
        "| --- | --- | --- | --- |",
    ]

    def row(name: str, ours, theirs, same_def: str) -> None:
        o = ours if isinstance(ours, str) else f"{ours:.4f}"
        lines.append(f"| {name} | {o} | {_peer_cell(theirs, module)} | {same_def} |")

    return lines, row


def privacy_estimates_table(runs: int, seed: int) -> list[str]:
    """dpaudit beside privacy-estimates' ``compute_eps_lo`` on the multi-run file's counts."""
    sf = bgm_score_file(runs, 1, 1.0, seed=seed)  # the multi-run table's file
    score, member = sf.score[:, 0], sf.membership[:, 0]
    held = multi_run.threshold_audit(score, member, DELTA, CONF, "heldout")
    same = multi_run.threshold_audit(score, member, DELTA, CONF, "same_data")
    counts = (held.false_pos, held.n_nonmembers, held.false_neg, held.n_members)
    lines, row = _peer_table(
        f"### Microsoft's privacy-estimates: counts of the multi-run file above ({runs:,} runs "
        f"per hypothesis, seed {seed}; held-out threshold's evaluation half: "
        f"{held.false_pos} false positives of {held.n_nonmembers}, {held.false_neg} false "
        f"negatives of {held.n_members})",
        "privacy-estimates",
        pe,
    )
    row(
        "Clopper-Pearson bound at the held-out threshold (method `beta`)",
        held.epsilon,
        privacy_estimates_eps_lo(*counts) if pe else None,
        "yes: each rate's one-sided bound at (1 - confidence) / 2, Eq. 1's larger ratio",
    )
    row(
        "largest Clopper-Pearson bound over every threshold, same runs (invalid)",
        same.epsilon,
        _loop_max(score, member) if pe else None,
        "yes (the peer called at each threshold in a loop; it has no sweep)",
    )
    row(
        "Jeffreys interval's lower end (method `jeffreys`)",
        NONE,
        privacy_estimates_eps_lo(*counts, method="jeffreys") if pe else None,
        "peer only: Jeffreys intervals have approximate, not guaranteed, coverage",
    )
    joint, secs = (None, 0.0)
    if pe:
        joint, secs = _timed(lambda: privacy_estimates_eps_lo(*counts, method="joint-beta"))
    row(
        "Bayesian lower end, Jeffreys priors on both rates (method `joint-beta`)",
        NONE,
        joint,
        f"peer only: a 95% credible bound (Zanella-Beguelin et al. 2023), {secs:.0f} s, "
        "root-finding tolerance 0.01",
    )
    inverted = (900, 1000, 950, 1000)
    row(
        "an inverted attack's counts (900 of 1,000 FP, 950 of 1,000 FN)",
        definition.epsilon_from_counts(*inverted, DELTA, CONF)[0],
        privacy_estimates_eps_lo(*inverted) if pe else None,
        "no: the peer flips an attack worse than chance (reads 'IN' as 'OUT'); dpaudit's rule "
        "is fixed (higher score means IN) and gives 0",
    )
    lines.append("")
    return lines


def _loop_max(score: np.ndarray, member: np.ndarray) -> float:
    sw = definition.sweep(score, member)
    return max(
        privacy_estimates_eps_lo(fp, sw.n_nonmembers, fn, sw.n_members)
        for fp, fn in zip(sw.false_pos.tolist(), sw.false_neg.tolist(), strict=True)
    )


def privacy_meter_table(m: int, seed: int) -> list[str]:
    """dpaudit beside ML Privacy Meter on the one-run file's scores."""
    sf = gaussian_score_file(m, 2.0, DELTA, seed=seed)  # the one-run table's file
    score, member = sf.score[0], sf.membership[0]
    ins, outs = score[member == 1], score[member == 0]
    am = _rows(sf, {"method": "attack_metrics", "resamples": 0})["attack_metrics"]
    lines, row = _peer_table(
        f"### ML Privacy Meter: scores of the one-run file above (m = {m:,}, seed {seed}; "
        f"{ins.size:,} IN, {outs.size:,} OUT)",
        "privacy_meter",
        pm_result,
    )
    labels = (score > np.median(score)).astype(np.int8)
    row(
        "AUROC (`MetricResult.roc_auc`, scores as `predictions_proba`)",
        am["auroc"],
        pm_result.MetricResult("auroc", labels, member, predictions_proba=score).roc_auc
        if pm_result
        else None,
        "yes: both `sklearn.metrics.roc_auc_score`",
    )
    grid = np.logspace(-5, 0, 100)  # privacy_meter.utils.default_quantile
    row(
        "AUROC of the population attack (100 target FPRs, `CombinedMetricResult.roc_auc`)",
        am["auroc"],
        float(privacy_meter_population(ins, outs, grid).roc_auc) if pm_result else None,
        "no: the peer's is the trapezoid through its 100 thresholds only",
    )
    res = (
        privacy_meter_population(ins, outs, np.array([0.0, 0.001, 0.01, 1.0]))
        if pm_result
        else None
    )
    for j, a in ((1, 0.001), (2, 0.01)):
        ours = f"{am[f'tpr_at_fpr_{a:g}']:.4f} ({int(np.floor(a * outs.size))} FP at most)"
        theirs = f"{res.tp[j] / ins.size:.4f} ({res.fp[j]} FP)" if res is not None else None
        row(
            f"TPR at FPR {a:g} (population attack, OUT scores as reference)",
            ours,
            theirs,
            "no: the peer's threshold is the interpolated a-quantile of the OUT scores, which "
            "lets floor(a (n_out - 1)) + 1 of them pass (an FPR above a), dpaudit at most "
            "floor(a n_out)",
        )
    lines.append("")
    return lines


def diagonal_check(trials: int = 1000, reps: int = 4000, seed: int = 0) -> str:
    """How often each library reports a positive bound when the truth is epsilon = 0
    (FPR = FNR = 1/2): privacy-estimates flips attacks worse than chance, dpaudit does not."""
    rng = np.random.default_rng(seed)
    fp, fn = rng.binomial(trials, 0.5, reps), rng.binomial(trials, 0.5, reps)
    ours = [
        definition.epsilon_from_counts(a, trials, b, trials, DELTA, CONF)[0]
        for a, b in zip(fp.tolist(), fn.tolist(), strict=True)
    ]
    line = (
        f"Diagonal truth (FPR = FNR = 1/2, {trials} trials each, {reps} repetitions, seed "
        f"{seed}): positive bound in {np.mean(np.array(ours) > 0):.2%} (dpaudit)"
    )
    if pe:
        theirs = [
            privacy_estimates_eps_lo(a, trials, b, trials)
            for a, b in zip(fp.tolist(), fn.tolist(), strict=True)
        ]
        line += f", {np.mean(np.array(theirs) > 0):.2%} (privacy-estimates)"
    return line + "."


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--m", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=5_000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    jx = _jax()
    print(f"jax_privacy: {'installed' if jx else 'not installed'}\n")
    print(f"privacy-estimates: {'installed' if pe else 'not installed'}")
    print(f"privacy-meter: {'installed' if pm_result else 'not installed'}\n")
    for line in (
        one_run_table(args.m, args.seed)
        + multi_run_table(args.runs, args.seed)
        + privacy_estimates_table(args.runs, args.seed)
        + privacy_meter_table(args.m, args.seed)
        + [diagonal_check()]
    ):
        print(line, flush=True)


if __name__ == "__main__":
    main()
