"""Measured CPU cost of every kind of training job of the paper configs, at the paper's model
and data shape: peak resident memory against the examples of one pass, and seconds per
example and DP-SGD step (per model); on a GPU also the wall time per example and step and
the peak GPU memory.

    nice -n 10 python benchmarks/paper_job_costs.py [config/paper/X_training.yaml ...] \
        [--passes 8 64] [--steps 3] [--json out.json]

For each config (default: every ``config/paper/*_training.yaml``) it takes the first setting
of each kind of :func:`dpaudit.pipeline.miniature.job_kinds`, prepares its data set from
small files in the real format (:func:`dpaudit.data.fixtures.make_mirror`, the shape of the
real data), and trains it through the pipeline's own job function
(:func:`dpaudit.training.job.train_job`, the run spec of
:func:`dpaudit.pipeline.params.train_params`) in a fresh process per measurement (peak RSS,
``VmHWM``, is per process) with: the paper's model, optimizer, canaries, sampler, threat model
and tuning protocol; ``--steps`` steps (epochs where only whole epochs run: 4 steps each);
one model per job (a tuning job: one trial); logical batch twice the pass, so each step makes
two passes; passes of P/2 and P examples, P the paper's pass capped by ``--passes`` (WRN-16-4:
8, as a pass of 1,024 examples would take 22 GB here; other models: 64).

Per kind it prints: the peak RSS at each pass size, the slope (MB per example of a pass: the
per-sample gradients and activations), the intercept (model, optimizer state, data, Python),
the memory extrapolated to the paper's physical batch (``train.max_physical_batch``, else the
logical batch), and the seconds per example and step (training only: the CPU time of
``train_job``, robust to a loaded machine, less that of the same job with one step, over the
other steps' examples; one thread; a tuning job's trial trains K candidate runs, so its number
is per trial, and the line adds it per run, K being the trial's ``candidate_runs``). The
numbers feed the per-model table of :mod:`dpaudit.pipeline.preflight` and, through
``benchmarks/paper_config_hours.py``, the GPU-hour and memory lines of the paper configs'
headers (BENCHMARKS.md, "Paper-scale jobs on the CPU"). ``--only EXPERIMENT/SETTING ...``
measures only the kinds whose first setting is one of these (a re-run at more ``--steps``).
"""

from __future__ import annotations

import argparse
import copy
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _vm_hwm_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status (Linux only)")


def _patch_fake_data(cifar_md5: dict[str, str], rows: dict[str, int]) -> None:
    """The fake files' CIFAR batch MD5s and table row counts (benchmarks/paper_miniature.py)."""
    import dataclasses

    from dpaudit.data import tabular
    from dpaudit.opacus_import import import_torchvision

    tvd = import_torchvision().datasets

    if cifar_md5:
        tvd.CIFAR10.train_list = [
            [f"data_batch_{i}", cifar_md5[f"data_batch_{i}"]] for i in range(1, 6)
        ]
        tvd.CIFAR10.test_list = [["test_batch", cifar_md5["test_batch"]]]
        tvd.CIFAR10.meta = {**tvd.CIFAR10.meta, "md5": cifar_md5["batches.meta"]}
    for name, n in rows.items():
        tabular.TABULAR_DATASETS[name] = dataclasses.replace(tabular.TABULAR_DATASETS[name], rows=n)


def child(job: dict) -> dict:
    """One measurement (run in its own process): train the job, report peak RSS and time."""
    import torch

    from dpaudit.data.prepare import load_prepared
    from dpaudit.training.job import train_job

    torch.set_num_threads(1)
    data = load_prepared(job["dataset"])[0]
    before = _vm_hwm_mb()
    cuda = job.get("device", "cpu").startswith("cuda")
    if cuda:
        torch.cuda.synchronize()
    wall = time.perf_counter()  # wall time: on a GPU, CPU time is not the job's time
    start = time.process_time()  # CPU time: one torch thread, robust to other load
    sf = train_job(
        data,
        experiment=job["experiment"],
        setting=job["setting"],
        seed=0,
        shard=0,
        run_spec=job["run"],
        out=job["out"],
        device=job.get("device", "cpu"),
        checkpoint=False,
        max_physical_batch=job["physical"],
    )
    seconds = time.process_time() - start
    if cuda:
        torch.cuda.synchronize()
    wall = time.perf_counter() - wall
    gpu = torch.cuda.max_memory_allocated() / 2**20 if cuda else None
    return {
        "peak_gpu_mb": gpu,
        "seconds": seconds,
        "wall_seconds": wall,
        "peak_rss_mb": _vm_hwm_mb(),
        "rss_data_mb": before,
        "trials": sf.n_trials,
    }


