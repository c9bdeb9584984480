"""Large Monte Carlo validity study of every estimator; writes docs/validity.md.

For each estimator, a mechanism whose true epsilon is known exactly is run ``--reps`` times
(each repetition a fresh score file with its own seed), and the estimator's *valid* rows are
checked: the fraction of repetitions whose lower bound exceeds the true epsilon must be at most
1 - confidence (up to Monte Carlo error), and on null files (the same scores with the
membership bits permuted, so members and non-members have one distribution) the bound must be
0 in at least 95% of repetitions. The unit tests run small versions of the same checks.

    python benchmarks/validity.py --reps 500 --out docs/validity.md
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpaudit.audit import run_estimator
from dpaudit.mechanisms.batched_gaussian import bgm_score_file
from dpaudit.mechanisms.dpsgd_ideal import claimed_epsilon, dpsgd_score_file
from dpaudit.mechanisms.lidp_gaussian import score_file as lidp_score_file
from dpaudit.mechanisms.one_run_ideal import (
    gaussian_score_file,
    randomized_response_score_file,
)
from dpaudit.scores import ScoreFile


@dataclass
class Case:
    name: str
    mechanism: str
    make: Any  # seed -> ScoreFile
    true_epsilon: float
    estimator: dict[str, Any]


def cases() -> list[Case]:
    one_run = {
        "method": "one_run",
        "confidence": 0.95,
        "selections": ["bonferroni", "sample_split"],
        "k_values": [10, 20, 50, 100, 200],
    }
    fdp = {
        "method": "fdp_one_run",
        "family": "gdp",
        "confidence": 0.95,
        "selections": ["bonferroni", "sample_split"],
        "r_grid": [50, 100, 200, 500],
    }
    fdp_rr = {**fdp, "family": "approx_dp", "delta": 0.0}
    abstention = {**fdp, "method": "fdp_abstention"}
    abstention_rr = {**abstention, "family": "approx_dp", "delta": 0.0}
    # every canary guessed (no abstention, r = m): the least diluted use of the recursion
    abstention_all = {**abstention, "selections": ["fixed"], "r_fraction": 1.0}
    g = gaussian_score_file(1000, 2.0, 1e-5, seed=0)  # mu = 1
    rr = randomized_response_score_file(1000, 2.0, 0.0, seed=0)
    lidp_true = 2.0
    bgm_true = bgm_score_file(10, 1, 1.0, seed=0).claimed_epsilon
    return [
        Case(
            "one_run (Bonferroni, sample split)",
            "Gaussian, mu = 1, m = 1000",
            lambda s: gaussian_score_file(1000, 2.0, 1e-5, seed=s),
            g.claimed_epsilon,
            one_run,
        ),
        Case(
            "one_run (Bonferroni, sample split)",
            "randomized response, eps = 2, m = 1000",
            lambda s: randomized_response_score_file(1000, 2.0, 0.0, seed=s),
            2.0,
            one_run,
        ),
        Case(
            "fdp_one_run GDP (Bonferroni, sample split)",
            "Gaussian, mu = 1, m = 1000",
            lambda s: gaussian_score_file(1000, 2.0, 1e-5, seed=s),
            g.claimed_epsilon,
            fdp,
        ),
        Case(
            "fdp_one_run approx_dp delta=0 (Bonferroni, sample split)",
            "randomized response, eps = 2, m = 1000",
            lambda s: randomized_response_score_file(1000, 2.0, 0.0, seed=s),
            rr.claimed_epsilon,
            fdp_rr,
        ),
        Case(
            "one_run (multi_split: 4 splits, gamma 1/2)",
            "Gaussian, mu = 1, m = 1000",
            lambda s: gaussian_score_file(1000, 2.0, 1e-5, seed=s),
            g.claimed_epsilon,
            {**one_run, "selections": ["multi_split"], "splits": 4, "split_seed": 0},
        ),
        Case(
            "one_run (multi_split: 4 splits, gamma 1/2)",
            "randomized response, eps = 2, m = 1000",
            lambda s: randomized_response_score_file(1000, 2.0, 0.0, seed=s),
            2.0,
            {**one_run, "selections": ["multi_split"], "splits": 4, "split_seed": 0},
        ),
        Case(
            "fdp_one_run GDP (multi_split: 4 splits, gamma 1/2)",
            "Gaussian, mu = 1, m = 1000",
            lambda s: gaussian_score_file(1000, 2.0, 1e-5, seed=s),
            g.claimed_epsilon,
            {**fdp, "selections": ["multi_split"], "splits": 4, "split_seed": 0},
        ),
        Case(
            "fdp_abstention GDP (Bonferroni, sample split)",
            "Gaussian, mu = 1, m = 1000",
            lambda s: gaussian_score_file(1000, 2.0, 1e-5, seed=s),
            g.claimed_epsilon,
            abstention,
        ),
        Case(
            "fdp_abstention approx_dp delta=0 (Bonferroni, sample split)",
            "randomized response, eps = 2, m = 1000",
            lambda s: randomized_response_score_file(1000, 2.0, 0.0, seed=s),
            rr.claimed_epsilon,
            abstention_rr,
        ),
        Case(
            "fdp_abstention approx_dp delta=0 (fixed r = m)",
            "randomized response, eps = 2, m = 1000",
            lambda s: randomized_response_score_file(1000, 2.0, 0.0, seed=s),
            rr.claimed_epsilon,
            {**abstention_all, "family": "approx_dp", "delta": 0.0},
        ),
        Case(
            "fdp_abstention GDP (multi_split: 4 splits, gamma 1/2)",
            "Gaussian, mu = 1, m = 1000",
            lambda s: gaussian_score_file(1000, 2.0, 1e-5, seed=s),
            g.claimed_epsilon,
            {**abstention, "selections": ["multi_split"], "splits": 4, "split_seed": 0},
        ),
        Case(
            "fdp_abstention subsampled Gaussian q = 0.5, 4 steps (Bonferroni)",
            "idealised DP-SGD, sigma = 0.7, q = 0.5, 4 steps, m = 1000",
            lambda s: dpsgd_score_file(1000, 0.7, 0.5, 4, 1e-5, seed=s),
            claimed_epsilon(0.7, 0.5, 4, 1e-5),
            {
                **abstention,
                "family": "subsampled_gaussian",
                "q": 0.5,
                "steps": 4,
                "selections": ["bonferroni"],
                "r_grid": [100, 200, 500],
            },
        ),
        Case(
            "lidp Wilson order 2 (held out)",
            "Gaussian, K = 16, n = 512, d = 100, eps = 2 (RDP-calibrated)",
            lambda s: lidp_score_file(512, 16, 100, 2.0, 1e-5, s),
            lidp_true,
            {"method": "lidp", "interval": "wilson", "order": 2},
        ),
        Case(
            "lidp Bernstein order 2 (held out)",
            "Gaussian, K = 16, n = 512, d = 100, eps = 2 (RDP-calibrated)",
            lambda s: lidp_score_file(512, 16, 100, 2.0, 1e-5, s),
            lidp_true,
            {"method": "lidp", "interval": "bernstein", "order": 2},
        ),
        Case(
            "multi_run_cp (held out)",
            "BGM with T = 1 (a Gaussian mechanism), sigma = 1, 2000 runs",
            lambda s: bgm_score_file(1000, 1, 1.0, seed=s),
            bgm_true,
            {"method": "multi_run_cp", "confidence": 0.95, "selections": ["heldout"]},
        ),
        Case(
            "multi_run_cp (multi_split: 10 held-out splits, gamma 1/2)",
            "BGM with T = 1 (a Gaussian mechanism), sigma = 1, 2000 runs",
            lambda s: bgm_score_file(1000, 1, 1.0, seed=s),
            bgm_true,
            {"method": "multi_run_cp", "confidence": 0.95, "selections": ["multi_split"]},
        ),
    ]


def permuted(sf: ScoreFile, seed: int) -> ScoreFile:
    """Membership permuted across trials (one target per trial) or within each trial (many
    canaries per trial; keeps each trial's count of inserted canaries)."""
    rng = np.random.default_rng(seed)
    if sf.n_canaries == 1:
        member = rng.permutation(sf.membership[:, 0])[:, None]
    else:
        member = rng.permuted(sf.membership, axis=1)
    return ScoreFile(score=sf.score, membership=member, canary_id=sf.canary_id, meta=sf.meta)


def study(case: Case, reps: int) -> list[dict[str, Any]]:
    over: dict[str, int] = {}
    zero: dict[str, int] = {}
    means: dict[str, float] = {}
    for seed in range(reps):
        sf = case.make(seed)
        for label, f, counter in (("real", sf, over), ("null", permuted(sf, seed), zero)):
            table = run_estimator(f, "x", case.estimator)
            table = table[table["valid"].astype(bool)]
            for row in table.itertuples():
                key = str(getattr(row, "selection", "") or "")
                if label == "real":
                    counter[key] = counter.get(key, 0) + (row.epsilon > case.true_epsilon + 1e-9)
                    means[key] = means.get(key, 0.0) + row.epsilon / reps
                else:
                    counter[key] = counter.get(key, 0) + (row.epsilon == 0.0)
    return [
        {
            "estimator": case.name,
            "selection": key or "-",
            "mechanism": case.mechanism,
            "true": case.true_epsilon,
            "mean_bound": means[key],
            "over": over[key] / reps,
            "null_zero": zero.get(key, 0) / reps,
        }
        for key in sorted(over)
    ]


KEY = ("estimator", "selection", "mechanism")


def parse_table(path: str) -> list[dict[str, Any]]:
    """The rows of a validity page written by this script (its ``reps`` column, or the
    ``--reps N`` of its first paragraph for pages written before the column existed)."""
    import re

    text = open(path).read()
    default = re.search(r"--reps (\d+)", text)
    rows = []
    header: list[str] | None = None
    for line in text.splitlines():
        if not line.startswith("| ") or line.startswith("| ---"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if header is None:
            header = cells
            continue
        r = dict(zip(header, cells, strict=True))
        rows.append(
            {
                "estimator": r["estimator"],
                "selection": r["selection"],
                "mechanism": r["mechanism"],
                "true": float(r["true epsilon"]),
                "mean_bound": float(r["mean bound"]),
                "over": float(r["over"]),
                "null_zero": float(r["null zero"]),
                "reps": int(r.get("reps") or (default.group(1) if default else 0)),
            }
        )
    return rows


def merged(tables: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Rows of several tables; a later row replaces an earlier one with the same key."""
    out: dict[tuple, dict[str, Any]] = {}
    for rows in tables:
        for r in rows:
            out[tuple(r[k] for k in KEY)] = r
    return list(out.values())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=500)
    ap.add_argument("--out", default="docs/validity.md")
    ap.add_argument("--only", default=None, help="run only cases whose name contains this")
    ap.add_argument(
        "--merge",
        nargs="*",
        default=[],
        help="validity pages whose rows to keep (later files, then this run, replace rows "
        "with the same estimator, selection and mechanism)",
    )
    args = ap.parse_args()
    rows, t0 = [], time.time()
    for case in cases():
        if args.only and args.only not in case.name:
            continue
        if args.reps <= 0:
            continue
        rows += [{**r, "reps": args.reps} for r in study(case, args.reps)]
        print(rows[-1], flush=True)
    rows = merged([parse_table(f) for f in args.merge] + [rows])
    lines = [
        "# Monte Carlo validity of every estimator",
        "",
        "Generated by `python benchmarks/validity.py --reps N` (rows of several runs merged with",
        "`--merge`; *reps* gives each row's repetitions). Each repetition is a fresh score file",
        "(its own seed) of a mechanism whose epsilon is known exactly. *over* is the fraction of",
        "repetitions whose valid lower bound (95% confidence) exceeds the true epsilon: at most",
        "0.05 up to Monte Carlo error (one standard error at 0.05 is sqrt(0.05 x 0.95 / reps):",
        "0.007 at 1000 repetitions, 0.022 at 100). *null zero* is the fraction of repetitions",
        "whose bound is 0 when the membership bits are permuted (members and non-members from",
        "one distribution): it must be at least 0.95, again up to Monte Carlo error. The verdict",
        "allows three standard errors on both.",
        "",
        "| estimator | selection | mechanism | true epsilon | mean bound | over | null zero "
        "| reps | verdict |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        se = math.sqrt(0.05 * 0.95 / max(r["reps"], 1))
        ok = r["over"] <= 0.05 + 3 * se and r["null_zero"] >= 0.95 - 3 * se
        lines.append(
            f"| {r['estimator']} | {r['selection']} | {r['mechanism']} | {r['true']:.3f} | "
            f"{r['mean_bound']:.3f} | {r['over']:.3f} | {r['null_zero']:.3f} | {r['reps']} | "
            f"{'holds' if ok else 'FAILS'} |"
        )
    if args.reps > 0:
        lines += ["", f"This run ({args.reps} repetitions): {time.time() - t0:.0f} s."]
    lines += [
        "",
        "Known limitation, not covered by this table: the tight one-run (f-DP) estimator with the",
        "`approx_dp` family and delta > 0 is *not* valid for general (epsilon, delta)-DP",
        "mechanisms (the paper's Theorem 1 issue): `benchmarks/fdp_theorem1_counterexample.py`",
        "measures a false-rejection rate of about 0.10 at nominal 0.05; see",
        "docs/estimators/fdp_one_run.md.",
    ]
    with open(args.out, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
