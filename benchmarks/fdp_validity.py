"""Type-I error of the tight one-run audit (Xiang et al. 2025) on idealised mechanisms whose
privacy is exactly the null (Thm. 3's independence step): the fraction of runs in which the bound on
the family parameter exceeds the truth, which a valid 95% bound keeps at or below 0.05.

For fixed (n, r) the bound depends on the data only through the error count, so bounds are
computed once per distinct count.

    OMP_NUM_THREADS=1 python benchmarks/fdp_validity.py [--reps 1000]
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from dpaudit.estimators.fdp_one_run import bound as fdp_bound
from dpaudit.estimators.fdp_one_run import guesses as F
from dpaudit.mechanisms import fdp_one_run_sim as S

CASES = [
    # (label, draw(n, rng), family, true parameter, extra kwargs, n, r, guess rule)
    ("Gaussian mu=1, balanced", lambda n, g: S.gaussian(n, 1.0, g), "gdp", 1.0, {}, 10_000,
     2000, "balanced"),
    ("Gaussian mu=1, centered", lambda n, g: S.gaussian(n, 1.0, g), "gdp", 1.0, {}, 10_000,
     2000, "centered"),
    ("Gaussian mu=1, r=n", lambda n, g: S.gaussian(n, 1.0, g), "gdp", 1.0, {}, 10_000,
     10_000, "centered"),
    ("Gaussian mu=2, balanced", lambda n, g: S.gaussian(n, 2.0, g), "gdp", 2.0, {}, 10_000,
     2000, "balanced"),
    ("Laplace mu=2, centered", lambda n, g: S.laplace(n, 2.0, g), "laplace", 2.0, {}, 10_000,
     2000, "centered"),
    ("RR (3.2, 0.01), balanced", lambda n, g: S.randomized_response(n, 3.2, 0.01, g),
     "approx_dp", 3.2, {"delta": 0.01}, 10_000, 2000, "balanced"),
    ("SGM mu=2 q=0.5, balanced", lambda n, g: S.subsampled_gaussian(n, 2.0, 0.5, g),
     "subsampled_gaussian", 2.0, {"q": 0.5}, 10_000, 2000, "balanced"),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    print(f"| mechanism | n | r | family | type-I rate ({args.reps} reps) | mean param bound |")
    print("|---|---|---|---|---|---|")
    for k, (label, draw, family, truth, kw, n, r, guess) in enumerate(CASES):
        rng = np.random.default_rng([args.seed, k])
        us = []
        for _ in range(args.reps):
            score, member = draw(n, rng)
            us.append(F.released_guesses(score, member, r, guess)[2])
        cache = {
            u: fdp_bound.param_lower_bound(n, r, u, family, 0.95, kw.get("delta"), kw.get("q"))[0]
            for u in set(us)
        }
        b = np.array([cache[u] for u in us])
        rate = float(np.mean(b > truth + 1e-9))
        sd = math.sqrt(max(rate, 1 / args.reps) * (1 - rate) / args.reps)
        print(f"| {label} | {n} | {r} | {family} | {rate:.4f} +- {sd:.4f} | {b.mean():.3f} |")


if __name__ == "__main__":
    main()
