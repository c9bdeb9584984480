"""DP-SGD for a shard of many small models at once, vectorised with ``torch.func``.

One shard = ``M`` independent models of one architecture, each with its own training set (the
same base data, different canaries), its own initialisation, batches and noise. Each step does,
for every model ``m`` (Abadi et al. 2016, Algorithm 1; the same steps as Opacus's DPOptimizer):

1. draw the batch ``B_m`` with the model's sampler (Poisson by default; :mod:`.samplers`);
2. per-sample gradients ``g_i`` of the cross-entropy loss at ``theta_m``
   (``vmap`` over models of ``vmap`` over samples of ``grad``);
3. clip: ``g_i * min(1, C / (||g_i|| + 1e-6))`` (Opacus's clip factor, flat clipping over all
   parameters), and sum over the batch; gradient canaries in the batch add their fixed vector,
   clipped the same way;
4. add Gaussian noise ``N(0, (sigma C)^2 I)``, divide by the *expected* batch size ``B``
   (Opacus's ``loss_reduction="mean"`` for Poisson sampling), and take an SGD step
   ``theta_m <- theta_m - lr * g~`` or, with ``optimizer="adam"``, an Adam step on ``g~``
   (Kingma & Ba 2015, Algorithm 1, as ``torch.optim.Adam`` computes it, per model: its own
   first and second moments; post-processing of the noisy gradient, so the guarantee is
   DP-SGD's).

Randomness depends only on per-model integer seeds and the step index: initialisation on
the model's ``init`` seed, batches on ``numpy.random.default_rng([sampling seed, step])``
(:mod:`.samplers`), noise on one stream per model (torch's CPU Mersenne twister seeded with
the model's ``noise`` seed, ``P`` normals drawn per step, in step order; its state is part of
the checkpoint), so

* any model of any shard can be recomputed alone (a shard of 1 model gives the same model);
* a killed job resumes from its last checkpoint and reproduces the uninterrupted run exactly;
* results are deterministic on the CPU for a fixed thread count.

Per-sample gradients come from the ghost-norm engine of :mod:`dpaudit.training.stacked` for
plain sequential models, else from ``torch.func``
(:func:`~dpaudit.training.engines.choose_engine`). Models are processed
in chunks of ``model_chunk`` per step to bound memory; with ``max_physical_batch`` each model's
batch is also processed in chunks of at most that many examples (Opacus's
``max_physical_batch_size``): the clipped per-sample gradients of the chunks are summed and the
noise is added once per (logical) step, so the step is the unchunked one. Neither kind of
chunking changes the results beyond floating-point round-off (the summation order); without
``max_physical_batch`` the computation is the unchunked one, bit for bit.

Everything the white-box threat models need is recorded here (Steinke §4.1; Annamalai Alg. 1):
``white_box``   sum over steps of ``<theta_{t-1} - theta_t, clip(grad loss(theta_{t-1}, c))>``
                for chosen input canaries ``c`` (Steinke et al. 2023, §4.1);
``step_dots``   per step, ``<g~_t, v_k>`` for every gradient canary ``v_k`` (Annamalai et al.,
                Algorithm 1, ``o_t``; the Natural/PI likelihood ratios of their §5.3).
For a gradient canary (fixed gradient ``v_k``) the white-box sum telescopes to
``<theta_0 - theta_T, v_k>`` (a sum of parameter differences, whatever the optimizer) and is
computed from the first and last iterates (our observation).

Where each part lives: this module drives a shard (:func:`train_shard`: models, batches, the
step loop, checkpoints, the result); :mod:`dpaudit.training.step` is the DP-SGD step (its
readable one-model definition :func:`~dpaudit.training.step.reference_step` and the vectorised
:func:`~dpaudit.training.step.dpsgd_step`); :mod:`dpaudit.training.engines` computes the
clipped per-sample gradients; :mod:`dpaudit.training.checkpoint` saves and resumes a shard;
:mod:`dpaudit.training.seeds` derives each model's seeds. The inputs and errors of
:func:`train_shard` are importable from here too.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from dpaudit.training.checkpoint import load_checkpoint, resume, save, shard_fingerprint
from dpaudit.training.engines import (
    FuncEngine,
    StackedEngine,
    choose_engine,
    clip_factors,
    default_model_chunk,
    init_models,
    stacked_logits,
)
from dpaudit.training.samplers import ModelBatchStream, steps_per_epoch
from dpaudit.training.seeds import ModelSeeds, model_seeds
from dpaudit.training.step import (
    DPSGDConfig,
    Recording,
    ShardData,
    StepContext,
    TrainingDiverged,
    TrainState,
    dpsgd_step,
    step_context,
)

#: The inputs, errors and helpers of :func:`train_shard`, importable from here (their owners
#: are the modules named in the module docstring).
__all__ = [
    "DPSGDConfig",
    "FuncEngine",
    "ModelSeeds",
    "Recording",
    "ShardData",
    "ShardResult",
    "StackedEngine",
    "TrainingDiverged",
    "TrainingInterrupted",
    "check_max_physical_batch",
    "choose_engine",
    "clip_factors",
    "default_model_chunk",
    "init_models",
    "load_checkpoint",
    "model_seeds",
    "stacked_logits",
    "train_shard",
]

log = logging.getLogger(__name__)


@dataclass
class ShardResult:
    """Initial and final parameters (stacked, leading dim M) and the recorded statistics."""

    params0: dict[str, torch.Tensor]
    params: dict[str, torch.Tensor]
    white_box: np.ndarray | None  # (M, len(white_box_inputs)), float64
    step_dots: np.ndarray | None  # (M, K_g, steps), float64
    steps: int
    meta: dict[str, Any] = field(default_factory=dict)

    def flat(self, which: str = "params") -> torch.Tensor:
        """``params`` or ``params0`` as one (M, P) matrix in ``named_parameters`` order."""
        d = getattr(self, which)
        return torch.cat([t.reshape(t.shape[0], -1) for t in d.values()], dim=1)


class TrainingInterrupted(RuntimeError):
    """Raised by a step hook to stop a shard (used to test resuming)."""


def check_max_physical_batch(value: Any) -> int | None:
    """``value`` if it is a valid ``compute.max_physical_batch`` (an integer >= 1, or None for
    no limit), else ``ValueError`` naming the key."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ValueError(
            f"compute.max_physical_batch {value!r}: allowed: an integer >= 1 (examples per "
            "model in one pass), or null (the whole batch at once)"
        )
    return int(value)


