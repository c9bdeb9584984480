"""The clip norm of config/cpu/lidp.yaml's cells, chosen as Pillutla et al. (2023,
arXiv:2305.18447, App. F.2) choose theirs: "tuned per dataset, model and epsilon for validation
accuracy". For each cell (data set, model, learning rate, epochs of the CPU config) and each clip
norm C of the grid, trains ``--models`` DP-SGD models at epsilon 32 with the K = 16 random-gradient
canaries of the audit (canaries do not move accuracy: Fig. 12) on a setting name of its own (so
none of these models is an audit trial) and prints the mean test accuracy; the config takes the
C with the highest one. Only accuracy is printed: the choice does not look at any canary score.

Needs the prepared data sets of the config (``snakemake --cores 1
resources/datasets/lidp_cpu_digits_mlp_randgrad/base.npz
resources/datasets/lidp_cpu_location_mlp_poisoning/base.npz --configfile config/cpu/lidp.yaml
--config data='{mirror: ../shared/data}'``), then

    python benchmarks/lidp_clip_norm_sweep.py [--models 16] [--cells digits_linear ...]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from dpaudit.data.prepare import load_prepared
from dpaudit.training.job import JobId
from dpaudit.training.shard import run_shard

#: cell -> (prepared data set, model, lr, epochs, clip-norm grid), as in config/cpu/lidp.yaml
CELLS = {
    "digits_linear": (
        "lidp_cpu_digits_mlp_randgrad",  # the same digits split
        {"name": "logreg"},
        2.0,
        10,
        (1.0, 2.0, 4.0, 8.0),
    ),
    "digits_mlp": (
        "lidp_cpu_digits_mlp_randgrad",
        {"name": "mlp", "hidden": [64, 64]},
        2.0,
        10,
        (1.0, 2.0, 4.0, 8.0),
    ),
    "location_mlp": (
        "lidp_cpu_location_mlp_poisoning",
        {"name": "mlp", "hidden": [64, 64]},
        1.0,
        5,
        (0.5, 1.0, 2.0, 4.0),
    ),
}


def accuracy(dataset: str, model: dict, lr: float, epochs: int, clip: float, models: int) -> float:
    """Mean test accuracy of ``models`` models trained at epsilon 32 with clip norm ``clip``."""
    data, _ = load_prepared(f"resources/datasets/{dataset}/base.npz")
    spec = {
        "design": "lidp",
        "threat_model": "final_model_cosine",
        "model": model,
        "canaries": {"type": "random_gradient", "k": 16},
        "train": {
            "epochs": epochs,
            "batch_size": 100,
            "lr": lr,
            "max_grad_norm": clip,
            "models_per_shard": models,
        },
        "target_epsilon": 32.0,
    }
    out = run_shard(data, JobId("clip_sweep", f"C{clip}", 0, 0), spec)
    return float(np.mean(out.score_file.meta["test_accuracy_per_model"]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", type=int, default=16)
    ap.add_argument("--cells", nargs="*", default=list(CELLS), choices=list(CELLS))
    args = ap.parse_args()
    torch.set_num_threads(1)
    print("| cell | clip norm C | mean test accuracy | seconds |")
    print("| --- | --- | --- | --- |")
    for cell in args.cells:
        dataset, model, lr, epochs, grid = CELLS[cell]
        for clip in grid:
            t0 = time.perf_counter()
            acc = accuracy(dataset, model, lr, epochs, clip, args.models)
            print(f"| {cell} | {clip:g} | {acc:.3f} | {time.perf_counter() - t0:.0f} |", flush=True)


if __name__ == "__main__":
    main()
