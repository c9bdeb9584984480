"""One training job, whatever the engine: a run spec and a data set in, one score file out.

:func:`train_job` is the single entry point of a training job (the Snakemake rule ``train``
and ``dpaudit train`` / ``dpaudit train-shard`` call it). The run spec is a mapping with the
keys ``design``, ``threat_model``, ``model``, ``canaries``, ``train``, ``target_epsilon`` and,
for a private-selection audit, ``selection`` (:mod:`dpaudit.training.tuning`: the tuning
protocol's candidate runs trained by the vectorised engine, one score-file row per tuning
trial); ``train.engine`` chooses who trains:

``opacus``   one model with Opacus's ``PrivacyEngine`` (:mod:`dpaudit.training.opacus_engine`):
             the reference the vectorised engines are tested against; design ``one_run``,
             ``random_input`` canaries, ``black_box_loss``, Poisson sampling; one shard (0) of
             one model, ``train.models_per_shard`` is not used.
``auto``     the vectorised engine (:mod:`dpaudit.training.shard`): ``train.models_per_shard``
``stacked``  models trained together, every design, canary, sampler and threat model;
``func``     per-sample gradients from the ghost-norm ``stacked`` engine or ``torch.func``
             (``auto``: ``stacked`` where it applies).

The job owns its files: the score file ``out`` is written atomically; a vectorised job keeps a
checkpoint at ``<out>.ckpt`` while it trains (a killed job resumes from it) and removes it
once the score file is written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from dpaudit.defaults import fill_defaults
from dpaudit.scores import ScoreFile
from dpaudit.training.spec import (  # noqa: F401  (JobId, RUN_SPEC_KEYS re-exported)
    RUN_SPEC_KEYS,
    JobId,
    RunSpec,
)

#: ``train.engine``: the Opacus reference, or the vectorised engine's per-sample gradients.
TRAINING_ENGINES = ("opacus", "auto", "stacked", "func")
#: What the Opacus engine supports (key of the run spec: allowed values); the vectorised
#: engines support every value.
OPACUS_SUPPORTS: dict[str, tuple[str, ...]] = {
    "design": ("one_run",),
    "threat_model": ("black_box_loss",),
    "canaries.type": ("random_input",),
    "canaries.insert": ("coins",),
    "train.sampler": ("poisson",),
}
#: ``train`` keys only the vectorised engines read (the Opacus engine needs them null).
VECTORISED_ONLY = ("noise_multiplier", "steps", "buffer_size", "model_chunk")


def engine_of(run_spec: RunSpec | dict[str, Any]) -> str:
    """The run spec's ``train.engine``; the schema's default (``auto``: the vectorised engine)
    when not given."""
    train = run_spec.train if isinstance(run_spec, RunSpec) else run_spec.get("train") or {}
    engine = train.get("engine") or fill_defaults("train")["engine"]
    if engine not in TRAINING_ENGINES:
        raise ValueError(f"train.engine {engine!r}; allowed: {list(TRAINING_ENGINES)}")
    return engine


def opacus_problem(run_spec: dict[str, Any], shards: int = 1) -> tuple[str, str] | None:
    """``(key, why)`` if the Opacus engine cannot run ``run_spec`` (with ``shards`` shards per
    seed), else None. Keys are dotted paths in the run spec (``canaries.type``)."""
    canaries = run_spec.get("canaries") or {}
    train = run_spec.get("train") or {}
    values = {
        "design": run_spec.get("design"),
        "threat_model": run_spec.get("threat_model"),
        "canaries.type": canaries.get("type"),
        "canaries.insert": canaries.get("insert"),
        "train.sampler": train.get("sampler"),
    }
    for key, allowed in OPACUS_SUPPORTS.items():
        if values[key] is not None and values[key] not in allowed:
            return key, (
                f"{values[key]!r} needs train.engine auto, stacked or func; allowed with "
                f"train.engine opacus: {list(allowed)}"
            )
    for key in VECTORISED_ONLY:
        if train.get(key) is not None:
            return f"train.{key}", "only for train.engine auto, stacked or func"
    if shards != 1:
        return "shards", (
            f"{shards}: train.engine opacus trains one model per (setting, seed); allowed: 1"
        )
    return None


def checkpoint_path(out: str | Path) -> Path:
    """Where the job for score file ``out`` keeps its checkpoint: ``<out>.ckpt``."""
    out = Path(out)
    return out.with_name(out.name + ".ckpt")


def observations_path(out: str | Path) -> Path:
    """Where per-step observations of score file ``out`` go: ``<stem>.observations.npz``."""
    out = Path(out)
    return out.with_name(out.name.removesuffix(".npz") + ".observations.npz")


def complete_run_spec(run_spec: dict[str, Any]) -> dict[str, Any]:
    """``run_spec`` with every key left out at the config schema's default, as the pipeline's
    validated config fills them (the pipeline passes complete specs; this is for the CLI and
    library callers), checked (:class:`~dpaudit.training.spec.RunSpec`). The ``train`` keys
    that choose settings (``target_epsilons``, ``nonprivate``) are not part of a job's spec."""
    return RunSpec.from_run_spec(run_spec, drop_settings=True).to_dict()


