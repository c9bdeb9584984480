"""What each job asks a cluster scheduler for (the rules' ``resources:``), from the config's
``compute`` block, the only place their values live (``dpaudit/schema.yaml``).

Snakemake hands these to the executor: the SLURM profile (``profiles/slurm``) turns ``runtime``
into ``-t``, ``mem_mb`` into ``--mem``, the rule's ``threads`` into ``--cpus-per-task`` and
``gpu`` / ``gpu_model`` into ``--gpus=[<model>:]<n>``. CPUs are declared as ``threads``, not as
a ``cpus_per_task`` resource: Snakemake sums resources over the jobs a group job runs side by
side and bounds that sum only for ``threads`` (by the profile's ``cores``), so a
``cpus_per_task`` resource would make a group job ask for more CPUs than a node has. A local run
ignores all of these but ``threads``.
"""

from __future__ import annotations

from typing import Any

Config = dict[str, Any]


def training_resources(config: Config) -> dict[str, Any]:
    """Resources of one ``train`` job: ``compute.training_runtime`` minutes,
    ``compute.training_mem_mb`` and ``compute.gpus_per_training_job`` GPUs, of model
    ``compute.gpu_model`` when one is named and a GPU is asked for (a model with zero GPUs would
    make the plugin ask for ``<model>:0``)."""
    compute = config["compute"]
    res: dict[str, Any] = {
        "runtime": compute["training_runtime"],
        "mem_mb": compute["training_mem_mb"],
        "gpu": compute["gpus_per_training_job"],
    }
    if compute["gpus_per_training_job"] > 0 and compute.get("gpu_model"):
        res["gpu_model"] = compute["gpu_model"]
    return res


def job_resources(config: Config) -> dict[str, Any]:
    """Resources of every other job (one thread): ``compute.job_runtime`` minutes and
    ``compute.job_mem_mb``."""
    compute = config["compute"]
    return {"runtime": compute["job_runtime"], "mem_mb": compute["job_mem_mb"]}
