"""Privacy of releasing the best of K ~ xi DP-SGD runs, via the reduced game 'max of K draws of
N(0,1) vs N(mu,1)'. Give --mu, or --epsilon-base (with --tau and --steps) to calibrate sigma
with the RDP accountant. 'epsilon' is Algorithm 3's bound. --reproduce prints the paper
comparison tables instead.
"""

from __future__ import annotations

import argparse

from dpaudit.commands import add_json_argument

HELP = "epsilon of tuned DP-SGD: Algorithm 3 / Papernot-Steinke / exact (Xiang et al. 2024)"


def arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--xi", choices=("tnb", "poisson", "binary", "fixed"), default="tnb")
    p.add_argument("--eta", type=float, default=0.0, help="TNB eta (default 0)")
    p.add_argument("--nu", type=float, default=1e-2, help="TNB nu (default 1e-2)")
    p.add_argument("--mean", type=float, default=10.0, help="Poisson mean (default 10)")
    p.add_argument("--L", type=int, default=10, help="binary xi: the large K (default 10)")
    p.add_argument("--s", type=float, default=0.1, help="binary xi: P[K=1] (default 0.1)")
    p.add_argument("--k", type=int, default=1, help="fixed xi: K (default 1)")
    p.add_argument("--mu", type=float, help="mu of the reduced game")
    p.add_argument("--epsilon-base", type=float, help="base DP-SGD budget epsilon_B (RDP)")
    p.add_argument("--tau", type=float, default=1.0, help="sample rate (default 1)")
    p.add_argument("--steps", type=int, default=500, help="DP-SGD steps N (default 500)")
    p.add_argument(
        "--mu-variant",
        choices=("O", "G"),
        default="O",
        help="O: tau sqrt(N)/sigma (Eq. 19); G: the GDP CLT mu (Cor. 7)",
    )
    p.add_argument("--delta", type=float, default=1e-5, help="default 1e-5")
    p.add_argument("--exact", action="store_true", help="also the exact (hockey-stick) epsilon")
    p.add_argument(
        "--reproduce",
        choices=("example1", "table3", "table4"),
        help="print our numbers next to the paper's",
    )
    add_json_argument(p)


def run(args: argparse.Namespace) -> int:
    import json

    from dpaudit.accounting import run_counts as runs
    from dpaudit.accounting import selection as sel
    from dpaudit.accounting.gaussian import gaussian_epsilon
    from dpaudit.analyses import selection as tables
    from dpaudit.commands import emit

    if args.reproduce:
        df = {
            "example1": tables.example1_table,
            "table3": tables.table3_cells,
            "table4": tables.table4_cells,
        }[args.reproduce]()
        if args.json:
            print(json.dumps({"rows": df.to_dict(orient="records")}, sort_keys=True))
        else:
            print(df.to_string(index=False, float_format="%.4f"))
        return 0

    params = {
        "eta": args.eta,
        "nu": args.nu,
        "mean": args.mean,
        "L": args.L,
        "s": args.s,
        "k": args.k,
    }
    xi = runs.make_distribution(args.xi, **params)
    if (args.mu is None) == (args.epsilon_base is None):
        raise ValueError("give exactly one of --mu and --epsilon-base")
    sigma = None
    if args.mu is not None:
        mu = args.mu
    else:
        mu, sigma = sel.base_mu(
            args.epsilon_base, args.delta, args.tau, args.steps, args.mu_variant
        )
    eps = sel.reduced_game_epsilon_rdp(xi, mu, args.delta)
    result = {
        "epsilon": eps,
        "epsilon_algorithm3": eps,
        "epsilon_base_exact": gaussian_epsilon(args.delta, mu),
        "mu": mu,
        "noise_multiplier": sigma,
        "xi": repr(xi),
        "mean_runs": xi.mean(),
        "delta": args.delta,
    }
    if args.xi in ("tnb", "poisson"):
        result["epsilon_papernot_steinke"] = sel.papernot_steinke_epsilon(xi, mu, args.delta)
    if args.exact:
        result["epsilon_exact"] = sel.reduced_game_epsilon_exact(xi, mu, args.delta)
    lines = [f"{xi!r}, mu = {mu:.4f}, delta = {args.delta:g}"]
    lines += [
        f"  {k:28s} {v:.4f}" for k, v in result.items() if k.startswith("epsilon") and v is not None
    ]
    emit(result, args.json, "\n".join(lines))
    return 0