def train_job(
    data: dict[str, np.ndarray],
    *,
    experiment: str,
    setting: str,
    seed: int,
    shard: int,
    run_spec: dict[str, Any],
    out: str | Path,
    device: str = "auto",
    checkpoint: bool = True,
    progress: bool = False,
    observations: bool = False,
    max_physical_batch: int | None = None,
) -> ScoreFile:
    """Train shard ``shard`` of (``setting``, ``seed``) as ``run_spec`` says, write its score
    file to ``out`` (atomically) and return it.

    ``checkpoint``: keep ``<out>.ckpt`` while training (vectorised engines; removed once the
    score file is written). ``observations``: also write the per-step observations of a
    ``per_step_dot`` job to ``<stem>.observations.npz``. ``max_physical_batch`` (config key
    ``compute.max_physical_batch``; None: no limit): at most this many examples per model go
    through the engine at once; a larger batch is processed in chunks whose clipped gradients
    are summed before the noise is added once (every engine: the vectorised ones by
    themselves, Opacus through its ``BatchMemoryManager``). A run spec the engine cannot run
    raises ``ValueError`` naming the key. An ``out`` that cannot be written raises an ``OSError``
    naming it before any training (:func:`dpaudit.io.check_writable`).
    """
    from dpaudit import scores
    from dpaudit.io import check_writable
    from dpaudit.training.vectorized import check_max_physical_batch

    max_physical_batch = check_max_physical_batch(max_physical_batch)
    check_writable(out)  # an unwritable score folder stops the job now, not after training

    job = JobId(experiment, setting, seed, shard)
    if (run_spec.get("train") or {}).get("entry_point"):  # the user's own function trains
        raise ValueError("run spec key train.entry_point: run by dpaudit.attach.pipeline")
    if run_spec.get("selection") is None and engine_of(run_spec) == "opacus":
        _check_opacus(run_spec, job)  # first: it names the engine that takes the spec
    spec = RunSpec.from_run_spec(run_spec, drop_settings=True)
    if engine_of(spec) == "opacus":
        if spec.selection is not None:
            raise ValueError("run spec key train.engine: selection needs auto, stacked or func")
        sf, obs = _train_opacus(data, job, spec, device, max_physical_batch), {}
        ckpt = None
    else:
        if spec.selection is not None:  # a tuning audit (training.tuning): score files only
            from dpaudit.training.tuning import run_tuning as run
        else:
            from dpaudit.training.shard import run_shard as run

        ckpt = checkpoint_path(out) if checkpoint else None
        result = run(
            data,
            job,
            spec,
            ckpt,
            progress,
            device=device,
            max_physical_batch=max_physical_batch,
        )
        if spec.selection is not None:
            sf, obs = result, {}
        else:
            sf, obs = result.score_file, result.observations
    scores.write(out, sf)
    if observations and obs:
        _write_observations(observations_path(out), obs)
    if ckpt is not None:
        ckpt.unlink(missing_ok=True)
    return sf


def _train_opacus(
    data: dict[str, np.ndarray],
    job: JobId,
    spec: RunSpec,
    device: str,
    max_physical_batch: int | None = None,
) -> ScoreFile:
    """One model with Opacus (:func:`dpaudit.training.opacus_engine.run_setting`), after
    checking that the run spec and the shard are what that engine supports."""
    from dpaudit.training.opacus_engine import run_setting

    _check_opacus(spec.to_dict(), job)
    return run_setting(data, job, spec, device, max_physical_batch)


def _check_opacus(run_spec: dict[str, Any], job: JobId) -> None:
    """Raise ``ValueError`` naming the run spec key if the Opacus engine cannot train
    ``run_spec`` as shard ``job.shard``."""
    problem = opacus_problem(run_spec)
    if problem is None and job.shard != 0:
        problem = ("shard", f"{job.shard}: train.engine opacus trains one shard (0) per seed")
    if problem is not None:
        raise ValueError(f"run spec key {problem[0]}: {problem[1]}")


def _write_observations(path: Path, observations: dict[str, np.ndarray]) -> None:
    """Write the observation arrays to ``path`` atomically."""
    from dpaudit.io import atomic_path

    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        np.savez(fh, **observations)
