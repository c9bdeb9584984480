"""Peak memory of one DP-SGD step of WRN-16-4 (CIFAR-10 shape) in the vectorised engine as a
function of ``compute.max_physical_batch``: the memory the paper-scale one-run config needs per
example of a pass, measured, to choose the key (config/paper/one_run_training.yaml).

Each measurement runs in a fresh process (peak RSS is per process): one model, a logical batch
of ``--batch`` random images, ``--steps`` steps with noise, torch.func per-sample gradients
(WRN-16-4 is not a plain sequential model), and reports the peak resident memory. The slope of
peak memory over the examples of a pass is the per-example cost; the intercept the model, its
optimiser state and the data. On a GPU the same tensors live in device memory (the CPU
measurement is a proxy: the caching allocator adds some slack).

    python benchmarks/physical_batch_memory.py --chunks 4 8 16 --batch 32
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path


def _vm_hwm_mb() -> float:
    """This process's peak resident memory (``VmHWM``; unlike ``ru_maxrss`` it does not carry
    a parent's size over ``exec``), MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status (Linux only)")


def one(chunk: int | None, batch: int, steps: int, seed: int) -> dict:
    import numpy as np
    import torch

    from dpaudit.models import build_for_data
    from dpaudit.training.samplers import SamplerSpec
    from dpaudit.training.vectorized import DPSGDConfig, ShardData, model_seeds, train_shard

    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(seed)
    n = 4 * batch
    x = torch.randn(n, 3, 32, 32, generator=g)
    y = torch.randint(0, 10, (n,), generator=g)

    def model():
        return build_for_data({"name": "wrn"}, (3, 32, 32), 10)

    cfg = DPSGDConfig(steps, batch, batch / n, 1.0, 1.0, 0.1, SamplerSpec("shuffle"))
    before = _vm_hwm_mb()
    res = train_shard(
        model,
        ShardData(x, y, [np.arange(n)]),
        [model_seeds(seed, "mem", 0, 0)],
        cfg,
        engine="func",
        max_physical_batch=chunk,
    )
    peak = _vm_hwm_mb()
    return {
        "max_physical_batch": chunk,
        "batch": batch,
        "steps": steps,
        "n_params": res.meta["n_params"],
        "peak_rss_mb": peak,
        "rss_before_training_mb": before,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chunks", type=int, nargs="+", default=[4, 8, 16])
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        chunk = None if args.child == 0 else args.child
        print(json.dumps(one(chunk, args.batch, args.steps, args.seed)))
        return
    rows = []
    for chunk in args.chunks:
        cmd = [sys.executable, __file__, "--child", str(chunk), "--batch", str(args.batch)]
        cmd += ["--steps", str(args.steps), "--seed", str(args.seed)]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        rows.append(json.loads(out.strip().splitlines()[-1]))
        print(json.dumps(rows[-1]), flush=True)
    if len(rows) >= 2:
        a, b = rows[0], rows[-1]
        ea = a["max_physical_batch"] or a["batch"]
        eb = b["max_physical_batch"] or b["batch"]
        slope = (b["peak_rss_mb"] - a["peak_rss_mb"]) / (eb - ea)
        print(
            f"per example of a pass: {slope:.1f} MB; intercept "
            f"{a['peak_rss_mb'] - slope * ea:.0f} MB ({rows[0]['n_params']} parameters)"
        )


if __name__ == "__main__":
    main()
