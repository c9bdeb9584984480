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
plain sequential models, else from ``torch.func`` (:func:`choose_engine`). Models are processed
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
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import math
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad, vmap

from dpaudit.canaries import gradient_space
from dpaudit.io import atomic_path
from dpaudit.training.samplers import ModelBatchStream, SamplerSpec, steps_per_epoch
from dpaudit.training.stacked import StackedSequential
from dpaudit.training.stacked import supports as stacked_supports

log = logging.getLogger(__name__)

#: Default models per chunk of the stacked engine (see ``train_shard``).
STACKED_CHUNK = 8

#: Opacus's stabiliser in the clip factor ``C / (norm + 1e-6)`` (one value for the per-sample
#: gradients and the gradient canaries).
CLIP_EPS = gradient_space.CLIP_EPS


# ----------------------------------------------------------------------------------------------
# Seeds
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ModelSeeds:
    """The independent integer seeds of one model: initialisation, batches, noise, canaries."""

    init: int
    sampling: int
    noise: int
    canary: int


def model_seeds(base_seed: int, setting: str, shard: int, model: int) -> ModelSeeds:
    """Seeds of model ``model`` of shard ``shard`` of a setting, from a ``numpy.SeedSequence``.

    The setting name enters through its CRC-32, so the seeds do not depend on Python's hash
    randomisation. Different (setting, shard, model) give independent streams.
    """
    if shard < 0 or model < 0:
        raise ValueError(f"shard and model must be >= 0, got shard={shard}, model={model}")
    ss = np.random.SeedSequence([int(base_seed), zlib.crc32(setting.encode()), shard, model])
    a, b, c, d = (int(v) for v in ss.generate_state(4, dtype=np.uint32))
    return ModelSeeds(init=a, sampling=b, noise=c, canary=d)


#: ``train.optimizer``: the update rules applied to the noisy gradient (``DPSGDConfig.optimizer``).
TRAINING_OPTIMIZERS = ("sgd", "adam")


# ----------------------------------------------------------------------------------------------
# Configuration and inputs
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DPSGDConfig:
    """Hyper-parameters of one DP-SGD run (identical for every model of a shard).

    ``batch_size`` is the expected batch size B: the normaliser of the noisy gradient sum, and
    the batch size of the shuffling samplers. ``sample_rate`` is the Poisson rate q (used by the
    ``poisson`` sampler and by the accountant). ``noise_multiplier`` 0 trains without noise.
    ``steps_per_epoch`` (shuffling samplers only): T; ``None`` takes ``ceil(n_max / B)`` with
    ``n_max`` the largest training set of the shard, which depends on the shard, so set it
    (e.g. to ``ceil((n_base + n_canaries) / B)``) when a model must be recomputable alone.
    ``optimizer``: ``sgd`` (plain SGD) or ``adam`` (``torch.optim.Adam`` with ``betas`` and
    ``eps``, no weight decay) applied to each model's noisy gradient.
    """

    steps: int
    batch_size: int
    sample_rate: float
    noise_multiplier: float
    max_grad_norm: float
    lr: float
    sampler: SamplerSpec = field(default_factory=SamplerSpec)
    steps_per_epoch: int | None = None
    optimizer: str = "sgd"
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8

    def __post_init__(self) -> None:
        if self.optimizer not in TRAINING_OPTIMIZERS:
            raise ValueError(f"optimizer {self.optimizer!r}; allowed: {list(TRAINING_OPTIMIZERS)}")
        if len(self.betas) != 2 or not all(0 <= b < 1 for b in self.betas):
            raise ValueError(f"betas must be two numbers in [0, 1), got {self.betas!r}")
        if not self.eps > 0:
            raise ValueError(f"eps must be > 0, got {self.eps}")
        if self.steps_per_epoch is not None and self.steps_per_epoch < 1:
            raise ValueError(f"steps_per_epoch must be >= 1, got {self.steps_per_epoch}")
        if self.steps < 0:
            raise ValueError(f"steps must be >= 0, got {self.steps}")
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {self.batch_size}")
        if not 0 < self.sample_rate <= 1:
            raise ValueError(f"sample_rate must be in (0, 1], got {self.sample_rate}")
        if self.noise_multiplier < 0:
            raise ValueError(f"noise_multiplier must be >= 0, got {self.noise_multiplier}")
        if not self.max_grad_norm > 0:
            raise ValueError(f"max_grad_norm must be > 0, got {self.max_grad_norm}")
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")


