"""The Opacus engine of a training job: one model, from config blocks to a score file.

The reference the vectorised engine (:mod:`dpaudit.training.shard`) is tested against; run
through :func:`dpaudit.training.job.train_job` with ``train.engine: opacus`` (design
``one_run``, ``random_input`` canaries, black-box loss, Poisson sampling; see
:mod:`dpaudit.training.dpsgd` for the training loop).

The experiment's canaries (their inputs and labels) depend only on the canary seed, so every
setting audits the same canaries; the coins (who is IN), the initialisation, the batches and
the noise depend on the run seed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from dpaudit.canaries.inclusion import fair_coins
from dpaudit.canaries.input_space import random_inputs
from dpaudit.keys import CLAIMED_EPSILON
from dpaudit.models import build_for_data
from dpaudit.scores import ScoreFile, one_run_meta
from dpaudit.seeding import derive_seed
from dpaudit.training.canary_scores import check_finite_scores
from dpaudit.training.dpsgd import summary, train_with_canaries
from dpaudit.training.spec import JobId, RunSpec

CANARY_TYPES = ("random_input",)


def make_canaries(data: dict[str, np.ndarray], spec: Mapping[str, Any]) -> tuple[np.ndarray, ...]:
    """The canary inputs and labels of ``spec`` (type, m, seed, ...)."""
    kind = spec["type"]
    if kind == "random_input":
        n_features = int(np.prod(data["x_train"].shape[1:]))
        n_classes = int(data["y_train"].max()) + 1
        x, y = random_inputs(
            spec["m"], n_features, n_classes, spec.get("scale", 1.0), spec.get("seed", 0)
        )
        return x.reshape((spec["m"], *data["x_train"].shape[1:])), y
    raise ValueError(f"unknown canary type {kind!r}; allowed: {list(CANARY_TYPES)}")


def claimed_epsilons(result, delta: float) -> dict[str, float | None]:
    """Every accountant's epsilon for the run's (noise multiplier, sample rate, steps), so the
    audit table can show them side by side (null for a run without noise)."""
    from dpaudit.accounting.dpsgd import EPSILON_ACCOUNTANTS, accountant_table

    if result.claimed_epsilon is None or result.noise_multiplier <= 0:
        return {name: None for name in EPSILON_ACCOUNTANTS}
    table = accountant_table(result.noise_multiplier, result.sample_rate, result.steps, delta)
    return {
        row.accountant: (None if row.epsilon != row.epsilon else float(row.epsilon))
        for row in table.itertuples()
    }


def run_setting(
    data: dict[str, np.ndarray],
    job_id: JobId,
    run_spec: RunSpec | dict[str, Any],
    device: str = "auto",
    max_physical_batch: int | None = None,
) -> ScoreFile:
    """Train the one model of ``job_id`` (its setting and run seed) as the run spec's
    ``model``, ``canaries``, ``train`` and ``target_epsilon`` say; return its score file.
    ``max_physical_batch``: see :func:`dpaudit.training.dpsgd.train_with_canaries`."""
    experiment, setting, seed = job_id.experiment, job_id.setting, job_id.seed
    # keys left out of a library caller's spec take the schema's defaults
    spec = RunSpec.from_run_spec(run_spec, drop_settings=True)
    train, canaries, target_epsilon = spec.train, spec.canaries, spec.target_epsilon
    canary_x, canary_y = make_canaries(data, canaries)
    membership = fair_coins(len(canary_y), derive_seed(seed, "coins"))
    torch.manual_seed(derive_seed(seed, "init"))
    n_classes = int(data["y_train"].max()) + 1
    net = build_for_data(dict(spec.model), data["x_train"].shape[1:], n_classes)
    result = train_with_canaries(
        net,
        data,
        canary_x,
        canary_y,
        membership,
        spec,
        derive_seed(seed, "train"),
        device,
        max_physical_batch=max_physical_batch,
    )
    job = f"experiment {experiment!r}, setting {setting!r}, seed {seed}"
    check_finite_scores(result.canary_scores[None, :], job, result.steps)
    meta = {
        "claimed_epsilons": claimed_epsilons(result, train["delta"]),
        **one_run_meta(experiment, setting, seed),
        "threat_model": "black_box_loss",
        "score": "minus_loss",
        "canary_type": canaries["type"],
        CLAIMED_EPSILON: result.claimed_epsilon,
        "target_epsilon": target_epsilon,
        "delta": train["delta"],
        "accountant": result.accountant,
        "sampler": "poisson",
        "optimizer": train["optimizer"],
        "m": len(canary_y),
        "n_train": int(len(data["y_train"])),
        **summary(result),
    }
    return ScoreFile(
        score=result.canary_scores[None, :],
        membership=membership[None, :],
        canary_id=np.arange(len(canary_y))[None, :],
        meta=meta,
        source=job,
    )
