"""The scale at which one white-box run would catch the bugs (e) (a claim for fewer steps) and
(a) (shuffled batches) of docs/real_data/own_training.md, from the idealised score law of the
Dirac gradient canary.

    OMP_NUM_THREADS=1 python benchmarks/own_training_scale.py [--runs 20] [--seed 0]

The white-box score of a Dirac canary (Steinke, Nasr, Jagielski 2023, arXiv:2305.08846, Sec. 4)
is the noisy update at its coordinate summed over the T steps, in units of the clipping norm C:
IN = (the canary's count of batches) + N(0, sigma^2 T), OUT = N(0, sigma^2 T). Under Poisson
sampling at rate q the count is Binomial(T, q); under shuffled fixed-size batches it is exactly
the number of epochs, T q. Each simulated run draws m fair coins and these scores and is audited
by the library's own verdict (:func:`dpaudit.attach.audit_scores`: the family-free
``VERDICT_ESTIMATORS``, ``one_run`` and ``fdp_abstention`` with the ``approx_dp`` null, each
Bonferroni-selected at 97.5%, so their maximum holds at 95%), against the claim that the
training's accounting reports (:func:`dpaudit.accounting.dpsgd.epsilon`, same accountant).

(e) "accountant told 1 of 10 epochs": for each sampling rate q (``--q``), one epoch is
round(1 / q) steps; sigma is calibrated (:func:`dpaudit.accounting.dpsgd.noise_multiplier`) so
that the accounting of ``--claimed-epochs`` epochs reports ``--claim``, and the run has
``--epochs`` epochs (10x the claimed steps). q = 1/4 is the setting of
config/cpu/own_training.yaml (sigma 1.72, T = 40, claim 2.00 at delta 1e-5).

(a) "shuffled batches with Poisson accounting", at q = 1/4: sigma calibrated for the T Poisson
steps the accounting assumes (the correct loop's sigma); the shuffled run's IN canaries are in
exactly T q batches. The correct (Poisson) loop is simulated beside it on the same grid.

The canaries need m coordinates whose data gradient is zero: in the digits MLP of the config
these are the first-layer weights of the 4 always-zero pixels, 4 per hidden unit, so m canaries
need a first layer of at least ceil(m / 4) hidden units (the printed ``width``).

Prints markdown tables: per (bug, q, m) the median and range of the verdict's lower bound over
``--runs`` simulated runs, the share flagged, and the largest bound a run's m canaries and coins
can give at all (``ceiling``: the verdict's ``largest_detectable_epsilon``, median over the
runs); then the smallest m that flags in at least 50% and 90% of the runs.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from dpaudit.accounting import dpsgd
from dpaudit.attach import audit_scores

#: Pixels of the 8x8 digits that are zero in every training record (docs/real_data/own_training.md).
ZERO_PIXELS = 4


def simulate(
    m: int, steps: int, q: float, sigma: float, shuffled: bool, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Fair coins (m,) and idealised white-box scores (m,) of one run, in units of C."""
    member = rng.integers(0, 2, size=m)
    if shuffled:
        count = np.full(m, round(steps * q), dtype=float)
    else:
        count = rng.binomial(steps, q, size=m).astype(float)
    scores = member * count + rng.normal(0.0, sigma * math.sqrt(steps), size=m)
    return scores, member


def flag_runs(
    m: int,
    steps: int,
    q: float,
    sigma: float,
    shuffled: bool,
    claim: dict[str, float | int | str],
    runs: int,
    seed: list[int],
    confidence: float,
) -> list[tuple[float, bool, float]]:
    """(lower bound, flagged, largest detectable epsilon) of ``runs`` simulated runs audited by
    the library's verdict; ``claim``: the keywords of the claim (noise_multiplier,
    sample_rate, steps, accountant, delta)."""
    out = []
    for run in range(runs):
        rng = np.random.default_rng([*seed, run])
        scores, member = simulate(m, steps, q, sigma, shuffled, rng)
        result = audit_scores(
            scores,
            member,
            confidence=confidence,
            threat_model="per_step_dot",
            seed=run,
            **claim,
        )
        ceiling = float(result.verdict["largest_detectable_epsilon"].iloc[0])
        out.append((result.lower_bound, result.flagged, ceiling))
    return out


def claim_keywords(
    sigma: float, q: float, steps: int, accountant: str, delta: float
) -> dict[str, float | int | str]:
    """The keywords of :func:`dpaudit.attach.audit_scores` that make the claim the one the
    training's accounting reports: DP-SGD at (``sigma``, ``q``, ``steps``) by ``accountant``."""
    return {
        "noise_multiplier": sigma,
        "sample_rate": q,
        "steps": steps,
        "accountant": accountant,
        "delta": delta,
    }


