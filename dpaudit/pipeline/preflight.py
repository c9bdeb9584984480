"""Preflight of a run: what a paper-scale run can know before any job, checked before any job.

A paper config books hours of GPU time; these checks stop it in the first second instead, each
with a message naming the config key and the fix:

* :func:`batch_problems`: a training batch (``train.batch_size``) larger than the records it is
  drawn from (the training set and the expected inserted canaries), which would train every step
  on all of them, at sample rate 1, without saying so;
* :func:`checksum_problems`: a data set whose checksum the user must supply (Purchase-100:
  nothing is pinned, ``checksum_required`` in :mod:`dpaudit.data.catalog`) still carries the
  all-zero placeholder :data:`PLACEHOLDER_SHA256` the paper configs ship with (they validate
  and dry-run with it; ``prepare_dataset`` would fail on it later, after other jobs ran);
* :func:`memory_problems`: a training job's pass (``train.max_physical_batch``, else
  ``compute.max_physical_batch``, else the whole batch) cannot fit the declared GPU memory
  ``compute.gpu_mem_mb`` by the measured per-example cost of its model (:data:`MEASURED`);
* :func:`gpu_resource_problems`: on a cluster executor, a training job that asks the
  scheduler for no GPU (``compute.gpus_per_training_job: 0``, or a profile's
  ``set-resources``) although on the CPU it would run longer than its
  ``compute.training_runtime`` by the measured cost per example and step.

``rules/common.smk`` runs the first three after the config checks, before the DAG, unless the run
is a dry run (a dry run of a paper config with the placeholder checksum must still work: CI
dry-runs every config); the Snakefile's ``onstart`` runs the third on the DAG's training jobs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from dpaudit.data.catalog import CATALOG, known_n_train
from dpaudit.pipeline.settings import setting_experiment, train_setting_specs

#: The placeholder the paper configs carry where the user must put a checksum in.
PLACEHOLDER_SHA256 = "0" * 64


class PreflightError(ValueError):
    """A run that cannot succeed as configured; the message lists every problem."""


@dataclass(frozen=True)
class JobCost:
    """Measured cost of one training job's model on its data shape (one model): peak resident
    memory on the CPU ``intercept_mb + mb_per_example x`` (examples of one pass),
    ``s_per_example_step`` CPU seconds per example and DP-SGD step (one core) and, where it was
    measured on a GPU, the peak GPU memory ``gpu_intercept_mb + gpu_mb_per_example x``."""

    mb_per_example: float
    intercept_mb: float
    s_per_example_step: float
    gpu_mb_per_example: float | None = None
    gpu_intercept_mb: float | None = None

    def gpu_line(self) -> tuple[float, float]:
        """(MB per example, intercept MB) of the GPU memory: the GPU's own measurement where
        there is one, else the CPU's resident memory (the same tensors; an upper bound where
        both were measured: WRN-16-4 18.4 MB per example on the GPU, 24-41 on the CPU)."""
        if self.gpu_mb_per_example is not None and self.gpu_intercept_mb is not None:
            return self.gpu_mb_per_example, self.gpu_intercept_mb
        return self.mb_per_example, self.intercept_mb


#: Measured by ``benchmarks/paper_job_costs.py`` (BENCHMARKS.md, "Paper-scale jobs on the
#: CPU" and "... on a GPU"), keyed by (data set, model) as
#: :func:`dpaudit.pipeline.miniature.setting_kind` names them: the largest cost over the kinds
#: of that pair. WRN-16-4's GPU line: an NVIDIA H200, passes of 512 and 1,024 examples, peak
#: ``torch.cuda.max_memory_allocated`` 9,642 and 19,081 MB (the same for all five kinds), so
#: 18.44 MB per example and 201 MB, plus 1,024 MB for the CUDA context and the caching
#: allocator's slack, which that counter leaves out (an allowance, not a measurement).
MEASURED: dict[tuple[str, str], JobCost] = {
    # CPU: the largest of the five WRN-16-4 kinds: in_distribution (passes of 4 and 8
    # examples: 986 and 1150 MB) and mislabeled (65.3 ms per example and step)
    ("cifar10", "wrn"): JobCost(40.99, 822.0, 0.06525, 18.44, 201.0 + 1024.0),
    # the rest: one model per job on the CPU, issue 27's runs at more steps (BENCHMARKS.md);
    # each field the largest over the pair's kinds (a slope below zero counts as 0, the
    # intercept then the peak at the larger pass; a tuning kind's time per candidate run)
    ("cifar10", "cnn"): JobCost(3.50, 837.0, 0.00569),  # 3 epochs: 5.69 ms; 10 epochs: 4.11
    ("fashionmnist", "lenet"): JobCost(0.26, 811.0, 0.000159),  # shuffling and selection
    ("fashionmnist", "logreg"): JobCost(0.01, 910.0, 0.000021),  # LiDP, random gradient
    ("fashionmnist", "mlp-256-256"): JobCost(0.0, 2231.0, 0.000198),
    ("purchase", "mlp-256-256"): JobCost(0.04, 2227.0, 0.000200),
    ("location", "mlp-32"): JobCost(0.0, 799.0, 0.000018),
}


def _model_key(block: dict[str, Any]) -> tuple[str, str]:
    from dpaudit.pipeline.miniature import setting_kind

    kind = dict(setting_kind(block, 1.0))
    return kind["dataset"], kind["model"]


def _train_settings(config: dict[str, Any]) -> Iterable[tuple[str, str, dict[str, Any]]]:
    for name, block in (config.get("experiments") or {}).items():
        if block.get("kind") != "train" or (block.get("train") or {}).get("entry_point"):
            continue
        for setting in train_setting_specs(block):
            yield name, setting, setting_experiment(block, setting)


def _n_train(block: dict[str, Any]) -> int:
    """The training records of a setting's block: ``dataset.n_train`` (the synthetic default
    when null), else, for real data taken whole, the catalog's training split (or all its rows):
    at least as many as the prepared data will hold after any class filter."""
    n_train = known_n_train(block["dataset"])
    if n_train is None:
        data = CATALOG[block["dataset"]["name"]]
        n_train = data.splits[0] if data.splits else int(data.rows or 0)
    return int(n_train)


def batch_problems(config: dict[str, Any]) -> list[str]:
    """A train experiment whose ``train.batch_size`` exceeds the records a batch is drawn from
    (:meth:`dpaudit.training.spec.RunSpec.nominal_records`: the training set plus the expected
    inserted canaries): its sample rate would be cut to 1 silently. A batch of exactly that
    many is the full batch on purpose and passes."""
    from dpaudit.training.spec import RunSpec

    found: dict[tuple[str, int, int], list[str]] = {}
    for name, setting, block in _train_settings(config):
        records = RunSpec.from_block(block, 1.0).nominal_records(_n_train(block))
        batch = int(block["train"]["batch_size"])
        if batch > records:
            found.setdefault((name, batch, records), []).append(setting)
    return [
        f"config key experiments.{name}.train.batch_size: {batch} is larger than the {records} "
        f"records a batch is drawn from (dataset.n_train and the expected inserted canaries; "
        f"settings {', '.join(settings)}), so every step would take all of them, at sample "
        f"rate 1; allowed: at most {records} (exactly {records}: the full batch)"
        for (name, batch, records), settings in found.items()
    ]


def checksum_problems(config: dict[str, Any]) -> list[str]:
    """A data set that needs a user-supplied checksum and still has the placeholder."""
    out = []
    for name, block in (config.get("experiments") or {}).items():
        if block.get("kind") != "train":
            continue
        dataset = block.get("dataset") or {}
        data = CATALOG.get(dataset.get("name", ""))
        if data is None or not data.checksum_required:
            continue
        value = dataset.get(data.checksum_key)
        if isinstance(value, str) and value.strip("0") == "":
            out.append(
                f"config key experiments.{name}.dataset.{data.checksum_key}: the placeholder "
                f"{value[:8]}... stands where the SHA-256 of {data.filename} must go; nothing is "
                f"pinned for {data.name} (docs/data.md), so put in `sha256sum {data.filename}` "
                "of a download you checked"
            )
    return out


def physical_batch(config: dict[str, Any], block: dict[str, Any]) -> int:
    """Examples per model of one pass of a training job of ``block`` (a setting's block)."""
    train = block["train"]
    limit = train.get("max_physical_batch") or config.get("compute", {}).get("max_physical_batch")
    batch = int(train["batch_size"])
    return min(batch, int(limit)) if limit else batch


def memory_problems(
    config: dict[str, Any], measured: dict[tuple[str, str], JobCost] | None = None
) -> list[str]:
    """Training jobs whose pass cannot fit ``compute.gpu_mem_mb`` (None: not declared, no
    check) by the measured cost of their model; one line per experiment."""
    limit = (config.get("compute") or {}).get("gpu_mem_mb")
    measured = MEASURED if measured is None else measured
    if not limit:
        return []
    out, seen = [], set()
    for name, setting, block in _train_settings(config):
        cost = measured.get(_model_key(block))
        if cost is None or name in seen:
            continue
        chunk = int(block["train"].get("model_chunk") or 1)
        examples = physical_batch(config, block) * chunk
        per_example, intercept = cost.gpu_line()
        need = intercept + per_example * examples
        if need <= limit:
            continue
        seen.add(name)
        fits = max(0, math.floor((limit - intercept) / (per_example * chunk)))
        where = f"experiments.{name}.train.max_physical_batch"
        out.append(
            f"config key {where}: setting {setting} puts {examples} examples through "
            f"{_model_key(block)[1]} at once, about {need:,.0f} MB by the measured "
            f"{per_example:.2f} MB per example + {intercept:.0f} MB "
            f"(BENCHMARKS.md), more than compute.gpu_mem_mb = {limit:,}; allowed: a pass of at "
            f"most {fits} examples"
        )
    return out


def mean_tuning_runs(selection: dict[str, Any]) -> float:
    """E[K], the candidate runs of one tuning trial: K ~ TNB(eta, nu) (Papernot and Steinke
    2022, arXiv:2110.03620, Definition 1; Xiang, Wang, Wang 2024, arXiv:2402.13087, Section 4)."""
    from dpaudit.accounting.run_counts import TruncatedNegativeBinomial

    return TruncatedNegativeBinomial(float(selection["eta"]), float(selection["nu"])).mean()


def cpu_seconds(config: dict[str, Any], block: dict[str, Any], cost: JobCost) -> float:
    """A training job's seconds on one CPU core by the measured cost (per model, one run):
    steps x batch x models, a tuning job's models its trials x E[K] candidate runs."""
    from dpaudit.training.spec import RunSpec

    spec = RunSpec.from_block(block, 1.0)
    steps = spec.schedule(_n_train(block)).steps
    models = int(block["train"].get("models_per_shard") or 1)
    if block["design"] == "one_run" or block["train"].get("engine") == "opacus":
        models = 1
    if block.get("selection"):  # a trial trains K ~ TNB(eta, nu) candidate runs
        models = int(block["selection"]["trials"]) * mean_tuning_runs(block["selection"])
    return steps * int(block["train"]["batch_size"]) * models * cost.s_per_example_step


def gpu_resource_problems(
    config: dict[str, Any],
    train_gpus: dict[str, int],
    measured: dict[tuple[str, str], JobCost] | None = None,
) -> list[str]:
    """On a cluster: experiments whose training jobs ask for no GPU (``train_gpus``:
    experiment -> the GPUs its jobs ask the scheduler for, from the DAG) but would outlast
    ``compute.training_runtime`` on one CPU core by the measured cost."""
    measured = MEASURED if measured is None else measured
    runtime_s = 60 * int((config.get("compute") or {}).get("training_runtime") or 0)
    out, seen = [], set()
    for name, setting, block in _train_settings(config):
        cost = measured.get(_model_key(block))
        if name in seen or name not in train_gpus or train_gpus[name] > 0 or cost is None:
            continue
        seconds = cpu_seconds(config, block, cost)
        if seconds <= runtime_s:
            continue
        seen.add(name)
        out.append(
            f"config key compute.gpus_per_training_job: the training jobs of experiments.{name} "
            f"ask the cluster for no GPU, but setting {setting} would take about "
            f"{seconds / 3600:,.1f} CPU-hours (measured {cost.s_per_example_step * 1e3:.2f} ms "
            f"per example and step, BENCHMARKS.md), more than compute.training_runtime = "
            f"{runtime_s // 60} minutes; allowed: compute.gpus_per_training_job >= 1 (and a GPU "
            "partition in the profile's set-resources)"
        )
    return out


def check_config(config: dict[str, Any]) -> None:
    """The checks that need only the config; raise :class:`PreflightError` listing them."""
    problems = batch_problems(config) + checksum_problems(config) + memory_problems(config)
    if problems:
        lines = "\n".join(f"  - {p}" for p in problems)
        raise PreflightError(f"preflight: this run cannot succeed as configured:\n{lines}")
