"""dpaudit's estimators beside jax_privacy's auditing module, on the same score files.

Writes the tables of docs/peers.md (the text around them is in that page): for a one-run file
(idealised Gaussian, mu = 1, m canaries) and a multi-run file (Batched Gaussian Mechanism with
T = 1, i.e. a Gaussian mechanism), each quantity both libraries compute, with the definitions
that coincide and those that differ said in docs/peers.md. jax_privacy is imported only if
installed (``pip install jax-privacy``); without it the dpaudit column is printed alone.

    python benchmarks/peers.py --m 10000 --runs 5000 > peers_tables.md
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np

from dpaudit.audit import run_estimator
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--m", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=5_000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    jx = _jax()
    print(f"jax_privacy: {'installed' if jx else 'not installed'}\n")
    for line in one_run_table(args.m, args.seed) + multi_run_table(args.runs, args.seed):
        print(line, flush=True)


if __name__ == "__main__":
    main()
