"""The LiDP paper grid (config/paper/lidp.yaml): run time and disk, extrapolated from measured
pieces, and the Gram-matrix sampler's speed-up over direct sampling at d = 10^4, in one run.

    OMP_NUM_THREADS=1 python benchmarks/bench_lidp_paper_grid.py [--quick] [--acceptance]
        [--experiment lidp_fig3_eps_vs_d]

Table 1 (measured side by side): seconds per trial of the Gram (Bartlett) sampler and of
direct sampling of the d-dimensional vectors, d = 10^4, m = K.

Table 2 (EXTRAPOLATED, not a run of the grid): for every experiment of the paper config,
  simulate = 25 seeds x (n held-out + n evaluation trials) x t_gram(K)       (t measured per K)
           + score-file write/read of the (2n, K + m) arrays                   (measured per MB)
  audit    = 25 seeds x estimators x (t_tune(2n x 2K scores) + read)          (measured)
  analyses = values x (reps + 1) x n x t_gram(K) + tuning
  jobs     = Snakemake jobs x the measured start-up of one Python job (imports)
on one core (the machine is shared: start-up and I/O vary about 2x between runs). The pieces
are measured on small instances and scaled linearly in the number
of trials (sampling and counting are linear in n; the 500-point threshold sweep adds a
per-estimator constant, measured separately).

``--acceptance`` (Table 3, MEASURED): the acceptance settings of Fig. 3 left (experiment
``lidp_fig3_eps_vs_n`` of the paper config at n in {1024, 4096} with K in {1, sqrt(n)} and
n = 65536 with K = 1; 25 seeds; the config's estimators) run in this process with the same
library calls as the pipeline's scripts (mechanism registry -> score file -> ``run_estimator``
-> setting columns -> the config's ``reproduce`` checks), and the seconds it took.
``--experiment NAME`` does the same for every setting of any simulate experiment of the config.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dpaudit import scores  # noqa: E402
from dpaudit.estimators.lidp.audit import run_lidp
from dpaudit.mechanisms import lidp_gaussian as lg  # noqa: E402
from dpaudit.pipeline.settings import simulate_settings  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def clock(f, *args, repeat: int = 1, **kw) -> float:
    best = np.inf
    for _ in range(repeat):
        t = time.perf_counter()
        f(*args, **kw)
        best = min(best, time.perf_counter() - t)
    return best


def sampler_speedup(quick: bool) -> list[tuple[int, float, float]]:
    """(K, gram s/trial, direct s/trial) at d = 10^4, measured in the same run."""
    d, rows = 10**4, []
    for K, n_gram, n_direct in ((16, 2000, 20), (64, 500, 10), (256, 100, 4)):
        if quick:
            n_gram, n_direct = max(20, n_gram // 10), max(2, n_direct // 2)
        tg = clock(lg.sample_scores, n_gram, K, K, d, 1.0, 0, "gram", repeat=2) / n_gram
        td = clock(lg.sample_scores, n_direct, K, K, d, 1.0, 0, "direct") / n_direct
        rows.append((K, tg, td))
    return rows


def gram_seconds_per_trial(K: int, d: int, quick: bool) -> float:
    """Measured seconds per trial (inserted + null scores) at this K and d (Gram sampler; for
    K + 1 > d its factor is (K + 1) x d)."""
    work = K * min(K, d) + 50 * K
    n = int(np.clip(2e6 / work, 16, 4000))
    if quick:
        n = max(8, n // 8)
    return clock(lg.sample_scores, n, K, K, d, 1.0, 0, "gram", repeat=2) / n


def io_seconds_per_mb(quick: bool) -> tuple[float, float, float]:
    """(write s/MB, read s/MB, compressed bytes per raw byte) of a score file."""
    n = 2000 if quick else 8000
    sf = lg.score_file(n=n, K=64, d=10**4, epsilon=2.0, delta=1e-5, seed=0)
    raw_mb = sf.score.size * (8 + 8 + 1) / 2**20
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "s.npz"
        tw = clock(scores.write, path, sf)
        tr = clock(scores.read, path)
        ratio = path.stat().st_size / (raw_mb * 2**20)
    return tw / raw_mb, tr / raw_mb, ratio


def audit_seconds(quick: bool) -> tuple[float, dict[str, float]]:
    """(seconds per score per estimator of the counting pass, constant per estimator)."""
    consts, per = {}, []
    for n, K in ((512, 16), (2048, 64)) if not quick else ((256, 8), (1024, 32)):
        sf = lg.score_file(n=n, K=K, d=10**4, epsilon=2.0, delta=1e-5, seed=0, heldout_trials="n")
        for interval, order in (("wilson", 1), ("wilson", 2), ("wilson", 4), ("bernstein", 2)):
            t = clock(run_lidp, sf, {"interval": interval, "order": order}, repeat=2)
            per.append((f"{interval}{order}", sf.score.size, t))
    # t = c_est + a * size, fit a from the two sizes per estimator
    slopes = []
    for name in {p[0] for p in per}:
        (s1, t1), (s2, t2) = [(s, t) for e, s, t in per if e == name]
        a = max((t2 - t1) / (s2 - s1), 0.0)
        slopes.append(a)
        consts[name] = max(t1 - a * s1, 0.0)
    return float(np.median(slopes)), consts


def job_startup_seconds() -> float:
    cmd = [sys.executable, "-c", "import dpaudit.audit, dpaudit.mechanisms.lidp_gaussian, pandas"]
    best = np.inf
    for _ in range(3):
        t = time.perf_counter()
        subprocess.run(cmd, check=True, cwd=ROOT)
        best = min(best, time.perf_counter() - t)
    return best


def estimator_key(block: dict) -> str:
    return f"{block.get('interval', 'wilson')}{block.get('order', 2)}"


def grid_estimate(quick: bool) -> list[dict]:
    config = yaml.safe_load((ROOT / "config/paper/lidp.yaml").read_text())
    est_blocks = config["estimators"]
    per_score, consts = audit_seconds(quick)
    w_mb, r_mb, ratio = io_seconds_per_mb(quick)
    startup = job_startup_seconds()
    t_gram: dict[tuple[int, int], float] = {}

    def tg(K: int, d: int) -> float:
        # the Gram cost does not depend on d while K + 1 <= d; beyond, it grows like K d
        key = (K, 0 if K + 1 <= d else d)
        if key not in t_gram:
            t_gram[key] = gram_seconds_per_trial(K, d if K + 1 > d else 10**4, quick)
        return t_gram[key]

    out = []
    for name, exp in config["experiments"].items():
        sim = aud = io = disk = 0.0
        jobs = 0
        if exp["kind"] == "simulate":
            seeds = len(exp["seeds"])
            for p in simulate_settings(exp).values():
                n, d = p["n"], p["d"]
                K = lg.resolve_K(p["K"], n)
                rows = n + lg.resolve_heldout(p.get("heldout_trials", 0), n)
                size = rows * 2 * K
                mb = size * 17 / 2**20
                ests = [
                    e
                    for e in exp["estimators"]
                    if est_blocks[e].get("order", 2) <= K
                    or est_blocks[e].get("below_order") != "skip"
                ]
                sim += seeds * rows * tg(K, d)
                io += seeds * mb * (w_mb + len(exp["estimators"]) * r_mb)
                aud += seeds * sum(
                    consts.get(estimator_key(est_blocks[e]), 0.0) + per_score * size for e in ests
                )
                disk += seeds * mb * ratio
                # one simulate job per seed, one audit job per estimator for all seeds
                jobs += seeds + len(exp["estimators"])
        else:
            p = exp["params"]
            reps = p.get("reps", 5)
            if exp["analysis"] == "lidp_gaussian_correlations":
                vals = p["values"]
                pairs = [(v, p["d"]) if p["vary"] == "K" else (p["K"], v) for v in vals]
            else:
                pairs = [(1, p["d"])] + [(K, p["d"]) for K in p["Ks"]]
            for K, d in pairs:
                sim += (reps + 1) * p["n"] * tg(K, d)
                aud += 3 * (consts.get("wilson2", 0.0) + per_score * 2 * p["n"] * K)
            jobs = 1
        out.append(
            dict(
                experiment=name,
                jobs=jobs,
                simulate_h=sim / 3600,
                io_h=io / 3600,
                audit_h=aud / 3600,
                startup_h=jobs * startup / 3600,
                disk_gb=disk / 1024,
            )
        )
    return out


ACCEPTANCE = [
    {"n": 1024, "K": 1},
    {"n": 1024, "K": "sqrt_n"},
    {"n": 4096, "K": 1},
    {"n": 4096, "K": "sqrt_n"},
    {"n": 65536, "K": 1},
]


def acceptance(quick: bool, name: str = "lidp_fig3_eps_vs_n") -> None:
    import pandas as pd

    from dpaudit.audit import run_estimator
    from dpaudit.mechanisms.registry import simulate
    from dpaudit.reproduction import check
    from dpaudit.tables import add_setting_columns

    config = yaml.safe_load((ROOT / "config/paper/lidp.yaml").read_text())
    exp = dict(config["experiments"][name])
    if name == "lidp_fig3_eps_vs_n":
        exp["grid"], exp["points"] = {}, ACCEPTANCE
    seeds = exp["seeds"][:3] if quick else exp["seeds"]
    settings = simulate_settings(exp)
    t0, frames = time.perf_counter(), []
    for setting, params in settings.items():
        for seed in seeds:
            sf = simulate(exp["mechanism"], params, seed=seed, experiment=name, setting=setting)
            for est in exp["estimators"]:
                frames.append(run_estimator(sf, est, config["estimators"][est]))
    seconds = time.perf_counter() - t0
    table = pd.concat([f for f in frames if not f.empty], ignore_index=True)
    table = add_setting_columns(
        table, {s: {k: p[k] for k in ("n", "K", "d")} for s, p in settings.items()}
    )
    keys = ["n", "K", "d", "claimed_epsilon"]
    print(
        f"\n### {name} ({len(settings)} settings), {len(seeds)} seeds, MEASURED: "
        f"{seconds:.0f} s in one process\n"
    )
    print("| " + " | ".join(keys) + " | estimator | eps_hat (mean) | s.e. | reps |")
    print("|" + "---|" * (len(keys) + 4))
    agg = table.groupby([*keys, "estimator"], sort=False)["epsilon"].agg(["mean", "std", "count"])
    for key, r in agg.iterrows():
        se = r["std"] / np.sqrt(r["count"])
        cells = " | ".join(str(v) for v in key)
        print(f"| {cells} | {r['mean']:.3f} | {se:.3f} | {int(r['count'])} |")
    if not exp.get("reproduce"):
        return
    print("\n| check | paper | ours | agrees |")
    print("|---|---|---|---|")
    for spec in exp["reproduce"]:
        c = check(table, spec, name)
        print(f"| {c['quantity']} | {c['paper']:.2f} | {c['ours']:.3f} | {c['agrees']} |")


def main() -> None:
    quick = "--quick" in sys.argv
    if "--acceptance" in sys.argv:
        acceptance(quick)
        return
    if "--experiment" in sys.argv:  # any simulate experiment of the paper config, in-process
        acceptance(quick, sys.argv[sys.argv.index("--experiment") + 1])
        return
    print("### Gram-matrix vs direct sampling, d = 10^4, m = K (measured in this run)\n")
    print("| K | gram s/trial | direct s/trial | speed-up |")
    print("|---|---|---|---|")
    for K, g, dd in sampler_speedup(quick):
        print(f"| {K} | {g:.2e} | {dd:.2e} | {dd / g:.0f}x |")
    print("\n### config/paper/lidp.yaml on one core: EXTRAPOLATED from measured pieces\n")
    print(
        "| experiment | jobs | simulate (h) | score I/O (h) | audit (h) | job start-up (h) "
        "| total (h) | disk (GB) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    tot = dict(jobs=0, simulate_h=0.0, io_h=0.0, audit_h=0.0, startup_h=0.0, disk_gb=0.0)
    for r in grid_estimate(quick):
        total = r["simulate_h"] + r["io_h"] + r["audit_h"] + r["startup_h"]
        for k in tot:
            tot[k] += r[k]
        print(
            f"| {r['experiment']} | {r['jobs']} | {r['simulate_h']:.2f} | {r['io_h']:.2f} | "
            f"{r['audit_h']:.2f} | {r['startup_h']:.2f} | {total:.2f} | {r['disk_gb']:.1f} |"
        )
    total = tot["simulate_h"] + tot["io_h"] + tot["audit_h"] + tot["startup_h"]
    print(
        f"| **all** | {tot['jobs']} | {tot['simulate_h']:.2f} | {tot['io_h']:.2f} | "
        f"{tot['audit_h']:.2f} | {tot['startup_h']:.2f} | **{total:.2f}** | "
        f"{tot['disk_gb']:.1f} |"
    )


if __name__ == "__main__":
    main()
