"""Checkpoints of a vectorised shard: resume a killed job exactly, never into another run.

A checkpoint holds a shard's :class:`~dpaudit.training.step.TrainState` after some step: the
parameters, every model's noise-stream state, the recorded sums and Adam's moments, and the
fingerprint of the run that wrote it (config, seeds, data, recording, model;
:func:`shard_fingerprint`). It is a cache: one that cannot be read or belongs to another run
is deleted with a warning and training starts from step 0 (:func:`load_checkpoint`).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from dpaudit.canaries import gradient_space
from dpaudit.io import atomic_path
from dpaudit.training.seeds import ModelSeeds
from dpaudit.training.step import DPSGDConfig, Recording, ShardData, StepContext, TrainState

log = logging.getLogger(__name__)


def _fingerprint(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def _data_fingerprint(data: ShardData) -> str:
    h = hashlib.sha256()
    h.update(data.x.detach().cpu().numpy().tobytes())
    h.update(data.y.detach().cpu().numpy().tobytes())
    for items in data.train_items:
        h.update(np.asarray(items, dtype=np.int64).tobytes() + b"|")
    if isinstance(data.grad_canaries, gradient_space.SparseCanaries):
        h.update(data.grad_canaries.fingerprint())
    elif data.grad_canaries is not None:
        h.update(data.grad_canaries.detach().cpu().numpy().tobytes())
    h.update(repr(data.partially_informed).encode())
    if data.batch_worst_case is not None:
        h.update(repr(("batch_worst_case", data.batch_worst_case)).encode())
    return h.hexdigest()


def _check_state(state: Any, expected: dict[str, Any], n_models: int, steps: int) -> str | None:
    """Why a loaded checkpoint ``state`` cannot be resumed (None if it can): every entry of
    ``expected`` (tensors, or dicts of tensors, or None where absent) must be there with the
    same shapes and dtypes, the noise states one per model, the step in ``[0, steps]``."""
    if not isinstance(state, dict):
        return f"holds a {type(state).__name__}, not a state dict"
    missing = [
        k
        for k in ("step", "noise_rng", *(k for k, v in expected.items() if v is not None))
        if k not in state
    ]
    if missing:
        return f"lacks {missing}"
    step = state["step"]
    if isinstance(step, bool) or not isinstance(step, int) or not 0 <= step <= steps:
        return f"its step {step!r} is not in [0, {steps}]"
    rng = state["noise_rng"]
    one = torch.Generator().get_state()
    if (
        not isinstance(rng, torch.Tensor)
        or rng.shape != (n_models, *one.shape)
        or (rng.dtype != one.dtype)
    ):
        return f"its noise states are not {n_models} generator states"
    for key, want in expected.items():
        if want is None:
            continue
        have = state[key]
        pairs = [(key, have, want)]
        if isinstance(want, dict):
            if not isinstance(have, dict) or list(have) != list(want):
                return f"its {key} are not {list(want)}"
            pairs = [(f"{key}[{k!r}]", have[k], want[k]) for k in want]
        for name, h, w in pairs:
            if not isinstance(h, torch.Tensor) or h.shape != w.shape or h.dtype != w.dtype:
                return f"its {name} is not a {w.dtype} tensor of shape {tuple(w.shape)}"
    return None


def load_checkpoint(
    path: Path, fingerprint: str, expected: dict[str, Any], steps: int
) -> dict[str, Any] | None:
    """The state saved in checkpoint ``path`` if it can resume this exact run, else ``None``.

    A checkpoint is a cache: one that cannot be read (truncated, corrupt) or that belongs to
    another run (its fingerprint differs: config, seeds, data, model or recording changed) is
    deleted with a warning naming the file and the reason, and training starts from step 0.
    A checkpoint is never resumed into a run it was not written by. ``expected`` maps the state's
    tensors to this run's (their shapes and dtypes are checked; ``params`` is a dict).
    """
    if not path.exists():
        return None
    n_models = next(iter(expected["params"].values())).shape[0]
    device = next(iter(expected["params"].values())).device
    try:
        state = torch.load(path, weights_only=True, map_location=device)
    except Exception as exc:  # any unreadable file: the cache is simply rebuilt
        reason = f"it cannot be read ({type(exc).__name__}: {exc})"
    else:
        if (
            isinstance(state, dict)
            and "fingerprint" in state
            and (state["fingerprint"] != fingerprint)
        ):
            reason = (
                "it was written by a different run (the config, seeds, data, model or "
                "recording changed)"
            )
        else:
            problem = _check_state(state, expected, n_models, steps)
            if problem is None:
                return state
            reason = f"it is not a checkpoint of this run: {problem}"
    log.warning("%s: discarding the checkpoint and training from step 0: %s", path, reason)
    path.unlink(missing_ok=True)
    return None


def shard_fingerprint(
    config: DPSGDConfig,
    seeds: Sequence[ModelSeeds],
    data: ShardData,
    ctx: StepContext,
    record: Recording,
    template: nn.Module,
    params: dict[str, torch.Tensor],
) -> str:
    """What makes a checkpoint this shard's: config, seeds, data, recording, model, noise."""
    return _fingerprint(
        {
            "config": asdict(config),
            "seeds": [asdict(s) for s in seeds],
            "data": _data_fingerprint(data),
            "wb": None if ctx.wb_ids is None else ctx.wb_ids.tolist(),
            "step_dots": record.step_dots,
            "dtype": str(ctx.dtype),
            # the architecture: a changed activation keeps every shape but is another run
            "model": repr(template),
            "shapes": {k: list(v.shape) for k, v in params.items()},
            "noise_stream": "torch-cpu-mt19937-per-model",
        }
    )


def resume(state: TrainState, path: Path, fingerprint: str, steps: int) -> int:
    """Continue ``state`` from checkpoint ``path`` if it is this run's; the step to start from."""
    expected = {"params": state.params, **state.optional()}
    saved = load_checkpoint(path, fingerprint, expected, steps)
    if saved is None:
        return 0
    state.params = saved["params"]
    for g, st in zip(state.noise_gens, saved["noise_rng"].unbind(0), strict=True):
        g.set_state(st.clone())
    for key, have in state.optional().items():
        if have is not None:
            setattr(state, key, saved[key])
    start = int(saved["step"])
    log.info("resumed from %s at step %d of %d", path, start, steps)
    return start


def save(state: TrainState, path: Path, fingerprint: str, step: int) -> None:
    """Write the state after ``step`` steps to checkpoint ``path`` (atomically)."""
    saved = {
        "fingerprint": fingerprint,
        "step": step,
        "params": state.params,
        "noise_rng": torch.stack([g.get_state() for g in state.noise_gens]),
    }
    saved.update({k: v for k, v in state.optional().items() if v is not None})
    with atomic_path(path) as tmp:
        torch.save(saved, tmp)
