"""Checks of a SLURM run before anything is submitted (the Snakefile's ``onstart`` handler, main
process only): that the status command the profile names can answer, and that every job's
request fits a node of its partition.

Without them a misconfigured cluster makes the run hang silently: SLURM keeps a job whose
request no node of its partition can meet pending forever (reason ``PartitionConfig`` or
``Resources``) unless the site sets ``EnforcePartLimits``, and ``sacct`` on a cluster without an
accounting database answers every status query with an error the plugin keeps retrying.
The checks read ``sinfo`` and run the status command once; each problem names its cause, the
job's rule, and the ``compute`` key (``dpaudit/schema.yaml``) or profile setting to change.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

#: sinfo's per-node line: partition, CPUs, memory (MB), generic resources, time limit
SINFO_FORMAT = "%P|%c|%m|%G|%l"
#: the config key behind each resource of a rule's jobs (rules/common.smk, resources.py)
TRAIN_KEYS = {
    "cpus": "compute.threads_per_training_job",
    "mem_mb": "compute.training_mem_mb",
    "gpus": "compute.gpus_per_training_job",
    "runtime": "compute.training_runtime",
}
JOB_KEYS = {"cpus": "threads", "mem_mb": "compute.job_mem_mb", "runtime": "compute.job_runtime"}


@dataclass(frozen=True)
class Node:
    """What one node of a partition offers (one ``sinfo -N`` line)."""

    cpus: int
    mem_mb: int
    gpus: dict[str | None, int] = field(default_factory=dict)
    time_limit: int | None = None  # minutes; None: no limit


@dataclass(frozen=True)
class Request:
    """What one job asks for (its rule's resources, as Snakemake evaluated them)."""

    rule: str
    partition: str | None
    cpus: int
    mem_mb: int | None
    gpus: int
    gpu_model: str | None
    runtime: int | None


def job_request(job: Any) -> Request:
    """The request of one Snakemake job (its evaluated resources and threads), as the SLURM
    plugin turns it into sbatch options."""
    res = job.resources
    return Request(
        rule=job.rule.name,
        partition=res.get("slurm_partition"),
        cpus=res.get("cpus_per_task") or job.threads,
        mem_mb=res.get("mem_mb"),
        gpus=res.get("gpu") or res.get("gpus") or 0,
        gpu_model=res.get("gpu_model"),
        runtime=res.get("runtime"),
    )


def parse_time_limit(text: str) -> int | None:
    """Minutes of a SLURM time limit (``infinite``, ``MM``, ``MM:SS``, ``HH:MM:SS``,
    ``D-HH[:MM[:SS]]``); None for no limit."""
    text = text.strip()
    if text in ("infinite", "UNLIMITED", "n/a", ""):
        return None
    days, _, rest = text.rpartition("-")
    parts = [int(p) for p in rest.split(":")]
    if not days and len(parts) <= 2:  # MM or MM:SS
        minutes = parts[0] + (parts[1] > 0 if len(parts) == 2 else 0)
    else:  # HH, HH:MM or HH:MM:SS after a day count, HH:MM:SS without one
        parts += [0] * (3 - len(parts))
        minutes = parts[0] * 60 + parts[1] + (parts[2] > 0)
    return int(days or 0) * 24 * 60 + minutes


def parse_gres(text: str) -> dict[str | None, int]:
    """GPUs of a node's ``%G`` (``gpu:a100:4,gpu:v100:2(S:0)``, ``gpu:2``, ``(null)``): count per
    model, None for GPUs without a model, all models together also under None."""
    gpus: dict[str | None, int] = {}
    for item in text.split(","):
        m = re.match(r"gpu(?::([^:(]+))?:(\d+)", item.strip())
        if not m:
            continue
        model, count = m.group(1), int(m.group(2))
        if model is not None:
            gpus[model] = gpus.get(model, 0) + count
        gpus[None] = gpus.get(None, 0) + count
    return gpus


def parse_sinfo(text: str) -> dict[str, list[Node]]:
    """Partition -> its nodes, from ``sinfo -h -N -o SINFO_FORMAT``; the default partition's name
    keeps sinfo's ``*`` mark."""
    out: dict[str, list[Node]] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        part, cpus, mem, gres, limit = line.split("|")
        node = Node(
            cpus=int(re.sub(r"\D.*", "", cpus) or 0),
            mem_mb=int(re.sub(r"\D.*", "", mem) or 0),
            gpus=parse_gres(gres),
            time_limit=parse_time_limit(limit),
        )
        out.setdefault(part.strip(), []).append(node)
    return out


def _fits(req: Request, node: Node) -> bool:
    return (
        req.cpus <= node.cpus
        and (req.mem_mb is None or req.mem_mb <= node.mem_mb)
        and req.gpus <= node.gpus.get(req.gpu_model if req.gpu_model else None, 0)
        and (req.runtime is None or node.time_limit is None or req.runtime <= node.time_limit)
    )


def _describe(nodes: list[Node]) -> str:
    best = max(nodes, key=lambda n: (n.cpus, n.mem_mb))
    gpus = ", ".join(f"{k}:{v}" for k, v in best.gpus.items() if k) or str(best.gpus.get(None, 0))
    limit = "no time limit" if best.time_limit is None else f"time limit {best.time_limit} min"
    return f"{best.cpus} CPUs, {best.mem_mb} MB, GPUs {gpus}, {limit}"


def request_problems(requests: Iterable[Request], partitions: dict[str, list[Node]]) -> list[str]:
    """One line per rule whose jobs no node of their partition can run, naming what is asked,
    what the partition's largest node has, and the config key to change."""
    default = next((p.rstrip("*") for p in partitions if p.endswith("*")), None)
    nodes_of = {p.rstrip("*"): n for p, n in partitions.items()}
    problems: dict[str, str] = {}
    for req in requests:
        part = req.partition or default
        if req.rule in problems:
            continue
        if part is None:
            problems[req.rule] = (
                f"rule {req.rule}: no partition named and the cluster has no default partition; "
                "set one with --default-resources slurm_partition=<partition>"
            )
            continue
        if part not in nodes_of:
            problems[req.rule] = (
                f"rule {req.rule}: partition {part!r} does not exist (sinfo lists "
                f"{sorted(nodes_of)}); change slurm_partition in the profile"
            )
            continue
        nodes = nodes_of[part]
        if any(_fits(req, n) for n in nodes):
            continue
        keys = TRAIN_KEYS if req.rule == "train" else JOB_KEYS
        asked = [f"{req.cpus} CPUs ({keys['cpus']})"]
        if req.mem_mb is not None:
            asked.append(f"{req.mem_mb} MB ({keys['mem_mb']})")
        if req.gpus:
            model = f" {req.gpu_model}" if req.gpu_model else ""
            asked.append(f"{req.gpus}{model} GPUs ({TRAIN_KEYS['gpus']}, compute.gpu_model)")
        if req.runtime is not None:
            asked.append(f"{req.runtime} min ({keys['runtime']})")
        problems[req.rule] = (
            f"rule {req.rule}: its jobs ask partition {part!r} for {', '.join(asked)}, but no node "
            f"there has that (largest: {_describe(nodes)}); they would pend forever. Lower the "
            "compute values named, or send the rule to another partition (slurm_partition)"
        )
    return list(problems.values())


Runner = Callable[..., subprocess.CompletedProcess]

#: how each status command of the plugin is tried: a query for no job in particular
STATUS_PROBES = {
    "squeue": ["squeue", "--noheader", "--format=%i", "--states=all"],
    "sacct": ["sacct", "--noheader", "--allocations", "--format=JobID", "--starttime=now"],
}


def status_command_problem(command: str | None, run: Runner = subprocess.run) -> str | None:
    """Why the plugin's status command (``slurm-status-command``) cannot read job states here,
    or None when it answers."""
    command = command or "sacct"
    argv = STATUS_PROBES.get(command)
    if argv is None:
        return (
            f"slurm-status-command {command!r} is not one dpaudit knows how to check; "
            f"allowed: {sorted(STATUS_PROBES)}"
        )
    try:
        done = run(argv, capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        return f"slurm-status-command {command}: {argv[0]} is not installed or not on PATH"
    except subprocess.TimeoutExpired:
        return f"slurm-status-command {command}: `{' '.join(argv)}` did not answer in 60 s"
    said = " ".join((done.stderr + " " + done.stdout).split())
    if done.returncode != 0 or "accounting storage is disabled" in said:
        hint = (
            "; this cluster has no accounting database: use slurm-status-command: squeue "
            "(profiles/slurm)"
            if "accounting storage is disabled" in said
            else ""
        )
        return (
            f"slurm-status-command {command}: `{' '.join(argv)}` failed (exit "
            f"{done.returncode}): {said[:300] or 'no message'}{hint}"
        )
    return None


def sinfo_nodes(run: Runner = subprocess.run) -> tuple[dict[str, list[Node]] | None, str | None]:
    """The cluster's partitions and nodes, or (None, why sinfo could not list them)."""
    argv = ["sinfo", "--noheader", "--Node", f"--format={SINFO_FORMAT}"]
    try:
        done = run(argv, capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        return None, "sinfo is not installed or not on PATH: is this a SLURM submit host?"
    except subprocess.TimeoutExpired:
        return None, "sinfo did not answer in 60 s: is slurmctld running?"
    if done.returncode != 0:
        return None, f"sinfo failed (exit {done.returncode}): {done.stderr.strip()[:300]}"
    return parse_sinfo(done.stdout), None


def preflight_problems(
    requests: Iterable[Request], status_command: str | None, run: Runner = subprocess.run
) -> list[str]:
    """Every reason the run could not finish on this cluster, found before submission."""
    problems = []
    why = status_command_problem(status_command, run)
    if why:
        problems.append(why)
    partitions, why = sinfo_nodes(run)
    if why:
        problems.append(why)
    else:
        problems += request_problems(requests, partitions)
    return problems
