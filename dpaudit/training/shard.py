"""Train one shard of models for an audit and score its canaries: config blocks -> ScoreFile.

A *shard* is ``models`` independent DP-SGD runs of one setting, trained together by
:func:`dpaudit.training.vectorized.train_shard`; each run is one *trial* (one row of the score
file). Any shard can be recomputed alone: model ``j`` of shard ``s`` draws everything from
``model_seeds(seed, setting, s, j)``.

Designs (rows of the score file are trials, columns canaries; higher score means IN):

``one_run``    Steinke et al. 2023, Algorithm 1: the experiment's ``m`` canaries, each included
               by an independent fair coin per trial (m columns).
``lidp``       Pillutla et al. 2023, replace-one (App. B.2, Eq. 12): per trial ``k`` canaries
               drawn from the pool are inserted and ``k`` fresh ones are never inserted; both
               are scored on the same model (2k columns, membership 1 then 0).
``multi_run``  one target canary (pool id 0), inserted in a trial iff a fair coin lands 1
               (1 column); the classical many-models audit (Jagielski et al. 2020; the
               shuffling and selection papers).

``canaries.neighbouring``: ``add_remove`` (an OUT canary is absent) or ``zero_out`` (gradient
canaries only: an OUT canary is replaced by a record whose gradient is zero, the adjacency of
Annamalai et al. §2.1; dataset sizes then do not depend on membership).
``canaries.adversary``: ``natural`` (only the target's gradient is crafted),
``partially_informed`` (multi_run, zero_out, gradient canaries: every batch without the target
or the zero-out record has its last example's gradient replaced by minus the target's;
Annamalai et al. §5.1, Algorithm 1) or ``batch_worst_case`` (same conditions: every example's
gradient is crafted, plus the target's for the first B records of the dataset order and minus
it for the rest; the modified Worst-Case adversary of Annamalai et al. §7 for
batch-then-shuffle).
``canaries.statistic`` (``per_step_dot``): ``sum`` (``sum_t o_t``) or ``likelihood_ratio``, the
log Neyman-Pearson ratio of the adversary's threat model over the released per-step
observations (Annamalai et al. §5.3 and §7; :mod:`dpaudit.likelihood_ratios`), over the first
``canaries.prefix_batches`` batches of each epoch when set (§7, Algorithm 2).

The canaries' scores of each threat model: :mod:`dpaudit.training.canary_scores`; Dirac canaries
placed where the data's gradients move least: :mod:`dpaudit.training.dirac_placement`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from dpaudit.accounting.dpsgd import calibrate_noise, poisson_epsilon
from dpaudit.canaries import gradient_space
from dpaudit.canaries.inclusion import lidp_split, single_target_coin
from dpaudit.keys import CLAIMED_EPSILON, FORMAT_VERSION_KEY
from dpaudit.models import build_for_data
from dpaudit.scores import FAIR_COIN, FIXED_INCLUSION, FORMAT_VERSION, INCLUSION_KEY, ScoreFile
from dpaudit.training.canary_scores import (
    SCORE_NAMES,
    canary_scores,
    check_finite_scores,
    likelihood_ratio_scores,
)
from dpaudit.training.device import resolve_device
from dpaudit.training.dirac_placement import dirac_coordinates
from dpaudit.training.readout import all_logits, input_pool
from dpaudit.training.samplers import SamplerSpec
from dpaudit.training.seeds import ModelSeeds, model_seeds
from dpaudit.training.spec import (  # noqa: F401  (CANARY_DEFAULTS, TRAIN_DEFAULTS re-exported)
    CANARY_DEFAULTS,
    GRADIENT_CANARIES,
    TRAIN_DEFAULTS,
    CanaryLayout,
    JobId,
    RunSpec,
)
from dpaudit.training.step import DPSGDConfig, Recording, ShardData, TrainingDiverged
from dpaudit.training.vectorized import ShardResult, train_shard


@dataclass(frozen=True)
class ShardPlan:
    """Which models a ``multi_run`` shard trains and who holds the target.

    ``model_ids[j]``: the index whose :func:`model_seeds` model ``j`` draws from (so a model is
    the same whatever else its job trains); ``members[j]``: 1 if model ``j`` trains on the target
    canary.
    """

    model_ids: np.ndarray
    members: np.ndarray

    def __post_init__(self) -> None:
        if len(self.model_ids) != len(self.members) or len(self.model_ids) < 1:
            raise ValueError(
                f"a shard plan needs as many members as model ids (>= 1), got "
                f"{len(self.members)} and {len(self.model_ids)}"
            )
        if not np.isin(self.members, (0, 1)).all():
            raise ValueError("shard plan members must be 0 or 1")


@dataclass
class ShardOutput:
    """What a shard produces: the score file, optional per-step observations, the raw result."""

    score_file: ScoreFile
    observations: dict[str, np.ndarray] = field(default_factory=dict)
    result: ShardResult | None = None


def _check_positive_int_or_none(block: dict[str, Any], key: str) -> None:
    """``train.<key>`` must be an integer >= 1 or null (None)."""
    v = block[key]
    if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
        raise ValueError(f"train.{key} must be an integer >= 1 or null, got {v!r}")


@dataclass
class _Canaries:
    """The canaries of a shard: the options, the pool and who is in which trial.

    ``cols[j]`` are the pool ids scored in trial ``j`` (the score file's ``canary_id``) and
    ``member[j]`` which of them trial ``j`` trains on; ``expected_in`` is the expected number of
    inserted canaries per trial (the nominal dataset size of the sample rate).
    """

    options: dict[str, Any]
    gradient: bool
    zero_out: bool
    informed: bool
    worst_case: bool
    n_cols: int
    pool_size: int
    expected_in: float
    cols: np.ndarray
    member: np.ndarray


@dataclass
class _Examples:
    """Every example the models of a shard may train on and the training set of each model.

    Input canaries are the first ``pool_size`` rows of ``x``; gradient canaries are the items
    ``n_inputs + k`` (the rows of ``grad_pool``: the pool, then the zero-out records).
    """

    x: np.ndarray
    y: np.ndarray
    n_inputs: int
    items: list[np.ndarray]
    grad_pool: gradient_space.Canaries | None
    dirac_coords: np.ndarray | None


def run_shard(
    data: dict[str, np.ndarray],
    job_id: JobId,
    run_spec: RunSpec | dict[str, Any],
    checkpoint: str | Path | None = None,
    progress: bool = False,
    step_hook: Callable[[int], None] | None = None,
    device: str = "cpu",
    plan: ShardPlan | None = None,
    max_physical_batch: int | None = None,
) -> ShardOutput:
    """Train the shard of ``job_id`` as the run spec says (a :class:`RunSpec`, or a mapping
    with ``design``, ``threat_model``, ``model``, ``canaries``, ``train``, ``target_epsilon``)
    and score its canaries; see the module docstring.

    ``data`` is a prepared data set (``x_train, y_train, x_test, y_test`` and, for test-set
    canaries, ``x_canary, y_canary``). No ``target_epsilon`` (or None) trains without noise
    unless ``train.noise_multiplier`` is set. ``checkpoint``: a file for resuming a killed
    shard (the caller deletes it after writing the outputs). ``step_hook(step)`` runs after
    every step.
    ``device``: ``cpu``, ``cuda`` or ``auto`` (CUDA when visible); the tests run on the CPU,
    ``benchmarks/gpu_check.py`` compares a GPU with the CPU.
    ``plan`` (design ``multi_run`` only): which models to train and who holds the target,
    instead of ``train.models_per_shard`` models with a fair coin each (the tuning protocol of
    :mod:`dpaudit.training.tuning` decides both); ``x_train`` may then be empty (the
    selection paper's ETCV, X = empty set). ``max_physical_batch`` (``compute.max_physical_batch``):
    examples per model in one pass of the engine (:func:`~dpaudit.training.vectorized.train_shard`).
    """
    experiment, setting, seed, shard = job_id.experiment, job_id.setting, job_id.seed, job_id.shard
    spec = RunSpec.from_run_spec(run_spec)
    design, threat_model = spec.design, spec.threat_model
    t, c = dict(spec.train), dict(spec.canaries)
    n_models = _check_train(t, plan)
    x_train, y_train = data["x_train"], data["y_train"]
    n_classes = int(max(np.max(y_train, initial=0), data["y_test"].max())) + 1
    shape = tuple(x_train.shape[1:])

    def template_model():
        return build_for_data(dict(spec.model), shape, n_classes)

    n_params = sum(p.numel() for p in template_model().parameters())
    ids = range(n_models) if plan is None else plan.model_ids
    seeds = [model_seeds(seed, setting, shard, int(j)) for j in ids]
    if c["type"] == "clipbkd" and c["label"] is not None and not 0 <= int(c["label"]) < n_classes:
        raise ValueError(
            f"canaries.label {c['label']} is not a class of the data (0..{n_classes - 1})"
        )
    layout = spec.layout(n_params)
    c["pool_size"] = layout.pool_size
    cans = _draw_canaries(design, c, seeds, layout)
    if plan is not None:
        if design != "multi_run":
            raise ValueError(f"a shard plan needs design multi_run, got {design!r}")
        cans.member[:, 0] = plan.members
    placed = dirac_coordinates(c, template_model, x_train, y_train, t, seeds, cans.pool_size)
    examples = _shard_examples(data, cans, t, n_params, n_classes, placed)
    job = f"experiment {experiment!r}, setting {setting!r}, seed {seed}, shard {shard}"
    cfg, claimed = _dpsgd_config(spec, len(y_train), n_params, job)
    wb_inputs = None
    if threat_model == "white_box_dot" and not cans.gradient:
        wb_inputs = np.unique(cans.cols)
    run = {"checkpoint": checkpoint, "step_hook": step_hook, "progress": progress}
    run.update(device=resolve_device(device), max_physical_batch=max_physical_batch)
    result = _train(template_model, examples, cans, seeds, cfg, wb_inputs, spec, job, run)

    template = template_model().to("meta")
    score, observations = canary_scores(
        threat_model,
        template,
        result,
        examples.x,
        examples.y,
        examples.grad_pool,
        cans.cols,
        cans.pool_size,
        cans.gradient,
        wb_inputs,
    )
    if threat_model == "per_step_dot" and c["statistic"] == "likelihood_ratio":
        score = likelihood_ratio_scores(observations["step_dots"], c, cfg, job)
    check_finite_scores(score, job, cfg.steps)
    acc = _accuracy(template, result, data, t["eval_examples"])
    counts = {"models": n_models, "n_train": len(y_train), "n_params": n_params}
    accuracy = {
        "test_accuracy": float(np.mean(acc)),
        "test_accuracy_examples": int(min(len(data["y_test"]), t["eval_examples"] or 10**12)),
        "test_accuracy_per_model": [float(a) for a in acc],
    }
    meta = _shard_meta(job_id, spec, c, cfg, claimed, cans, result, examples, counts, accuracy)
    sf = ScoreFile(score=score, membership=cans.member, canary_id=cans.cols, meta=meta, source=job)
    return ShardOutput(sf, observations, result)


def _train(
    template_model: Callable[[], torch.nn.Module],
    examples: _Examples,
    cans: _Canaries,
    seeds: list[ModelSeeds],
    cfg: DPSGDConfig,
    wb_inputs: np.ndarray | None,
    spec: RunSpec,
    job: str,
    run: dict[str, Any],
) -> ShardResult:
    """Train the shard's models (:func:`~dpaudit.training.vectorized.train_shard`) on its
    examples, with the adversary and recording its canaries and threat model need; ``run``:
    the keyword arguments of how it runs (checkpoint, hook, progress, device, physical batch).
    A diverged model's error is prefixed with ``job``."""
    t, threat_model = spec.train, spec.threat_model
    target_and_zero = (examples.n_inputs, examples.n_inputs + cans.pool_size)
    data = ShardData(
        torch.from_numpy(np.ascontiguousarray(examples.x)),
        torch.from_numpy(np.ascontiguousarray(examples.y)),
        examples.items,
        examples.grad_pool,
        target_and_zero if cans.informed else None,
        target_and_zero if cans.worst_case else None,
    )
    record = Recording(white_box_inputs=wb_inputs, step_dots=threat_model == "per_step_dot")
    try:
        return train_shard(
            template_model,
            data,
            seeds,
            cfg,
            record,
            model_chunk=t["model_chunk"],
            engine=t["engine"],
            checkpoint_every_s=float(t["checkpoint_every_s"]),
            **run,
        )
    except TrainingDiverged as exc:
        raise TrainingDiverged(f"{job}: {exc}", exc.model, exc.step) from exc


def _check_train(t: dict[str, Any], plan: ShardPlan | None) -> int:
    """The number of models of the shard, once the ``train`` keys the vectorised engine
    alone reads are checked (``ValueError`` naming the key)."""
    if t["momentum"]:
        raise ValueError(
            f"train.momentum {t['momentum']}: the vectorised engine runs plain SGD or Adam "
            "(momentum 0); use the Opacus one-model engine for momentum"
        )
    n_models = int(t["models_per_shard"]) if plan is None else len(plan.model_ids)
    if n_models < 1:
        raise ValueError(f"train.models_per_shard must be >= 1, got {n_models}")
    for key in ("model_chunk", "eval_examples"):
        _check_positive_int_or_none(t, key)
    return n_models


def _shard_meta(
    job_id: JobId,
    spec: RunSpec,
    c: dict[str, Any],
    cfg: DPSGDConfig,
    claimed: float | None,
    cans: _Canaries,
    result: ShardResult,
    examples: _Examples,
    counts: dict[str, int],
    accuracy: dict[str, Any],
) -> dict[str, Any]:
    """The score file's meta of a shard: the run spec's keys, the schedule, the claim,
    ``counts`` (models, training records, parameters), the canaries and ``accuracy``."""
    t, threat_model = spec.train, spec.threat_model
    meta = {
        FORMAT_VERSION_KEY: FORMAT_VERSION,
        "experiment": job_id.experiment,
        "setting": job_id.setting,
        "seed": job_id.seed,
        "shard": job_id.shard,
        "design": spec.design,
        "threat_model": threat_model,
        "score": SCORE_NAMES[threat_model],
        "canary_type": c["type"],
        "canaries_inserted": c["insert"],
        INCLUSION_KEY: inclusion_law(spec.design, c["insert"]),
        "neighbouring": c["neighbouring"],
        "adversary": c["adversary"],
        "statistic": c["statistic"] if threat_model == "per_step_dot" else None,
        "prefix_batches": c["prefix_batches"] if threat_model == "per_step_dot" else None,
        CLAIMED_EPSILON: claimed,
        "target_epsilon": spec.target_epsilon,
        "delta": float(t["delta"]),
        "accountant": f"opacus_{t['accountant']}_poisson" if claimed is not None else "none",
        "sampler": t["sampler"],
        "buffer_size": t["buffer_size"],
        "noise_multiplier": cfg.noise_multiplier,
        "sample_rate": cfg.sample_rate,
        "steps": cfg.steps,
        "steps_per_epoch": cfg.steps_per_epoch,
        "batch_size": cfg.batch_size,
        "lr": float(t["lr"]),
        "optimizer": t["optimizer"],
        "max_grad_norm": float(t["max_grad_norm"]),
        **counts,
        "canaries_per_trial": cans.n_cols,
        "canary_pool_size": cans.pool_size,
        "engine": result.meta["engine"],
        **accuracy,
    }
    if spec.design == "lidp":
        meta["lidp_variant"] = "replace_one"
    if examples.dirac_coords is not None:  # canary_id indexes the pool: its coordinates
        meta["dirac_coordinates"] = [int(v) for v in examples.dirac_coords]
    return meta


def inclusion_law(design: str, insert: str = "coins") -> float | str:
    """The inclusion law of the canaries :func:`_draw_canaries` draws (the score file's
    :data:`dpaudit.scores.INCLUSION_KEY`): a fair coin per canary (``one_run``) or per trial's
    target (``multi_run``, the tuning protocol's worlds included); every canary OUT for a
    ``one_run`` control (``canaries.insert: none``); fixed by the design for ``lidp`` (k
    inserted, k null)."""
    if design == "lidp":
        return FIXED_INCLUSION
    return 0.0 if design == "one_run" and insert == "none" else FAIR_COIN


def _draw_canaries(
    design: str, c: dict[str, Any], seeds: list[ModelSeeds], layout: CanaryLayout
) -> _Canaries:
    """The pool ids each trial scores and the coins that decide which of them it trains on
    (one_run: a fair coin per canary; lidp: k inserted, k null; multi_run: one coin)."""
    n_cols, pool_size = layout.per_trial, layout.pool_size
    cols = np.zeros((len(seeds), n_cols), dtype=np.int64)  # pool ids per trial
    member = np.zeros((len(seeds), n_cols), dtype=np.int8)
    for j, s in enumerate(seeds):
        if design == "one_run":
            cols[j] = np.arange(n_cols)
            if c["insert"] == "coins":
                member[j] = np.random.default_rng([s.canary, 0]).integers(0, 2, size=n_cols)
        elif design == "lidp":
            ins, null = lidp_split(pool_size, int(c["k"]), s.canary)
            cols[j] = np.concatenate([ins, null])
            member[j, : len(ins)] = 1
        else:
            member[j, 0] = single_target_coin(s.canary)
    return _Canaries(
        options=c,
        gradient=c["type"] in GRADIENT_CANARIES,
        zero_out=c["neighbouring"] == "zero_out",
        informed=c["adversary"] == "partially_informed",
        worst_case=c["adversary"] == "batch_worst_case",
        n_cols=n_cols,
        pool_size=pool_size,
        expected_in=layout.expected_in,
        cols=cols,
        member=member,
    )


def _shard_examples(
    data: dict[str, np.ndarray],
    cans: _Canaries,
    t: dict[str, Any],
    n_params: int,
    n_classes: int,
    dirac_coords: np.ndarray | None = None,
) -> _Examples:
    """The examples of the shard (input canaries first, then the training data; gradient
    canaries as vectors) and each model's training set (its inserted canaries first).
    ``dirac_coords``: the Dirac canaries' coordinates when placed by the data
    (``canaries.dirac_placement: low_gradient``), else drawn as the options say."""
    c, pool_size, n_cols = cans.options, cans.pool_size, cans.n_cols
    x_train, y_train = data["x_train"], data["y_train"]
    n_train = len(y_train)
    grad_pool = None
    placed, dirac_coords = dirac_coords, None
    if cans.gradient:
        norm = float(t["max_grad_norm"])
        # zero-out: one zero-gradient record per column, used by OUT canaries
        zeros = n_cols if cans.zero_out else 0
        if c["type"] == "dirac":  # sparse: O(m) memory (m x params dense: 55 GB on WRN-16-4)
            grad_pool = gradient_space.dirac_sparse(
                pool_size, n_params, norm, c["seed"], zeros, c.get("dirac_coordinate"), placed
            )
            dirac_coords = grad_pool.coords[:pool_size].numpy()
        else:
            v = gradient_space.random_direction(pool_size, n_params, norm, c["seed"])
            v = np.concatenate([v, np.zeros((zeros, n_params), dtype=v.dtype)])
            grad_pool = torch.from_numpy(v)
        x_all, y_all = x_train, y_train
        offset_train, n_inputs = 0, n_train
    else:
        cx, cy = input_pool(data, c, pool_size, n_classes)
        x_all = np.concatenate([cx, x_train])
        y_all = np.concatenate([cy, y_train])
        offset_train, n_inputs = pool_size, pool_size + n_train
    train_ids = np.arange(offset_train, offset_train + n_train)
    items = []
    for cols, member in zip(cans.cols, cans.member, strict=True):
        inserted = cols[member == 1]
        canary_items = (n_inputs + inserted) if cans.gradient else inserted
        if cans.zero_out:
            canary_items = np.concatenate(
                [canary_items, n_inputs + pool_size + np.flatnonzero(member == 0)]
            )
        items.append(np.concatenate([canary_items, train_ids]).astype(np.int64))  # canaries first
    return _Examples(x_all, y_all, n_inputs, items, grad_pool, dirac_coords)


def _dpsgd_config(
    spec: RunSpec, n_train: int, n_params: int, job: str
) -> tuple[DPSGDConfig, float | None]:
    """The DP-SGD hyper-parameters of the shard and the claimed epsilon: the sample rate and
    steps of the nominal dataset (:meth:`RunSpec.schedule`), the noise calibrated to the
    spec's ``target_epsilon`` (or ``train.noise_multiplier``; 0 without a target)."""
    t, target_epsilon = spec.train, spec.target_epsilon
    b = int(t["batch_size"])
    schedule = spec.schedule(n_train, n_params)
    q, steps, t_epoch = schedule.sample_rate, schedule.steps, schedule.steps_per_epoch
    sigma: float | None = None  # None: calibrated to target_epsilon below
    if t["noise_multiplier"] is not None:
        sigma = float(t["noise_multiplier"])
    elif target_epsilon is None:
        sigma = 0.0
    try:
        if sigma is None:
            sigma = calibrate_noise(target_epsilon, t["delta"], q, steps, t["accountant"])
        claimed = poisson_epsilon(sigma, q, steps, t["delta"], t["accountant"])
    except ValueError as exc:  # an unreachable target epsilon, a delta outside (0, 1)
        raise ValueError(f"{job}: train / target_epsilon: {exc}") from exc
    cfg = DPSGDConfig(
        steps=steps,
        batch_size=b,
        sample_rate=q,
        noise_multiplier=sigma,
        max_grad_norm=float(t["max_grad_norm"]),
        lr=float(t["lr"]),
        sampler=SamplerSpec(t["sampler"], b, t["buffer_size"]),
        steps_per_epoch=t_epoch,
        optimizer=t["optimizer"],
        betas=(float(t["adam_betas"][0]), float(t["adam_betas"][1])),
        eps=float(t["adam_eps"]),
    )
    return cfg, claimed


def _accuracy(
    template, result: ShardResult, data: dict[str, np.ndarray], n_eval: int | None
) -> np.ndarray:
    """Test accuracy of every model on the first ``n_eval`` test examples (None: all)."""
    xt = torch.from_numpy(np.ascontiguousarray(data["x_test"][:n_eval]))
    yt = torch.from_numpy(data["y_test"][:n_eval])
    logits = all_logits(template, result, xt)
    return (logits.argmax(-1) == yt[None]).double().mean(1).numpy()


def score_summary(sf: ScoreFile) -> dict[str, float]:
    """Mean score of IN and OUT canaries (a quick sanity check for logs)."""
    s, mem = sf.score, sf.membership.astype(bool)
    return {
        "mean_score_in": float(s[mem].mean()) if mem.any() else math.nan,
        "mean_score_out": float(s[~mem].mean()) if (~mem).any() else math.nan,
    }
