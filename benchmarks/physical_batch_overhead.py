"""CPU time of a DP-SGD shard with and without example chunking (``compute.max_physical_batch``):
the same shard (LeNet-5 on 28x28 inputs, stacked engine; or the MLP with torch.func) trained
with the whole batch in one pass and in passes of K examples, interleaved repetitions in one
process so that machine load hits every variant alike; prints the median CPU seconds and the
ratio to the unchunked run.

    python benchmarks/physical_batch_overhead.py --chunks 0 128 32 --batch 256 --reps 3
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch
from torch import nn

from dpaudit.models.lenet import LeNet5
from dpaudit.training.samplers import SamplerSpec
from dpaudit.training.vectorized import DPSGDConfig, ShardData, model_seeds, train_shard


def _mlp():
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chunks", type=int, nargs="+", default=[0, 128, 32], help="0: no limit")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--models", type=int, default=8)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--engine", choices=["stacked", "func"], default="stacked")
    args = ap.parse_args()
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    n = 4 * args.batch
    x, y = torch.randn(n, 1, 28, 28, generator=g), torch.randint(0, 10, (n,), generator=g)
    model = LeNet5 if args.engine == "stacked" else _mlp
    cfg = DPSGDConfig(args.steps, args.batch, 0.25, 1.0, 1.0, 0.1, SamplerSpec("shuffle"))
    data = ShardData(x, y, [np.arange(n)] * args.models)
    seeds = [model_seeds(0, "overhead", 0, j) for j in range(args.models)]
    times: dict[int, list[float]] = {k: [] for k in args.chunks}
    for _ in range(args.reps):
        for k in args.chunks:
            t0 = time.process_time()
            train_shard(
                model, data, seeds, cfg, engine=args.engine, max_physical_batch=k or None
            )
            times[k].append(time.process_time() - t0)
    base = statistics.median(times[args.chunks[0]])
    for k in args.chunks:
        med = statistics.median(times[k])
        print(
            f"{args.engine} {model.__name__} M={args.models} B={args.batch} "
            f"max_physical_batch={k or 'none'}: {med:.2f} CPU-s (x{med / base:.2f})"
        )


if __name__ == "__main__":
    main()
