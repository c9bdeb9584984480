"""Device choice: CUDA when present, unless the config names a device; on a cluster, only the
GPUs the scheduler gave the job."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

import torch

log = logging.getLogger(__name__)


def resolve_device(device: str = "auto") -> torch.device:
    """``auto`` picks ``cuda`` when a GPU is visible, else ``cpu``; anything else is used as is."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def training_device(
    device: str,
    gpus: int,
    environ: Mapping[str, str] | None = None,
    cuda_available: bool | None = None,
) -> str:
    """The device one training job uses, given ``compute.device`` and the GPUs it asked for
    (``compute.gpus_per_training_job``).

    A device the config names is used as is. ``auto``: inside a SLURM job (``SLURM_JOB_ID``) a
    job that asked for no GPU uses the CPU even if the node has GPUs (they belong to other
    jobs); a job that asked for GPUs uses ``cuda`` (SLURM sets ``CUDA_VISIBLE_DEVICES`` to the
    GPUs it allocated, so ``cuda`` is the first of them) and falls back to the CPU with a
    warning when none is visible. Outside SLURM, ``auto`` keeps :func:`resolve_device`'s
    choice."""
    env = os.environ if environ is None else environ
    if device != "auto":
        return device
    visible = torch.cuda.is_available() if cuda_available is None else cuda_available
    if "SLURM_JOB_ID" in env and gpus == 0:
        return "cpu"
    if gpus > 0 and not visible:
        log.warning(
            "compute.gpus_per_training_job is %d but no GPU is visible "
            "(CUDA_VISIBLE_DEVICES=%r): training on the CPU",
            gpus,
            env.get("CUDA_VISIBLE_DEVICES"),
        )
        return "cpu"
    return "cuda" if visible else "cpu"