@dataclass
class ShardData:
    """The examples and per-model training sets of a shard.

    ``x`` (N, ...) and ``y`` (N,) hold every input example any model may train on (base data and
    input canaries). ``train_items[m]`` lists model ``m``'s training set in dataset order: ids
    ``i < N`` are rows of ``x``; ids ``N + k`` are gradient canary ``k``, a row of
    ``grad_canaries`` (K_g, P): a fixed vector in the flat parameter space (parameters in
    ``named_parameters`` order) that replaces the per-sample gradient whenever the item is in a
    batch (Pillutla et al. App. D.2; Steinke et al. §4.1); a dense tensor, or
    :class:`~dpaudit.canaries.gradient_space.SparseCanaries` for Dirac canaries (O(K_g) memory,
    the same arithmetic).

    ``partially_informed = (target, zero)``: the Partially-Informed adversary of Annamalai et al.
    (Algorithm 1, blue line; their §5.1): in every batch that holds neither the target nor
    the zero-out record, the gradient of the batch's *last* example is replaced by minus the
    target's gradient vector.

    ``batch_worst_case = (target, zero)``: the modified Worst-Case adversary of Annamalai et
    al. §7 (Fig. 9, batch-then-shuffle): every input example's gradient is replaced, by plus
    the target's gradient vector for the first B items of the model's dataset order (the target
    or the zero-out record is the first; B the batch size) and by minus it for every later item.
    """

    x: torch.Tensor
    y: torch.Tensor
    train_items: Sequence[np.ndarray]
    grad_canaries: gradient_space.Canaries | None = None
    partially_informed: tuple[int, int] | None = None
    batch_worst_case: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        if self.partially_informed is not None and self.batch_worst_case is not None:
            raise ValueError(
                "partially_informed and batch_worst_case are two adversaries: pick one"
            )
        for name in ("partially_informed", "batch_worst_case"):
            if getattr(self, name) is None:
                continue
            target, zero = getattr(self, name)
            n, kg = self.x.shape[0], self.n_grad_canaries
            if not (n <= target < n + kg and n <= zero < n + kg):
                raise ValueError(
                    f"{name} needs the item ids of two gradient canaries "
                    f"(the target and the zero-out record), in [{n}, {n + kg})"
                )
        if self.x.shape[0] != self.y.shape[0]:
            raise ValueError(f"x has {self.x.shape[0]} rows but y has {self.y.shape[0]}")
        n, kg = self.x.shape[0], self.n_grad_canaries
        for m, items in enumerate(self.train_items):
            items = np.asarray(items)
            if items.ndim != 1:
                raise ValueError(f"train_items[{m}] must be 1-D, got shape {items.shape}")
            if items.size and (items.min() < 0 or items.max() >= n + kg):
                raise ValueError(
                    f"train_items[{m}] has ids outside [0, {n + kg}) "
                    f"({n} input examples + {kg} gradient canaries)"
                )
            # strictly increasing (the usual case) is a cheap proof of no repeats
            if not (items.size < 2 or bool((items[1:] > items[:-1]).all())) and (
                np.unique(items).size != items.size
            ):
                raise ValueError(f"train_items[{m}] repeats an item")

    @property
    def n_grad_canaries(self) -> int:
        return 0 if self.grad_canaries is None else int(self.grad_canaries.shape[0])


@dataclass
class Recording:
    """What to record besides the final models.

    ``white_box_inputs``: ids (rows of ``x``) of input canaries whose white-box score (sum over
    steps of the update dotted with the clipped canary gradient) is accumulated for every model.
    ``step_dots``: record ``<g~_t, v_k>`` for every gradient canary at every step.
    """

    white_box_inputs: np.ndarray | None = None
    step_dots: bool = False


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


class TrainingDiverged(ValueError):
    """A model's update became non-finite (NaN or inf): training diverged.

    ``model`` is the model's position in the shard (its trial, the row of the score file) and
    ``step`` the 1-based step whose update was non-finite.
    """

    def __init__(self, message: str, model: int, step: int) -> None:
        super().__init__(message)
        self.model = model
        self.step = step


