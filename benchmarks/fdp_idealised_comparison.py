"""Idealised comparison of the tight one-run audit (Xiang et al. 2025) with the one-run bound
of Steinke et al. (analogues of the paper's Figs. 3, 4, 7, 9, 11, 12), noise-free: each
point uses the expected error count of the mechanism's own f-DP channels, top r by |privacy
loss| (the paper's "special case"), and both bounds see the same r guesses. "best r" is each
method's own maximum over the grid 1, 2, 5 x 10^k <= n (uncorrected, a figure not an audit).

    OMP_NUM_THREADS=1 python benchmarks/fdp_idealised_comparison.py
"""

from __future__ import annotations

from dpaudit.analyses import tight_one_run_comparison as cmp
from dpaudit.estimators.fdp_one_run import families


def grid(n: int) -> list[int]:
    return sorted({c * 10**e for e in range(7) for c in (1, 2, 5) if c * 10**e <= n} | {n})


def n_table(title, family, thetas, ns, delta, q=None, label="mu", truth=None):
    print(f"\n### {title} (r = n/5, delta = {delta:g})\n")
    print(f"| {label} (true eps) | n | wrong/r | ours | one-run | ours best r | one-run best r |")
    print("|---|---|---|---|---|---|---|")
    for th in thetas:
        true_eps = truth(th) if truth else families.to_epsilon(family, th, delta, q)
        for n in ns:
            c = cmp.idealised_point(family, th, n, max(1, n // 5), delta, q=q)
            sweep = cmp.idealised_r_curve(family, th, n, grid(n), delta, q=q)
            bo, bs = cmp.best_r(sweep)
            print(f"| {th} ({true_eps:.3f}) | {n} | {c.wrong}/{c.r} | {c.fdp_epsilon:.2f} "
                  f"| {c.one_run_epsilon:.2f} | {bo.fdp_epsilon:.2f} (r={bo.r}) "
                  f"| {bs.one_run_epsilon:.2f} (r={bs.r}) |")


def main() -> None:
    ns = [100, 1000, 10_000, 100_000]
    n_table("Gaussian, mu-GDP null (Fig. 3)", "gdp", [0.5, 1.0, 2.0], ns, 1e-5)
    n_table("Laplace, Laplace null (Fig. 4)", "laplace", [1.0, 2.0, 4.0], ns, 1e-5)
    for d in (1e-5, 1e-2):
        n_table("Randomized response eps = 3.2, f_{eps,delta} null (Fig. 7)", "approx_dp",
                [3.2], ns, d, label="eps", truth=lambda e: e)
    n_table("Subsampled Gaussian q = 0.5 (Fig. 9)", "subsampled_gaussian", [1.0, 2.0],
            ns, 1e-7, q=0.5)
    print("\n### Fixed r = 1000, varying n (Fig. 11), Gaussian, delta = 1e-5\n")
    print("| mu | n | wrong | accuracy | ours | one-run |")
    print("|---|---|---|---|---|---|")
    for mu in (0.8, 1.0):
        for c in cmp.idealised_n_curve("gdp", mu, [1000, 10_000, 100_000, 1_000_000], r=1000):
            print(f"| {mu} | {c.n} | {c.wrong} | {c.accuracy:.3f} | {c.fdp_epsilon:.2f} "
                  f"| {c.one_run_epsilon:.2f} |")
    print("\n### Varying r at n = 1e5, 0.8-GDP (Fig. 12), delta = 1e-5, true eps 3.387\n")
    print("| r | wrong | accuracy | ours | one-run |")
    print("|---|---|---|---|---|")
    for c in cmp.idealised_r_curve("gdp", 0.8, 100_000,
                                 [100, 300, 1000, 3000, 10_000, 30_000, 50_000, 100_000]):
        print(f"| {c.r} | {c.wrong} | {c.accuracy:.3f} | {c.fdp_epsilon:.2f} "
              f"| {c.one_run_epsilon:.2f} |")


if __name__ == "__main__":
    main()
