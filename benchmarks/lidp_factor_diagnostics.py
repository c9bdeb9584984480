"""Why the LiDP Table 1 factor (K = 16 over K = 1) is about 1 at CPU scale: three diagnostics.

Pillutla et al. (2023), *Unleashing the Power of Randomization in Auditing Differentially
Private ML*, arXiv:2305.18447: Section 3.3 (Eq. 8, Prop. 4: the 2nd-order interval is
1/sqrt(nK) + 1/n^(3/4) when the tests are weakly correlated), App. C (Algs. 5-7, Wilson), Table 1.

* ``correlation RESULTS``: per cell and seed of ``config/cpu/lidp.yaml``'s score files (under
  RESULTS/<experiment>/scores), at the threshold the audit tunes (n = 64 + 64 tuning trials):
  per-canary TPR / FPR, the effective number of independent tests per model
  ``K_eff = mu1 (1 - mu1) / Var(per-model mean)`` (16 when independent, 1 when identical), the
  pairwise correlation ``(mu2 - mu1^2) / (mu1 (1 - mu1))`` and the pooled AUROC.
* ``ideal``: the factor of Table 1 when everything LiDP assumes holds exactly: scores IN ~ N(mu, 1),
  OUT ~ N(0, 1), K = 16 independent tests with no bias; population moments (p, p^2, p^3, p^4)
  plugged into the Wilson intervals at n trials; best threshold; n_ref in {64, 128, 256, 1000}.
* ``plugin RESULTS``: the same plug-in with the measured scores (all models of the 3 seeds
  pooled, per-threshold moments), K = 1 vs K = 16, as a function of n.

Usage: ``python benchmarks/lidp_factor_diagnostics.py {correlation,plugin} RESULTS`` or
``... ideal``. Library calls only; nothing is trained.
"""

from __future__ import annotations

import glob
import sys

import numpy as np
from scipy.stats import mannwhitneyu, norm

from dpaudit.analyses.lidp_sample_complexity import trials_to_reach
from dpaudit.estimators.lidp import bound as lidp
from dpaudit.estimators.lidp import xbern
from dpaudit.estimators.lidp.audit import split_in_out
from dpaudit.scores import read

CELLS = (
    "lidp_cpu_digits_linear_poisoning",
    "lidp_cpu_digits_mlp_poisoning",
    "lidp_cpu_digits_mlp_randgrad",
    "lidp_cpu_digits_linear_randgrad",
    "lidp_cpu_location_mlp_poisoning",
)
BETA_SIDE = 0.025  # confidence 0.95, split between the two sides, as the audit does
DELTA = 1e-5


def _files(results: str, cell: str, k: int) -> list[str]:
    return sorted(glob.glob(f"{results}/{cell}/scores/k{k}_eps32/seed*.shard0.npz"))


def _xbern_stats(b: np.ndarray) -> tuple[float, float, float]:
    """(mu1, K_eff, pairwise correlation) of an (n, K) 0/1 matrix."""
    n_k = b.shape[1]
    mu1 = float(b.mean())
    var = float(b.mean(axis=1).var(ddof=1))
    k_eff = mu1 * (1 - mu1) / var if var > 0 else float("inf")
    if n_k < 2 or not 0 < mu1 < 1:
        return mu1, k_eff, float("nan")
    c = b.sum(axis=1)
    mu2 = float((c * (c - 1)).mean() / (n_k * (n_k - 1)))
    return mu1, k_eff, (mu2 - mu1**2) / (mu1 * (1 - mu1))


def correlation(results: str, n: int = 64) -> None:
    for cell in CELLS:
        for k in (1, 16):
            for f in _files(results, cell, k):
                si, so = split_in_out(read(f))
                tune, ev = lidp.split_trials(si.shape[0], 0.5, 0)  # the audit's split
                rows = np.r_[tune[:n], ev[:n]]
                res = lidp.audit_scores(
                    si[rows], so[rows], delta=DELTA, order=1 if k == 1 else 2, heldout_trials=n
                )
                x, y = si[ev[:n]] >= res.threshold, so[ev[:n]] >= res.threshold
                (tpr, kin, rin), (fpr, kout, rout) = _xbern_stats(x), _xbern_stats(y)
                auc = mannwhitneyu(si[ev[:n]].ravel(), so[ev[:n]].ravel()).statistic / (
                    si[ev[:n]].size * so[ev[:n]].size
                )
                print(
                    f"{cell} K={k} {f.rsplit('/', 1)[1][:5]} eps={res.epsilon:.3f} "
                    f"TPR={tpr:.3f} FPR={fpr:.3f} K_eff in/out={kin:.1f}/{kout:.1f} "
                    f"corr in/out={rin:.3f}/{rout:.3f} p1_lower={res.p1_lower:.3f} "
                    f"p0_upper={res.p0_upper:.3f} AUROC={auc:.3f}"
                )