def load_paper(paper: Path) -> dict:
    """The validated config of ``paper`` over the defaults (without their experiments)."""
    from snakemake.utils import update_config

    from dpaudit.config import load_config_file, validate_config

    base = load_config_file(REPO / "config" / "config.yaml")
    base.pop("experiments", None)
    update_config(base, load_config_file(paper))
    return validate_config(base, cross_checks=False)


def measured_runs(config: dict, experiment: str, setting: str) -> int:
    """Candidate runs of the one-trial tuning job measured for ``setting`` (1: no tuning): K
    as the job draws it (:func:`dpaudit.training.tuning.plan_for_job`, seed 0, shard 0)."""
    from dpaudit.pipeline.settings import setting_experiment
    from dpaudit.training.spec import JobId
    from dpaudit.training.tuning import plan_for_job

    block = setting_experiment(config["experiments"][experiment], setting)
    if not block.get("selection"):
        return 1
    sel = {**block["selection"], "trials": 1}
    return plan_for_job(sel, JobId(experiment, setting, 0, 0)).n_runs


def _measure(job: dict) -> dict:
    cmd = [sys.executable, __file__, "--child", json.dumps(job)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{job['experiment']}/{job['setting']}: {done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _epochs_only(run: dict) -> bool:
    """Shuffled batches and the per-step likelihood ratio need whole epochs."""
    return run["train"]["sampler"] != "poisson" or run["canaries"]["statistic"] != "sum"


def _bench_run(run: dict, batch: int, steps: int) -> dict:
    """The paper run spec with ``steps`` steps (epochs, where only whole epochs run) of
    ``batch`` examples, one model (one trial)."""
    run = copy.deepcopy(run)
    train = run["train"]
    train.update(batch_size=batch, models_per_shard=1, eval_examples=16)
    if _epochs_only(run):
        train.update(steps=None, epochs=steps)
    else:
        train.update(steps=steps)
    train["model_chunk"] = None
    c = run["canaries"]
    if run["design"] == "one_run":
        c["m"] = min(c["m"], 16)
    if run["design"] == "lidp":
        c["k"] = min(c["k"], 4)
    if train.get("buffer_size"):
        train["buffer_size"] = min(train["buffer_size"], batch * 2)
    if c.get("prefix_batches"):
        c["prefix_batches"] = 1
    if run.get("selection"):
        run["selection"] = {**run["selection"], "trials": 1}
    return run


def measure_config(
    paper: Path,
    passes: list[int],
    steps: int,
    work: Path,
    device: str = "cpu",
    only: list[str] | None = None,
) -> list[dict]:
    """Every kind of ``paper`` (``only``: the kinds whose first setting is one of these
    ``experiment/setting``), measured; one row per kind."""
    from dpaudit.data import fixtures
    from dpaudit.data.prepare import prepare_dataset
    from dpaudit.pipeline import miniature
    from dpaudit.pipeline.params import max_physical_batch, train_params
    from dpaudit.pipeline.settings import setting_experiment

    config = load_paper(paper)
    kinds = miniature.job_kinds(config)
    if only:
        kinds = {k: j for k, j in kinds.items() if "/".join(j[0]) in only}
        if not kinds:
            raise ValueError(f"--only {only}: no kind of {paper.name} has that first setting")
    # passes of each kind: the paper's pass, at most CAP examples (a WRN-16-4 pass of 1,024
    # examples would take 22 GB here), and half of it; batches of two passes
    plans = {}
    for kind, jobs in kinds.items():
        exp, setting = jobs[0]
        block = setting_experiment(config["experiments"][exp], setting)
        paper_physical = max_physical_batch(config, exp) or int(block["train"]["batch_size"])
        cap = passes[1] if block["model"]["name"] == "wrn" else passes[2]
        top = max(2, min(paper_physical, cap))
        plans[kind] = (exp, setting, block, paper_physical, [top // 2, top])
    biggest: dict[str, int] = {}
    for _exp, _setting, block, _, ps in plans.values():
        name = block["dataset"]["name"]
        biggest[name] = max(biggest.get(name, 0), 2 * ps[-1])
    mirror = work / "mirror"
    cifar_md5: dict[str, str] = {}
    rows: dict[str, int] = {}
    sums: dict[str, dict] = {}
    for name in miniature.mirror_datasets(config):
        if name not in biggest:  # no kind of it measured (--only)
            continue
        tab = name in ("location", "purchase")
        # a two-class subset keeps a fifth of a ten-class file; 4 batches of training records
        n_train, n_test = (
            (5 * 4 * biggest[name], 400) if not tab else (4 * biggest[name] + 200, 120)
        )
        info = fixtures.make_mirror(mirror, name, n_train=n_train, n_test=n_test, seed=1)
        cifar_md5.update(info.get("member_md5") or {})
        if tab:
            rows[name] = n_train + n_test
            sums[name] = {"sha256": info["checksums"][f"dataset_{name}.tgz"]}
        else:
            sums[name] = {"checksums": info["checksums"]}
    _patch_fake_data(cifar_md5, rows)
    out = []
    for kind, (exp, setting, block, paper_physical, kind_passes) in plans.items():
        dataset = {k: v for k, v in block["dataset"].items() if v is not None}
        dataset.update(sums[dataset["name"]])
        dataset["n_train"] = 4 * 2 * kind_passes[-1]
        for key in ("canary_pool", "n_test"):
            if dataset.get(key):
                dataset[key] = min(dataset[key], 60)
        name = dataset.pop("name")
        dataset_n = dataset["n_train"]
        prepared = work / f"{exp}.{setting}.npz"
        if not prepared.exists():
            prepare_dataset(name, dataset, str(work / "downloads"), str(mirror), str(prepared))
        run = train_params(config, exp, setting)
        row = {
            "config": paper.name,
            "kind": miniature.describe_kind(kind),
            "experiment": exp,
            "setting": setting,
            "paper_batch": int(block["train"]["batch_size"]),
            "paper_physical": paper_physical,
            "candidate_runs": measured_runs(config, exp, setting),
            "points": [],
        }
        for p in kind_passes:
            job = {
                "dataset": str(prepared),
                "experiment": exp,
                "setting": setting,
                "out": str(work / "out.npz"),
                "physical": p,
                "device": device,
            }
            one = (
                _measure({**job, "run": _bench_run(run, 2 * p, 1)})
                if p == kind_passes[-1]
                else None
            )
            got = _measure({**job, "run": _bench_run(run, 2 * p, steps)})
            got["physical"] = p
            if one is not None:  # the steps after the first (epoch), per example
                per = max(1, round(dataset_n / (2 * p))) if _epochs_only(run) else 1
                examples = (steps - 1) * per * 2 * p
                got["s_per_example_step"] = (got["seconds"] - one["seconds"]) / examples
                got["wall_s_per_example_step"] = (
                    got["wall_seconds"] - one["wall_seconds"]
                ) / examples
            row["points"].append(got)
        a, b = row["points"][0], row["points"][-1]
        slope = (b["peak_rss_mb"] - a["peak_rss_mb"]) / (b["physical"] - a["physical"])
        row["mb_per_example"] = slope
        row["intercept_mb"] = a["peak_rss_mb"] - slope * a["physical"]
        row["mb_at_paper_physical"] = row["intercept_mb"] + slope * paper_physical
        if a.get("peak_gpu_mb") and b.get("peak_gpu_mb"):  # the same line, GPU memory
            g = (b["peak_gpu_mb"] - a["peak_gpu_mb"]) / (b["physical"] - a["physical"])
            row["gpu_mb_per_example"] = g
            row["gpu_mb_at_paper_physical"] = b["peak_gpu_mb"] + g * (
                paper_physical - b["physical"]
            )
        row["s_per_example_step"] = b.get("s_per_example_step")
        row["wall_s_per_example_step"] = b.get("wall_s_per_example_step")
        out.append(row)
        print(
            f"{paper.name:28s} {row['kind'][:90]:90s} | RSS {a['peak_rss_mb']:.0f}/"
            f"{b['peak_rss_mb']:.0f} MB at {a['physical']}/{b['physical']} | "
            f"{slope:.2f} MB/ex | {row['mb_at_paper_physical']:.0f} MB at {paper_physical} | "
            f"{row['s_per_example_step'] * 1e3:.2f} ms/ex-step (CPU), "
            f"{row['wall_s_per_example_step'] * 1e3:.3f} wall"
            + (
                f" (a trial of {row['candidate_runs']} runs: "
                f"{row['s_per_example_step'] / row['candidate_runs'] * 1e3:.3f} ms per run)"
                if row["candidate_runs"] > 1
                else ""
            )
            + (
                f" | GPU peak {a['peak_gpu_mb']:.0f}/{b['peak_gpu_mb']:.0f} MB, "
                f"{row['gpu_mb_per_example']:.2f} MB/ex, "
                f"{row['gpu_mb_at_paper_physical']:.0f} MB at {paper_physical}"
                if "gpu_mb_per_example" in row
                else ""
            ),
            flush=True,
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("configs", nargs="*", type=Path)
    ap.add_argument(
        "--passes", type=int, nargs=2, default=[8, 64], help="largest pass: WRN, other models"
    )
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--device", default="cpu", help="cuda: also the peak GPU memory")
    ap.add_argument("--only", nargs="*", default=None, help="kinds by first experiment/setting")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        job = json.loads(args.child)
        _patch_fake_data({}, {})
        print(json.dumps(child(job)))
        return
    configs = args.configs or sorted((REPO / "config" / "paper").glob("*_training.yaml"))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for paper in configs:
            caps = [0, *args.passes]
            work = Path(tmp) / paper.stem
            rows += measure_config(paper, caps, args.steps, work, args.device, args.only)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