def train_shard(
    model_fn: Callable[[], nn.Module],
    data: ShardData,
    seeds: Sequence[ModelSeeds],
    config: DPSGDConfig,
    record: Recording | None = None,
    *,
    model_chunk: int | None = None,
    max_physical_batch: int | None = None,
    engine: str = "auto",
    device: str | torch.device = "cpu",
    checkpoint: str | Path | None = None,
    checkpoint_every_s: float = 300.0,
    step_hook: Callable[[int], None] | None = None,
    progress: bool = False,
) -> ShardResult:
    """Train ``len(seeds)`` models with DP-SGD, vectorised; see the module docstring.

    ``checkpoint``: a file the shard state is written to (atomically) every
    ``checkpoint_every_s`` seconds and resumed from (logged: "resumed from <file> at step N")
    if it exists and was written by this exact shard (same config, seeds, data, model and
    recording); a checkpoint of another run, or one that cannot be read, is deleted with a
    warning naming the file and why, and training starts from step 0 (:func:`load_checkpoint`).
    It is left in place; the caller removes it once the outputs are written. A non-finite
    update raises :class:`TrainingDiverged` naming the model and the step. ``device``: where
    the models train (``cpu``, ``cuda``; the tests run on the CPU, ``benchmarks/gpu_check.py``
    compares a GPU with the CPU); noise is drawn on the CPU (one
    stream per model, so results do not depend on the device beyond round-off) and copied over.
    ``step_hook(step)`` runs after every completed step (e.g. to interrupt a test run).
    ``max_physical_batch`` (config key ``compute.max_physical_batch``): at most this many
    examples of a model's batch (and of its white-box input canaries) go through the engine in
    one pass; the clipped gradients of a step's passes are summed before the noise is added
    once, so a logical batch of any size trains in the memory of this many examples (None:
    the whole batch in one pass).
    """
    max_physical_batch = check_max_physical_batch(max_physical_batch)
    record = record or Recording()
    n_models = len(seeds)
    if n_models != len(data.train_items):
        raise ValueError(f"{n_models} seeds but {len(data.train_items)} training sets")
    if n_models == 0:
        raise ValueError("a shard needs at least one model")
    dev = torch.device(device)
    template, params, buffers = init_models(model_fn, seeds)
    params = {k: v.to(dev) for k, v in params.items()}
    buffers = {k: v.to(dev) for k, v in buffers.items()}
    params0 = {k: v.clone() for k, v in params.items()}
    ctx = step_context(
        template, params, buffers, data, config, record, engine, model_chunk, max_physical_batch
    )
    n_max = max(len(np.asarray(t)) for t in data.train_items)
    t_epoch = config.steps_per_epoch or steps_per_epoch(max(n_max, 1), config.batch_size)
    streams = [
        ModelBatchStream(config.sampler, items, config.sample_rate, t_epoch, s.sampling)
        for items, s in zip(data.train_items, seeds, strict=True)
    ]
    state = TrainState.start(ctx, params, seeds, record)
    fingerprint = shard_fingerprint(config, seeds, data, ctx, record, template, params)
    ckpt = Path(checkpoint) if checkpoint is not None else None
    start = 0 if ckpt is None else resume(state, ckpt, fingerprint, config.steps)
    every = checkpoint_every_s
    _run_steps(ctx, state, streams, start, ckpt, fingerprint, every, step_hook, progress)
    return ShardResult(
        params0={k: v.cpu() for k, v in params0.items()},
        params={k: v.cpu() for k, v in state.params.items()},
        white_box=None if state.white_box is None else state.white_box.double().cpu().numpy(),
        step_dots=None if state.step_dots is None else state.step_dots.double().cpu().numpy(),
        steps=config.steps,
        meta={
            "sampler": config.sampler.name,
            "steps_per_epoch": t_epoch,
            "model_chunk": ctx.chunk,
            "max_physical_batch": ctx.max_physical_batch,
            "engine": ctx.eng.name,
            "n_params": ctx.n_params,
        },
    )


def _run_steps(
    ctx: StepContext,
    state: TrainState,
    streams: list[ModelBatchStream],
    start: int,
    ckpt: Path | None,
    fingerprint: str,
    checkpoint_every_s: float,
    step_hook: Callable[[int], None] | None,
    progress: bool,
) -> None:
    """Steps ``start .. config.steps - 1`` of every model, ``ctx.chunk`` models at a time;
    the state is saved to ``ckpt`` every ``checkpoint_every_s`` seconds."""
    steps, n_models = ctx.config.steps, len(streams)
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=steps, initial=start, desc="DP-SGD shard", unit="step")
    last_save = time.monotonic()
    with torch.no_grad():
        for step in range(start, steps):
            batches = [s.batch(step) for s in streams]
            for a in range(0, n_models, ctx.chunk):
                dpsgd_step(ctx, state, batches, a, min(a + ctx.chunk, n_models), step)
            if bar is not None:
                bar.update(1)
            if step_hook is not None:
                step_hook(step + 1)
            if ckpt is not None and time.monotonic() - last_save >= checkpoint_every_s:
                save(state, ckpt, fingerprint, step + 1)
                last_save = time.monotonic()
    if bar is not None:
        bar.close()