def _best_bound(pairs, n: int, k: int, order: int) -> float:
    """Largest eps-hat over thresholds, each given as ((IN moments), (OUT moments))."""
    best = 0.0
    for m1, m0 in pairs:
        sx = xbern.XBernSummary(n=n, K=k, moments=np.asarray(m1[:order]), first=np.asarray(0))
        sy = xbern.XBernSummary(n=n, K=k, moments=np.asarray(m0[:order]), first=np.asarray(0))
        lo, _ = xbern.bounds(sx, BETA_SIDE, "wilson", order)
        _, hi = xbern.bounds(sy, BETA_SIDE, "wilson", order)
        best = max(best, float(lidp.epsilon_from_bounds(lo, hi, DELTA)))
    return best


def _factors(ns: np.ndarray, b: np.ndarray, curves: dict[str, np.ndarray], nrefs) -> str:
    out = []
    for nref in nrefs:
        j = list(ns).index(nref)
        if b[j] <= 0:
            out.append(f"n_ref={nref}: undefined (DP bound 0)")
            continue
        f = [
            f"{k} {nref / trials_to_reach(ns.astype(float), e, b[j]):.2f}"
            for k, e in curves.items()
        ]
        out.append(f"n_ref={nref}: " + ", ".join(f))
    return " | ".join(out)


def ideal() -> None:
    ns = np.array([8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1000, 1500, 2000])
    taus = np.linspace(-1, 4, 301)
    for mu in (1.0, 1.4, 2.0, 3.0):
        pairs = [
            tuple(np.array([p**j for j in range(1, 5)]) for p in (norm.sf(t - mu), norm.sf(t)))
            for t in taus
        ]
        b = np.array([_best_bound(pairs, n, 1, 1) for n in ns])
        curves = {
            f"order {o}": np.array([_best_bound(pairs, n, 16, o) for n in ns]) for o in (2, 4)
        }
        print(f"mu={mu} (AUROC {norm.cdf(mu / np.sqrt(2)):.2f}): n={ns.tolist()}")
        print("  DP   ", np.round(b, 2).tolist())
        for name, e in curves.items():
            print(f"  {name}", np.round(e, 2).tolist())
        print("  factor", _factors(ns, b, curves, (64, 128, 256, 1000)))


def plugin(results: str) -> None:
    ns = np.array([16, 32, 64, 128, 256, 512, 1000, 2000])
    for cell in CELLS:
        pooled = {}
        for k in (1, 16):
            parts = [split_in_out(read(f)) for f in _files(results, cell, k)]
            si, so = np.vstack([p[0] for p in parts]), np.vstack([p[1] for p in parts])
            grid = lidp.threshold_grid(si, so, 200)
            order = 1 if k == 1 else 4
            pooled[k] = [
                tuple(np.asarray(xbern.moments(s >= t, min(order, k)), float) for s in (si, so))
                for t in grid
            ]
        b = np.array([_best_bound(pooled[1], n, 1, 1) for n in ns])
        curves = {
            f"order {o}": np.array([_best_bound(pooled[16], n, 16, o) for n in ns]) for o in (2, 4)
        }
        print(f"{cell}: n={ns.tolist()}")
        print("  DP K=1 ", np.round(b, 3).tolist())
        for name, e in curves.items():
            print(f"  K=16 {name}", np.round(e, 3).tolist())
        print("  factor", _factors(ns, b, curves, (64, 128, 256, 1000)))


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else ""
    if what == "ideal":
        ideal()
    elif what in ("correlation", "plugin") and len(sys.argv) == 3:
        (correlation if what == "correlation" else plugin)(sys.argv[2])
    else:
        sys.exit("usage: lidp_factor_diagnostics.py {correlation,plugin} RESULTS | ideal")
