"""Training throughput of config/cpu/lidp.yaml's cells: models per CPU-second of one training
job (``run_shard``, one thread) at several models per job, to size the number of trials n of the
LiDP audit (Pillutla et al. 2023, arXiv:2305.18447, Table 1 is at n = 1000 trials) within the
30-minute CPU budget. CPU time (process time, so it is meaningful on a loaded machine) and the
peak RSS of each job, each in a fresh process so that the peaks do not mix; ``startup`` is the
CPU time of a job with one model (imports, data, the model's set-up).

Needs the prepared data sets (see benchmarks/lidp_clip_norm_sweep.py), then

    python benchmarks/lidp_training_throughput.py [--models 128 256 512] [--cells ...]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

#: cell -> (prepared data set, model, lr, epochs, canaries), as in config/cpu/lidp.yaml
CELLS = {
    "digits_linear": (
        "lidp_cpu_digits_mlp_randgrad",
        {"name": "logreg"},
        2.0,
        10,
        {"type": "random_gradient", "k": 16},
    ),
    "digits_mlp": (
        "lidp_cpu_digits_mlp_randgrad",
        {"name": "mlp", "hidden": [64, 64]},
        2.0,
        10,
        {"type": "random_gradient", "k": 16},
    ),
    "location_mlp": (
        "lidp_cpu_location_mlp_poisoning",
        {"name": "mlp", "hidden": [64, 64]},
        1.0,
        5,
        {
            "type": "clipbkd",
            "k": 16,
            "first_component": 223,
            "last_component": 446,
            "label": 5,
            "scale": 20.0,
        },
    ),
}


def one_job(cell: str, models: int) -> dict:
    """Train one job of ``models`` models of ``cell`` in this process; CPU seconds and peak RSS."""
    import torch

    from dpaudit.data.prepare import load_prepared
    from dpaudit.training.job import JobId
    from dpaudit.training.shard import run_shard

    torch.set_num_threads(1)
    dataset, model, lr, epochs, canaries = CELLS[cell]
    t0 = time.process_time()
    data, _ = load_prepared(f"resources/datasets/{dataset}/base.npz")
    threat = "black_box_loss" if canaries["type"] == "clipbkd" else "final_model_cosine"
    spec = {
        "design": "lidp",
        "threat_model": threat,
        "model": model,
        "canaries": canaries,
        "train": {
            "epochs": epochs,
            "batch_size": 100,
            "lr": lr,
            "max_grad_norm": 2.0,
            "models_per_shard": models,
            "eval_examples": 359,
        },
        "target_epsilon": 32.0,
    }
    run_shard(data, JobId("throughput", f"m{models}", 0, 0), spec)
    cpu = time.process_time() - t0
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"cpu_s": cpu, "rss_mb": rss_mb}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", type=int, nargs="*", default=[1, 128, 256, 512])
    ap.add_argument("--cells", nargs="*", default=list(CELLS), choices=list(CELLS))
    ap.add_argument("--one", nargs=2, metavar=("CELL", "MODELS"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one_job(args.one[0], int(args.one[1]))))
        return
    print("| cell | models per job | CPU s (job, training part) | peak RSS MB | models per CPU-s |")
    print("| --- | --- | --- | --- | --- |")
    for cell in args.cells:
        for m in args.models:
            cmd = [sys.executable, __file__, "--one", cell, str(m)]
            r = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
            print(
                f"| {cell} | {m} | {r['cpu_s']:.1f} | {r['rss_mb']:.0f} | {m / r['cpu_s']:.1f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
