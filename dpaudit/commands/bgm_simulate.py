"""Runs the shuffled Batched Gaussian Mechanism RUNS times on D (target present) and on D'
(zero-out), scores each run by the likelihood ratio of the threat model, and writes a score file
of design multi_run.
"""

from __future__ import annotations

import argparse

from dpaudit.mechanisms.batched_gaussian import BGM_THREAT_MODELS

HELP = "simulate the Batched Gaussian Mechanism audit (Annamalai et al., Alg. 4)"


def arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--runs", type=int, required=True, help="runs per hypothesis")
    p.add_argument("--steps", type=int, required=True, help="batches per epoch T")
    p.add_argument("--sigma", type=float, required=True, help="noise multiplier")
    p.add_argument("--threat-model", choices=BGM_THREAT_MODELS, default="worst_case")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=1, help="only shifts worst_case outputs")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--delta", type=float, default=1e-5)
    p.add_argument("--experiment", default="shuffle_bgm")
    p.add_argument("--setting", default="default")
    p.add_argument("--out", required=True, help="path of the .npz score file")


def run(args: argparse.Namespace) -> int:
    from dpaudit import scores
    from dpaudit.mechanisms.batched_gaussian import bgm_score_file

    sf = bgm_score_file(
        args.runs,
        args.steps,
        args.sigma,
        args.threat_model,
        args.epochs,
        args.batch_size,
        args.seed,
        args.delta,
        args.experiment,
        args.setting,
    )
    scores.write(args.out, sf)
    print(
        f"wrote {args.out}: {sf.n_trials} runs, claimed (Poisson) eps "
        f"{sf.meta['claimed_epsilon']:.4f}, shuffle lower bound {sf.meta['shuffle_lower_bound']}"
    )
    return 0
