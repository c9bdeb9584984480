"""Training throughput: a vectorised shard vs Opacus one model at a time (same data and
hyper-parameters), peak memory of a 256-model LeNet shard, and the per-step cost of Opacus
DP-SGD for WRN-16-4 relative to non-private training.

    OMP_NUM_THREADS=1 python benchmarks/bench_training.py [--quick]

Prints markdown tables. Small step counts keep it to a few minutes on one CPU core; ratios are
measured side by side in one run.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
import warnings

import numpy as np
import torch
from torch import nn

from dpaudit.models import build_for_data
from dpaudit.training.vectorized import DPSGDConfig, ShardData, model_seeds, train_shard

MODELS = {
    "logreg": ({"name": "logreg"}, (784,)),
    "mlp": ({"name": "mlp", "hidden": [256, 256]}, (784,)),
    "lenet": ({"name": "lenet"}, (1, 28, 28)),
}


def _data(shape, n=1000, k=10, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, *shape, generator=g), torch.randint(0, k, (n,), generator=g)


def opacus_one_model(spec, shape, x, y, steps, b, sigma, c, lr, seed) -> None:
    """One model trained with Opacus's PrivacyEngine (Poisson DPDataLoader), ``steps`` steps."""
    from opacus import PrivacyEngine
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(seed)
    model = build_for_data(spec, shape, 10)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    loader = DataLoader(TensorDataset(x, y), batch_size=b)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model, opt, loader = PrivacyEngine().make_private(
            module=model,
            optimizer=opt,
            data_loader=loader,
            noise_multiplier=sigma,
            max_grad_norm=c,
            poisson_sampling=True,
        )
    done = 0
    loss_fn = nn.CrossEntropyLoss()
    while done < steps:
        for xb, yb in loader:
            opt.zero_grad()
            if len(xb):
                loss_fn(model(xb), yb).backward()
            opt.step()
            done += 1
            if done == steps:
                break


def throughput(
    name: str, n_models: int, n_opacus: int, steps: int, engine: str = "auto", repeats: int = 3
):
    """Models per second of both paths, timed in ``repeats`` alternating rounds (the machine is
    shared, so load drifts); rates are medians over rounds, the speed-up the median of the
    per-round ratios."""
    spec, shape = MODELS[name]
    x, y = _data(shape)
    b, sigma, c, lr = 100, 1.0, 1.0, 0.1
    cfg = DPSGDConfig(steps, b, b / len(y), sigma, c, lr)
    items = [np.arange(len(y))] * n_models
    seeds = [model_seeds(0, "bench", 0, j) for j in range(n_models)]

    def vec():
        return train_shard(
            lambda: build_for_data(spec, shape, 10),
            ShardData(x, y, items),
            seeds,
            cfg,
            engine=engine,
        )

    # warm-up (first-call overheads)
    train_shard(
        lambda: build_for_data(spec, shape, 10),
        ShardData(x, y, items[:2]),
        seeds[:2],
        DPSGDConfig(1, b, b / len(y), sigma, c, lr),
        engine=engine,
    )
    opacus_one_model(spec, shape, x, y, 1, b, sigma, c, lr, 0)
    rv, ro = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        r = vec()
        rv.append(n_models / (time.perf_counter() - t0))
        t0 = time.perf_counter()
        for j in range(n_opacus):
            opacus_one_model(spec, shape, x, y, steps, b, sigma, c, lr, j)
        ro.append(n_opacus / (time.perf_counter() - t0))
    return {
        "model": name,
        "params": r.meta["n_params"],
        "engine": r.meta["engine"],
        "models_vec": n_models,
        "vec_models_per_s": float(np.median(rv)),
        "opacus_models_per_s": float(np.median(ro)),
        "speedup": float(np.median(np.array(rv) / np.array(ro))),
        "speedup_range": (
            float(min(np.array(rv) / np.array(ro))),
            float(max(np.array(rv) / np.array(ro))),
        ),
        "steps": steps,
    }