# ----------------------------------------------------------------------------------------------
# The engine
# ----------------------------------------------------------------------------------------------
def init_models(
    model_fn: Callable[[], nn.Module], seeds: Sequence[ModelSeeds]
) -> tuple[nn.Module, dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """Build one model per seed (the CPU generator seeded with ``seed.init``, as
    ``torch.manual_seed(seed.init)`` does, then ``model_fn()``, without touching the global
    RNG) and stack their parameters and buffers; returns a template module
    on the ``meta`` device and the stacked tensors."""
    gen = torch.random.default_generator
    n = len(seeds)
    template: nn.Module | None = None
    params: dict[str, torch.Tensor] = {}
    buffers: dict[str, torch.Tensor] = {}
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        for j, s in enumerate(seeds):
            # the CPU generator only: torch.manual_seed also seeds (lazily) every accelerator
            # backend, which costs ~0.5 ms per call; on the CPU the values are the same
            gen.manual_seed(s.init)
            model = model_fn()
            if template is None:
                for name, mod in model.named_modules():
                    if isinstance(mod, nn.modules.batchnorm._BatchNorm):
                        raise ValueError(
                            f"module {name!r} is a BatchNorm layer: it mixes the examples of a "
                            "batch, so per-example clipping is meaningless; use GroupNorm"
                        )
                # stacked as torch.func.stack_module_state does, filled model by model (one
                # model alive at a time: a 256-model shard does not hold 256 modules)
                params = {k: v.new_empty((n, *v.shape)) for k, v in model.named_parameters()}
                buffers = {k: v.new_empty((n, *v.shape)) for k, v in model.named_buffers()}
                template = copy.deepcopy(model).to("meta")
            for k, v in model.named_parameters():
                params[k][j] = v
            for k, v in model.named_buffers():
                buffers[k][j] = v
    assert template is not None
    return template, params, buffers


def _per_sample_grad_fn(template: nn.Module) -> Callable:
    """``f(params, buffers, x, y) -> per-sample grads``, params (M, ...), x (M, B, ...)."""

    def loss_one(params, buffers, x, y):
        out = functional_call(template, (params, buffers), (x.unsqueeze(0),))
        return F.cross_entropy(out, y.unsqueeze(0))

    per_sample = vmap(grad(loss_one), in_dims=(None, None, 0, 0))
    return vmap(per_sample, in_dims=(0, 0, 0, 0))


def clip_factors(grads: dict[str, torch.Tensor], max_grad_norm: float) -> torch.Tensor:
    """(M, B) clip factors ``min(1, C / (||g_i||_2 + 1e-6))`` of per-sample gradients
    ``grads`` (each (M, B, ...)), the norm taken over all parameters (Opacus's
    ``DPOptimizer.clip_and_accumulate``)."""
    sq = sum(t.reshape(t.shape[0], t.shape[1], -1).pow(2).sum(-1) for t in grads.values())
    return (max_grad_norm / (sq.sqrt() + CLIP_EPS)).clamp(max=1.0)


class FuncEngine:
    """Per-sample gradients with ``torch.func`` (``vmap`` over models of ``vmap`` over samples of
    ``grad``): works for any model without BatchNorm."""

    name = "func"

    def __init__(self, template: nn.Module) -> None:
        self.psg = _per_sample_grad_fn(template)

    def clipped_grad_sum(self, params, buffers, x, y, weight, max_grad_norm, x_sqnorm=None):
        """Sum over the batch of clipped per-sample gradients, for each model.

        ``x`` (M, B, ...), ``y`` (M, B), ``weight`` (M, B) with 1 for real slots and 0 for
        padding; clipped as :func:`clip_factors` says.
        """
        g, factor = self.grads_and_factors(params, buffers, x, y, max_grad_norm)
        factor = factor * weight
        return {k: torch.einsum("mb,mb...->m...", factor, t) for k, t in g.items()}

    def clipped_dot(self, params, buffers, x, y, max_grad_norm, direction):
        """(M, B) dot products of the clipped per-sample gradients with ``direction`` (for
        white-box canary scores)."""
        g, factor = self.grads_and_factors(params, buffers, x, y, max_grad_norm)
        cg = {k: t * factor.view(*factor.shape, *([1] * (t.dim() - 2))) for k, t in g.items()}
        return sum(torch.einsum("mb...,m...->mb", cg[k], direction[k]) for k in cg)

    def grads_and_factors(self, params, buffers, x, y, max_grad_norm):
        """Per-sample gradients (M, B, ...) of the models ``params`` and their (M, B) clip
        factors."""
        with torch.enable_grad():
            g = self.psg(params, buffers, x, y)
            return g, clip_factors(g, max_grad_norm)


class StackedEngine:
    """The ghost-norm engine of :mod:`dpaudit.training.stacked` (plain sequential models)."""

    name = "stacked"

    def __init__(self, template: nn.Module) -> None:
        self.net = StackedSequential(template)

    def clipped_grad_sum(self, params, buffers, x, y, weight, max_grad_norm, x_sqnorm=None):
        return self.net.clipped_grad_sum(params, x, y, weight, max_grad_norm, x_sqnorm)

    def clipped_dot(self, params, buffers, x, y, max_grad_norm, direction):
        return self.net.clipped_dot(params, x, y, max_grad_norm, direction)


#: ``train.engine`` values the vectorised trainer runs (every engine but ``opacus``).
VECTORIZED_ENGINES = ("auto", "stacked", "func")


def choose_engine(template: nn.Module, engine: str = "auto"):
    """The per-sample-gradient engine: ``stacked``, ``func``, or ``auto`` (stacked when the model
    is a plain sequential stack it supports: 3-4x faster on the CPU for LeNet-5; else func)."""
    if engine not in VECTORIZED_ENGINES:
        raise ValueError(f"unknown engine {engine!r}; allowed: {list(VECTORIZED_ENGINES)}")
    if engine == "func":
        return FuncEngine(template)
    if engine == "stacked":
        return StackedEngine(template)
    if not stacked_supports(template):
        return FuncEngine(template)
    return StackedEngine(template)


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


def _check_finite(update: torch.Tensor, first: int, step: int, config: DPSGDConfig) -> None:
    """Raise :class:`TrainingDiverged` if a row of ``update`` (models ``first``, ``first + 1``,
    ...) holds a NaN or an infinity at (1-based) step ``step``."""
    finite = torch.isfinite(update).all(dim=1)
    if bool(finite.all()):
        return
    model = first + int((~finite).nonzero()[0, 0])
    raise TrainingDiverged(
        f"training diverged: model {model} of the shard (trial {model}) has a non-finite "
        f"(NaN or inf) update at step {step} of {config.steps} (lr {config.lr}, noise "
        f"multiplier {config.noise_multiplier}, max_grad_norm {config.max_grad_norm}); a "
        "too-large learning rate (train.lr) or non-finite inputs in the data set are the usual "
        "causes",
        model,
        step,
    )


def default_model_chunk(n_params: int, batch_size: int, budget_bytes: float = 2**29) -> int:
    """Models per vectorised chunk so that per-sample gradients take about ``budget_bytes``
    (three copies of ``chunk * 1.3 B * P`` floats: the gradients, their squares, the product)."""
    per_model = 3 * 4 * n_params * max(1, math.ceil(1.3 * batch_size))
    return max(1, int(budget_bytes // per_model))


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
    ctx = _step_context(
        template, params, buffers, data, config, record, engine, model_chunk, max_physical_batch
    )
    n_max = max(len(np.asarray(t)) for t in data.train_items)
    t_epoch = config.steps_per_epoch or steps_per_epoch(max(n_max, 1), config.batch_size)
    streams = [
        ModelBatchStream(config.sampler, items, config.sample_rate, t_epoch, s.sampling)
        for items, s in zip(data.train_items, seeds, strict=True)
    ]
    state = _TrainState.start(ctx, params, seeds, record)
    fingerprint = _shard_fingerprint(config, seeds, data, ctx, record, template, params)
    ckpt = Path(checkpoint) if checkpoint is not None else None
    start = 0 if ckpt is None else state.resume(ckpt, fingerprint, config.steps)
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=config.steps, initial=start, desc="DP-SGD shard", unit="step")
    last_save = time.monotonic()
    with torch.no_grad():
        for step in range(start, config.steps):
            batches = [s.batch(step) for s in streams]
            for a in range(0, n_models, ctx.chunk):
                _train_chunk(ctx, state, batches, a, min(a + ctx.chunk, n_models), step)
            if bar is not None:
                bar.update(1)
            if step_hook is not None:
                step_hook(step + 1)
            if ckpt is not None and time.monotonic() - last_save >= checkpoint_every_s:
                state.save(ckpt, fingerprint, step + 1)
                last_save = time.monotonic()
    if bar is not None:
        bar.close()
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


@dataclass
class _StepContext:
    """What every DP-SGD step of a shard reads: the engine, the parameter layout, the examples
    (on the device), the clipped gradient canaries and reusable buffers."""

    eng: Any
    config: DPSGDConfig
    chunk: int
    names: list[str]
    shapes: list[torch.Size]
    sizes: list[int]
    n_params: int
    dtype: torch.dtype
    f64: torch.dtype
    dev: torch.device
    buffers: dict[str, torch.Tensor]
    x: torch.Tensor
    y: torch.Tensor
    x_rows: torch.Tensor
    x_sqnorm: torch.Tensor | None
    vcan: gradient_space.Canaries | None
    partially_informed: tuple[int, int] | None
    batch_worst_case: tuple[int, int] | None
    plus_items: list[np.ndarray] | None
    wb_ids: np.ndarray | None
    wb_x: torch.Tensor | None
    wb_y: torch.Tensor | None
    noise_buf: torch.Tensor
    flat_buf: torch.Tensor
    x_buf: torch.Tensor | None = None
    max_physical_batch: int | None = None  # examples per model in one engine pass (None: all)

    @property
    def n_inputs(self) -> int:
        return self.x.shape[0]

    @property
    def kg(self) -> int:
        return 0 if self.vcan is None else int(self.vcan.shape[0])


def _step_context(
    template: nn.Module,
    params: dict[str, torch.Tensor],
    buffers: dict[str, torch.Tensor],
    data: ShardData,
    config: DPSGDConfig,
    record: Recording,
    engine: str,
    model_chunk: int | None,
    max_physical_batch: int | None = None,
) -> _StepContext:
    """The step context of a shard: checks the gradient canaries and the recording against
    the model and the data, picks the engine and the models per chunk."""
    dev = next(iter(params.values())).device
    dtype = next(iter(params.values())).dtype
    names = list(params)
    shapes = [params[k].shape[1:] for k in names]
    sizes = [math.prod(s) for s in shapes]
    n_params = sum(sizes)
    x = data.x.to(dev, dtype)
    y = data.y.to(dev).long()
    n_inputs = x.shape[0]
    vcan = None
    if data.n_grad_canaries:
        vcan = data.grad_canaries.to(dev, dtype)  # type: ignore[union-attr]
        if vcan.shape[1] != n_params:
            raise ValueError(
                f"gradient canaries have {vcan.shape[1]} coordinates, the model has {n_params}"
            )
        vcan = gradient_space.clip_rows(vcan, config.max_grad_norm)
    wb_ids = None if record.white_box_inputs is None else np.asarray(record.white_box_inputs)
    if wb_ids is not None and (wb_ids.min() < 0 or wb_ids.max() >= n_inputs):
        raise ValueError("white_box_inputs must be rows of x")
    if record.step_dots and vcan is None:
        raise ValueError("step_dots needs gradient canaries")
    eng = choose_engine(template, engine)
    chunk = model_chunk
    if chunk is None:
        # the examples of one pass: the batch, or its chunks of max_physical_batch
        per_pass = config.batch_size
        if max_physical_batch is not None:
            per_pass = min(per_pass, max_physical_batch)
        chunk = _default_chunk(eng.name, n_params, per_pass)
    n_models = next(iter(params.values())).shape[0]
    wb_index = None if wb_ids is None else torch.as_tensor(wb_ids, device=dev)
    return _StepContext(
        eng=eng,
        config=config,
        chunk=chunk,
        names=names,
        shapes=shapes,
        sizes=sizes,
        n_params=n_params,
        dtype=dtype,
        f64=torch.float64 if dev.type != "mps" else torch.float32,
        dev=dev,
        buffers=buffers,
        x=x,
        y=y,
        x_rows=x.reshape(n_inputs, x[0].numel() if n_inputs else 0),  # 0 rows: X empty
        # squared norms of the (flattened) examples: the ghost norm of a first linear layer
        x_sqnorm=x.reshape(n_inputs, -1).pow(2).sum(1)
        if eng.name == "stacked" and n_inputs
        else None,
        vcan=vcan,
        partially_informed=data.partially_informed,
        batch_worst_case=data.batch_worst_case,
        plus_items=None
        if data.batch_worst_case is None
        else [np.asarray(it)[: config.batch_size] for it in data.train_items],
        wb_ids=wb_ids,
        wb_x=None if wb_index is None else x[wb_index],
        wb_y=None if wb_index is None else y[wb_index],
        noise_buf=torch.empty(min(chunk, n_models), n_params, dtype=torch.float32),
        flat_buf=torch.empty(min(chunk, n_models), n_params, dtype=dtype, device=dev),
        max_physical_batch=max_physical_batch,
    )


def _default_chunk(engine: str, n_params: int, batch_size: int) -> int:
    """Models per chunk when ``model_chunk`` is not given.

    The stacked engine keeps activations, not per-sample gradients, per model; small chunks
    keep the gathered inputs in cache and let the allocator reuse its buffers (large fresh
    buffers cost page faults every step): on one CPU core 8 models per chunk was fastest for
    logistic regression, the MLP and LeNet-5 (vs 4, 16, 32, 64). torch.func: a memory budget
    (:func:`default_model_chunk`).
    """
    if engine == "stacked":
        return STACKED_CHUNK
    return default_model_chunk(n_params, batch_size)


def _shard_fingerprint(
    config: DPSGDConfig,
    seeds: Sequence[ModelSeeds],
    data: ShardData,
    ctx: _StepContext,
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


@dataclass
class _TrainState:
    """What a step changes (and a checkpoint holds): the parameters, the noise streams and the
    recorded sums.

    One noise stream per model (torch's CPU Mersenne twister seeded with the model's noise
    seed), consumed step after step: a model gets the same noise alone or in any shard, and the
    streams' states are checkpointed so that a resumed shard continues them exactly.
    """

    params: dict[str, torch.Tensor]
    noise_gens: list[torch.Generator]
    white_box: torch.Tensor | None
    step_dots: torch.Tensor | None
    adam_m: torch.Tensor | None = None  # Adam's first moments, flat (M, P)
    adam_v: torch.Tensor | None = None  # Adam's second moments, flat (M, P)

    @classmethod
    def start(
        cls,
        ctx: _StepContext,
        params: dict[str, torch.Tensor],
        seeds: Sequence[ModelSeeds],
        record: Recording,
    ) -> _TrainState:
        n_models, steps = len(seeds), ctx.config.steps
        white_box = None
        if ctx.wb_ids is not None:
            white_box = torch.zeros(n_models, len(ctx.wb_ids), dtype=ctx.f64, device=ctx.dev)
        step_dots = None
        if record.step_dots:
            step_dots = torch.zeros(n_models, ctx.kg, steps, dtype=ctx.f64, device=ctx.dev)
        gens = [torch.Generator().manual_seed(s.noise) for s in seeds]
        adam_m = adam_v = None
        if ctx.config.optimizer == "adam":
            adam_m = torch.zeros(n_models, ctx.n_params, dtype=ctx.dtype, device=ctx.dev)
            adam_v = torch.zeros_like(adam_m)
        return cls(params, gens, white_box, step_dots, adam_m, adam_v)

    def _optional(self) -> dict[str, torch.Tensor | None]:
        """The optional state (None where this run has none) a checkpoint holds."""
        return {
            "white_box": self.white_box,
            "step_dots": self.step_dots,
            "adam_m": self.adam_m,
            "adam_v": self.adam_v,
        }

    def resume(self, path: Path, fingerprint: str, steps: int) -> int:
        """Continue from checkpoint ``path`` if it is this run's; the step to start from."""
        expected = {"params": self.params, **self._optional()}
        state = load_checkpoint(path, fingerprint, expected, steps)
        if state is None:
            return 0
        self.params = state["params"]
        for g, st in zip(self.noise_gens, state["noise_rng"].unbind(0), strict=True):
            g.set_state(st.clone())
        for key, have in self._optional().items():
            if have is not None:
                setattr(self, key, state[key])
        start = int(state["step"])
        log.info("resumed from %s at step %d of %d", path, start, steps)
        return start

    def save(self, path: Path, fingerprint: str, step: int) -> None:
        """Write the state after ``step`` steps to checkpoint ``path`` (atomically)."""
        state = {
            "fingerprint": fingerprint,
            "step": step,
            "params": self.params,
            "noise_rng": torch.stack([g.get_state() for g in self.noise_gens]),
        }
        state.update({k: v for k, v in self._optional().items() if v is not None})
        with atomic_path(path) as tmp:
            torch.save(state, tmp)


def _train_chunk(
    ctx: _StepContext, state: _TrainState, batches: list[np.ndarray], a: int, b: int, step: int
) -> None:
    """One DP-SGD step (0-based ``step``) of models ``a`` to ``b - 1`` (Abadi et al. 2016,
    Algorithm 1): clipped gradient sum, gradient canaries, noise, recording, update."""
    m = b - a
    p_c = {k: state.params[k][a:b] for k in ctx.names}
    buf_c = {k: v[a:b] for k, v in ctx.buffers.items()}
    extra = _adversary_target_weights(ctx, batches, a, b)
    flat = _clipped_input_grad_sum(ctx, p_c, buf_c, batches[a:b])
    if ctx.vcan is not None:
        _add_gradient_canaries(ctx, flat, batches[a:b], extra)
    sigma_c = ctx.config.noise_multiplier * ctx.config.max_grad_norm
    if sigma_c > 0:
        noise = ctx.noise_buf[:m]
        for i in range(m):
            noise[i].normal_(0.0, sigma_c, generator=state.noise_gens[a + i])
        flat.add_(noise.to(ctx.dev, ctx.dtype))
    if state.step_dots is not None:
        g_tilde = flat / ctx.config.batch_size
        dots = gradient_space.dots(ctx.vcan, g_tilde)
        state.step_dots[a:b, :, step] = dots.to(ctx.f64)
    if ctx.config.optimizer == "adam":
        update = _adam_update(ctx, state, flat.div_(ctx.config.batch_size), a, b, step + 1)
    else:
        update = flat.mul_(ctx.config.lr / ctx.config.batch_size)  # theta_{t-1} - theta_t
    _check_finite(update, a, step + 1, ctx.config)
    if state.white_box is not None:
        state.white_box[a:b] += _white_box_dots(ctx, p_c, buf_c, update)
    for k, part in zip(ctx.names, _unflatten(ctx, update), strict=True):
        state.params[k][a:b].sub_(part)


def _adam_update(
    ctx: _StepContext, state: _TrainState, g: torch.Tensor, a: int, b: int, t: int
) -> torch.Tensor:
    """``theta_{t-1} - theta_t`` of an Adam step (Kingma & Ba 2015, Algorithm 1; the
    arithmetic of ``torch.optim.Adam`` without weight decay or amsgrad) on the noisy gradients
    ``g`` (m, P) of models ``a..b-1`` at (1-based) step ``t``; updates their moments in place
    and overwrites ``g`` with the update."""
    beta1, beta2 = ctx.config.betas
    m_c, v_c = state.adam_m[a:b], state.adam_v[a:b]  # type: ignore[index]
    m_c.lerp_(g, 1 - beta1)
    v_c.mul_(beta2).addcmul_(g, g, value=1 - beta2)
    step_size = ctx.config.lr / (1 - beta1**t)
    denom = torch.sqrt(v_c, out=g).div_(math.sqrt(1 - beta2**t)).add_(ctx.config.eps)
    return torch.div(m_c, denom, out=g).mul_(step_size)


def _adversary_target_weights(
    ctx: _StepContext, batches: list[np.ndarray], a: int, b: int
) -> np.ndarray:
    """How many extra copies of the target's gradient vector each model of ``a..b-1`` adds
    (Annamalai et al.): the input examples whose gradients the adversary replaces are dropped
    from ``batches`` in place.

    Partially-Informed (Algorithm 1): in batches holding neither the target nor the zero-out
    record the last slot's gradient becomes minus the target's (weight -1). Modified
    Worst-Case (§7): every input example's gradient becomes plus the target's for the first B
    items of the model's dataset order and minus it otherwise (weight #plus - #minus)."""
    extra = np.zeros(b - a, dtype=np.float64)
    if ctx.partially_informed is not None:
        target, zero = ctx.partially_informed
        for i in range(b - a):
            bt = batches[a + i]
            if len(bt) and target not in bt and zero not in bt:
                extra[i] = -1.0
                batches[a + i] = bt[:-1]  # the last slot's gradient is replaced
    elif ctx.batch_worst_case is not None:
        for i in range(b - a):
            bt = batches[a + i]
            inputs = bt < ctx.n_inputs
            n_plus = int(np.isin(bt[inputs], ctx.plus_items[a + i]).sum())  # type: ignore[index]
            extra[i] = 2 * n_plus - int(inputs.sum())
            batches[a + i] = bt[~inputs]  # every input example's gradient is replaced
    return extra


def _clipped_input_grad_sum(
    ctx: _StepContext,
    p_c: dict[str, torch.Tensor],
    buf_c: dict[str, torch.Tensor],
    batches: list[np.ndarray],
) -> torch.Tensor:
    """The sum of clipped per-sample gradients of the input examples of each model's batch,
    flat (m, P), in ``ctx.flat_buf`` (zero for empty batches); with
    ``ctx.max_physical_batch``, summed over passes of at most that many examples per model."""
    m = len(batches)
    inp = [bt[bt < ctx.n_inputs] for bt in batches]
    lens = np.fromiter((len(t) for t in inp), dtype=np.int64, count=m)
    bmax = int(lens.max())
    if not bmax:
        return ctx.flat_buf[:m].zero_()
    # (m, bmax) example ids, padded with id 0 at weight 0
    real = np.arange(bmax) < lens[:, None]
    idx_np = np.zeros((m, bmax), dtype=np.int64)
    idx_np[real] = np.concatenate(inp)
    out = ctx.flat_buf[:m]
    width = bmax if ctx.max_physical_batch is None else ctx.max_physical_batch
    if width >= bmax:  # one pass (the unchunked computation)
        summed = _clipped_grad_sum_pass(ctx, p_c, buf_c, idx_np, real)
        return torch.cat([summed[k].reshape(m, -1) for k in ctx.names], dim=1, out=out)
    # example chunks: columns [a, a + width) of every model's padded batch; a chunk's padded
    # slots (weight 0) add nothing, and the noise is added once, after the last chunk
    out.zero_()
    for a in range(0, bmax, width):
        summed = _clipped_grad_sum_pass(
            ctx, p_c, buf_c, idx_np[:, a : a + width], real[:, a : a + width]
        )
        for k, part in zip(ctx.names, _unflatten(ctx, out), strict=True):
            part.add_(summed[k])
    return out


def _clipped_grad_sum_pass(
    ctx: _StepContext,
    p_c: dict[str, torch.Tensor],
    buf_c: dict[str, torch.Tensor],
    idx_np: np.ndarray,
    real: np.ndarray,
) -> dict[str, torch.Tensor]:
    """One engine pass: the clipped per-sample gradient sums (per parameter, (m, ...)) of the
    examples ``idx_np`` (m, b) of each model, where ``real`` (padding elsewhere, weight 0)."""
    m, bmax = idx_np.shape
    flat_idx = torch.from_numpy(np.ascontiguousarray(idx_np).reshape(-1)).to(ctx.dev)
    w = torch.from_numpy(np.ascontiguousarray(real)).to(ctx.dev, ctx.dtype)
    # gathered into a buffer kept across chunks and steps: a fresh multi-MB tensor per chunk
    # costs more in page faults than the copy itself (~7x)
    row_numel = ctx.x_rows.shape[1]
    need = m * bmax * row_numel
    if ctx.x_buf is None or ctx.x_buf.numel() < need:
        ctx.x_buf = torch.empty(need + need // 4, dtype=ctx.dtype, device=ctx.dev)
    xb = torch.index_select(
        ctx.x_rows, 0, flat_idx, out=ctx.x_buf[:need].view(m * bmax, row_numel)
    ).view(m, bmax, *ctx.x.shape[1:])
    yb = ctx.y.index_select(0, flat_idx).view(m, bmax)
    sqn = None if ctx.x_sqnorm is None else ctx.x_sqnorm.index_select(0, flat_idx)
    return ctx.eng.clipped_grad_sum(
        p_c,
        buf_c,
        xb,
        yb,
        w,
        ctx.config.max_grad_norm,
        x_sqnorm=None if sqn is None else sqn.view(m, bmax),
    )


def _add_gradient_canaries(
    ctx: _StepContext, flat: torch.Tensor, batches: list[np.ndarray], extra: np.ndarray
) -> None:
    """Add to ``flat`` the clipped vectors of the gradient canaries in each model's batch and
    ``extra`` times the target's (the adversary's replaced gradients)."""
    counts = torch.zeros(len(batches), ctx.kg, dtype=ctx.dtype)
    for i, bt in enumerate(batches):
        gc = bt[bt >= ctx.n_inputs] - ctx.n_inputs
        counts[i, torch.from_numpy(gc)] = 1
    if extra.any():
        adv = ctx.partially_informed or ctx.batch_worst_case
        counts[:, adv[0] - ctx.n_inputs] += torch.from_numpy(extra).to(ctx.dtype)  # type: ignore[index]
    gradient_space.add_weighted(flat, counts.to(ctx.dev), ctx.vcan)  # type: ignore[arg-type]


def _unflatten(ctx: _StepContext, flat: torch.Tensor) -> list[torch.Tensor]:
    """Views of a flat (m, P) tensor as the parameters' shapes (m, ...), in ``ctx.names`` order."""
    m = flat.shape[0]
    parts, off = [], 0
    for size, shape in zip(ctx.sizes, ctx.shapes, strict=True):
        parts.append(flat[:, off : off + size].view(m, *shape))
        off += size
    return parts


def _white_box_dots(
    ctx: _StepContext,
    p_c: dict[str, torch.Tensor],
    buf_c: dict[str, torch.Tensor],
    update: torch.Tensor,
) -> torch.Tensor:
    """``<theta_{t-1} - theta_t, clip(grad loss(theta_{t-1}; c))>`` for the white-box input
    canaries ``c`` (Steinke et al. 2023, §4.1), (m, canaries)."""
    m = update.shape[0]
    direction = dict(zip(ctx.names, _unflatten(ctx, update), strict=True))
    wb_x, wb_y = ctx.wb_x, ctx.wb_y
    assert wb_x is not None and wb_y is not None
    n_wb = wb_x.shape[0]
    width = ctx.max_physical_batch
    if width is None or width >= n_wb:  # one pass (the unchunked computation)
        starts = [0]
        width = max(n_wb, 1)
    else:  # passes of at most max_physical_batch canaries (each dot is its own: exact)
        starts = list(range(0, n_wb, width))
    parts = [
        ctx.eng.clipped_dot(
            p_c,
            buf_c,
            wb_x[a : a + width].expand(m, *wb_x[a : a + width].shape),
            wb_y[a : a + width].expand(m, *wb_y[a : a + width].shape),
            ctx.config.max_grad_norm,
            direction,
        ).to(ctx.f64)
        for a in starts
    ]
    return parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)


def stacked_logits(
    model_fn_template: nn.Module,
    params: dict[str, torch.Tensor],
    buffers: dict[str, torch.Tensor] | None,
    x: torch.Tensor,
    batch: int = 1024,
) -> torch.Tensor:
    """Logits (M, N, classes) of every model of a shard on the same inputs ``x`` (N, ...)."""
    buffers = buffers or {}

    def f(p, b, xx):
        return functional_call(model_fn_template, (p, b), (xx,))

    fv = vmap(f, in_dims=(0, 0, None))
    outs = []
    with torch.no_grad():
        for s in range(0, x.shape[0], batch):
            outs.append(fv(params, buffers, x[s : s + batch]))
    return torch.cat(outs, dim=1)