def row_text(label: str, q: float, m: int, res: list[tuple[float, bool, float]]) -> str:
    """One markdown row of the grid table (``ceiling``: the median over the runs)."""
    bounds = np.array([r[0] for r in res])
    share = np.mean([r[1] for r in res])
    ceiling = np.median([r[2] for r in res])
    width = math.ceil(m / ZERO_PIXELS)
    return (
        f"| {label} | {q:.3g} | {m} | {width} | {ceiling:.2f} | {np.median(bounds):.2f} | "
        f"{bounds.min():.2f}-{bounds.max():.2f} | {share:.2f} |"
    )


def smallest(grid: list[int], shares: list[float], level: float) -> str:
    """The smallest m of ``grid`` whose flag share reaches ``level`` ("none" if no m does)."""
    hit = [m for m, s in zip(grid, shares, strict=True) if s >= level]
    return str(min(hit)) if hit else f"none <= {max(grid)}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--m", type=int, nargs="+", default=[1000, 3000, 10000, 30000, 100000])
    parser.add_argument("--q", type=float, nargs="+", default=[0.25, 0.5, 1.0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--claim", type=float, default=2.0)
    parser.add_argument("--delta", type=float, default=1e-5)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--claimed-epochs", type=int, default=1)
    parser.add_argument("--shuffle-q", type=float, default=0.25)
    parser.add_argument("--accountant", default="rdp", help="the training's accountant")
    parser.add_argument("--true-accountant", default="prv", help="for the true epsilon")
    parser.add_argument("--confidence", type=float, default=0.95)
    args = parser.parse_args()
    start = time.time()
    header = (
        "| run | q | m | width | ceiling | median bound | range | share flagged |\n"
        "| --- | --- | --- | --- | --- | --- | --- | --- |"
    )

    print(f"**(e) accountant told {args.claimed_epochs} of {args.epochs} epochs**\n")
    settings, rows, summary = [], [], []
    for qi, q in enumerate(args.q):
        per_epoch = round(1 / q)
        steps_claimed, steps = args.claimed_epochs * per_epoch, args.epochs * per_epoch
        sigma = dpsgd.noise_multiplier(args.claim, args.delta, q, steps_claimed, args.accountant)
        claim = claim_keywords(sigma, q, steps_claimed, args.accountant, args.delta)
        claimed = dpsgd.epsilon(args.accountant, sigma, q, steps_claimed, args.delta)
        true = dpsgd.epsilon(args.true_accountant, sigma, q, steps, args.delta)
        settings.append(
            f"| {q:.3g} | {steps_claimed} | {steps} | {sigma:.3f} | {claimed:.2f} | {true:.2f} |"
        )
        shares = []
        for m in args.m:
            res = flag_runs(
                m, steps, q, sigma, False, claim, args.runs, [args.seed, 0, qi, m], args.confidence
            )
            rows.append(row_text("(e)", q, m, res))
            shares.append(float(np.mean([r[1] for r in res])))
        summary.append(
            f"| {q:.3g} | {smallest(args.m, shares, 0.5)} | {smallest(args.m, shares, 0.9)} |"
        )
    print(
        f"| q | claimed steps | true steps | sigma ({args.accountant}) | claimed epsilon "
        f"({args.accountant}) | true epsilon ({args.true_accountant}) |\n"
        "| --- | --- | --- | --- | --- | --- |"
    )
    print("\n".join(settings) + "\n")
    print(header)
    print("\n".join(rows) + "\n")
    print("| q | smallest m flagged in >= 50% | smallest m flagged in >= 90% |")
    print("| --- | --- | --- |")
    print("\n".join(summary) + "\n")

    q = args.shuffle_q
    steps = args.epochs * round(1 / q)
    sigma = dpsgd.noise_multiplier(args.claim, args.delta, q, steps, args.accountant)
    claim = claim_keywords(sigma, q, steps, args.accountant, args.delta)
    print(
        f"**(a) shuffled batches accounted as Poisson (q = {q:.3g}, T = {steps}, "
        f"sigma = {sigma:.3f}, claim "
        f"{dpsgd.epsilon(args.accountant, sigma, q, steps, args.delta):.2f})**\n"
    )
    print(header)
    for label, shuffled, case in (("correct (Poisson)", False, 1), ("(a) shuffled", True, 2)):
        for m in args.m:
            seed = [args.seed, case, m]
            res = flag_runs(m, steps, q, sigma, shuffled, claim, args.runs, seed, args.confidence)
            print(row_text(label, q, m, res))
    print(
        f"\n{args.runs} simulated runs per row, seed {args.seed}, delta {args.delta:g}, "
        f"verdict at joint confidence {args.confidence:g}; {time.time() - start:.0f} s"
    )


if __name__ == "__main__":
    main()