def lenet_step_costs(n_models: int, steps: int, repeats: int = 3) -> dict:
    """Seconds per model and step of LeNet-5 at batch 100 (1 thread), measured side by side in
    alternating rounds: a plain non-private SGD step (``nn.Module`` forward, backward,
    ``optimizer.step``), Opacus's DP-SGD step (``GradSampleModule`` + ``DPOptimizer``, no data
    loader), and the vectorised shard (``n_models`` models, ``steps`` Poisson steps, total
    time / (models x steps), so including its sampling and setup). Opacus runs the same
    forward and backward as the plain step plus per-sample gradients, clipping and noise, so
    ``Opacus / plain`` is the speed-up a vectorised engine would get if its per-model work
    cost what plain PyTorch's does; beating that bound means doing the shared work faster."""
    from opacus import GradSampleModule
    from opacus.optimizers import DPOptimizer

    spec, shape = MODELS["lenet"]
    x, y = _data(shape)
    xb, yb = x[:100], y[:100]

    def make(private: bool):
        torch.manual_seed(0)
        model = build_for_data(spec, shape, 10)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        if private:
            model = GradSampleModule(model)
            opt = DPOptimizer(opt, noise_multiplier=1.0, max_grad_norm=1.0, expected_batch_size=100)
        return model, opt

    def per_step(model, opt, n=steps) -> float:
        t0 = time.perf_counter()
        for _ in range(n):
            opt.zero_grad()
            nn.functional.cross_entropy(model(xb), yb).backward()
            opt.step()
        return (time.perf_counter() - t0) / n

    cfg = DPSGDConfig(steps, 100, 0.1, 1.0, 1.0, 0.1)
    seeds = [model_seeds(0, "bench", 0, j) for j in range(n_models)]

    def vec() -> float:
        t0 = time.perf_counter()
        train_shard(
            lambda: build_for_data(spec, shape, 10),
            ShardData(x, y, [np.arange(len(y))] * n_models),
            seeds,
            cfg,
        )
        return (time.perf_counter() - t0) / (n_models * steps)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain, private = make(False), make(True)
        per_step(*plain, 2), per_step(*private, 2)  # warm-up
        rp, ro, rv = [], [], []
        for _ in range(repeats):
            rp.append(per_step(*plain))
            ro.append(per_step(*private))
            rv.append(vec())
    return {
        "plain_s": float(np.median(rp)),
        "opacus_s": float(np.median(ro)),
        "vec_s": float(np.median(rv)),
        "n_models": n_models,
        "steps": steps,
    }


def _peak_rss_child(n_models: int, steps: int) -> None:
    spec, shape = MODELS["lenet"]
    x, y = _data(shape)
    cfg = DPSGDConfig(steps, 100, 0.1, 1.0, 1.0, 0.1)
    seeds = [model_seeds(0, "rss", 0, j) for j in range(n_models)]
    t0 = time.perf_counter()
    train_shard(
        lambda: build_for_data(spec, shape, 10),
        ShardData(x, y, [np.arange(len(y))] * n_models),
        seeds,
        cfg,
    )
    dt = time.perf_counter() - t0
    print(json.dumps({"peak_rss_mib": _peak_rss_mib(), "seconds": dt}))


def _peak_rss_mib() -> float:
    """This process's peak resident set size in MiB: ``VmHWM`` of ``/proc/self/status`` where
    it exists. (Not ``getrusage``'s ``ru_maxrss``: Linux carries it over ``execve``, so a child
    started from a large parent reports the parent's size at the fork.)"""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def peak_rss(n_models: int, steps: int) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--rss-child", str(n_models), str(steps)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def wrn_step_cost(batch: int, steps: int) -> dict:
    """Seconds per step of WRN-16-4 on CIFAR-shaped inputs: Opacus DP-SGD vs plain SGD."""
    from opacus import GradSampleModule
    from opacus.optimizers import DPOptimizer

    x, y = _data((3, 32, 32), n=batch)

    def run(private: bool) -> float:
        torch.manual_seed(0)
        model = build_for_data({"name": "wrn", "depth": 16, "width": 4}, (3, 32, 32), 10)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        if private:
            model = GradSampleModule(model)
            opt = DPOptimizer(
                opt, noise_multiplier=1.0, max_grad_norm=1.0, expected_batch_size=batch
            )
        times = []
        for _ in range(steps + 1):
            t0 = time.perf_counter()
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            times.append(time.perf_counter() - t0)
        return float(np.median(times[1:]))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain, private = run(False), run(True)
    return {"batch": batch, "plain_s": plain, "opacus_s": private, "ratio": private / plain}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer models and steps")
    ap.add_argument("--func", action="store_true", help="also time the torch.func engine")
    ap.add_argument("--rss-child", nargs=2, type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.rss_child:
        _peak_rss_child(*args.rss_child)
        return
    torch.set_num_threads(1)
    steps = 5 if args.quick else 10
    cases = [("logreg", 256, 8), ("mlp", 32, 3), ("lenet", 32, 4)]
    if args.quick:
        cases = [("logreg", 64, 4), ("mlp", 16, 2), ("lenet", 16, 2)]
    print(
        f"## Vectorised shard vs Opacus one model at a time (batch 100, {steps} steps, "
        "1 CPU thread)\n"
    )
    print(
        "| model | params | engine | models in shard | vectorised models/s | "
        "Opacus models/s | speed-up (median of rounds) | range over rounds |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name, m, mo in cases:
        for engine in ("auto", "func"):
            if engine == "func" and not args.func:
                continue
            r = throughput(name, m, mo, steps, engine, repeats=1 if engine == "func" else 3)
            print(
                f"| {r['model']} | {r['params']:,} | {r['engine']} | {r['models_vec']} | "
                f"{r['vec_models_per_s']:.2f} | {r['opacus_models_per_s']:.2f} | "
                f"{r['speedup']:.1f}x | {r['speedup_range'][0]:.1f}-"
                f"{r['speedup_range'][1]:.1f}x |",
                flush=True,
            )
    c = lenet_step_costs(16 if args.quick else 32, steps)
    print(
        "\n## LeNet-5: where the speed-up is bounded (extra table; batch 100, 1 CPU thread, "
        "ms per model and step, medians of 3 alternating rounds)\n"
    )
    print(
        "| plain non-private SGD step | Opacus DP-SGD step | vectorised shard "
        f"({c['n_models']} models, {c['steps']} steps) | Opacus / plain (bound at plain "
        "PyTorch's per-model cost) | Opacus / vectorised |"
    )
    print("|---|---|---|---|---|")
    print(
        f"| {1e3 * c['plain_s']:.2f} | {1e3 * c['opacus_s']:.2f} | {1e3 * c['vec_s']:.2f} | "
        f"{c['opacus_s'] / c['plain_s']:.1f}x | {c['opacus_s'] / c['vec_s']:.1f}x |",
        flush=True,
    )
    n_rss = 64 if args.quick else 256
    r = peak_rss(n_rss, 2)
    print(
        f"\n## Peak memory\n\n{n_rss}-model LeNet-5 shard (batch 100, 2 steps, default chunk): "
        f"peak RSS {r['peak_rss_mib']:.0f} MiB ({r['seconds']:.1f} s)\n"
    )
    w = wrn_step_cost(16 if args.quick else 32, 2 if args.quick else 3)
    print("## WRN-16-4 (CIFAR-10 shape), Opacus DP-SGD vs non-private SGD, per step\n")
    print("| batch | non-private s/step | Opacus s/step | ratio |")
    print("|---|---|---|---|")
    print(f"| {w['batch']} | {w['plain_s']:.2f} | {w['opacus_s']:.2f} | {w['ratio']:.2f}x |")


if __name__ == "__main__":
    main()
