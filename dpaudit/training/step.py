"""One DP-SGD step (Abadi et al. 2016, arXiv:1607.00133, Algorithm 1), for a shard of models.

:func:`reference_step` is the definition, written for one model as the paper writes it: for
every example of the batch the gradient ``g_i`` of the loss, clipped to norm at most ``C``
(``g_i * min(1, C / (||g_i|| + 1e-6))``, Opacus's clip factor), summed; Gaussian noise
``N(0, (sigma C)^2 I)`` added; divided by the expected batch size ``B``; one SGD step
``theta <- theta - lr * g~``. The tests compare the vectorised step against it.

:func:`dpsgd_step` is the same step for models ``a..b-1`` of a shard at once, with the
per-sample gradients of an engine (:mod:`dpaudit.training.engines`), the gradient canaries
(fixed vectors that replace the per-sample gradient), the adversaries of Annamalai et al.
(arXiv:2411.10614; Algorithm 1 and §7) that replace gradients with the target's, the
white-box and per-step recordings, and Adam (Kingma & Ba 2015, Algorithm 1, as
``torch.optim.Adam`` computes it) as an alternative update on the noisy gradient. What it
reads is a :class:`StepContext` (:func:`step_context`), what it changes a :class:`TrainState`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from dpaudit.canaries import gradient_space
from dpaudit.training.adam import adam_update
from dpaudit.training.adversaries import adversary_target_weights
from dpaudit.training.engines import choose_engine, default_chunk
from dpaudit.training.samplers import SamplerSpec
from dpaudit.training.seeds import ModelSeeds

#: The update rules applied to the noisy gradient (``DPSGDConfig.optimizer``).
TRAINING_OPTIMIZERS = ("sgd", "adam")


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


def reference_step(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    noise: torch.Tensor,
    config: DPSGDConfig,
) -> None:
    """One DP-SGD step of one model on the batch ``(x, y)``, in place: the definition
    (Abadi et al. 2016, arXiv:1607.00133, Algorithm 1) that :func:`dpsgd_step` computes for a
    shard.

    For each example, the gradient of its cross-entropy loss, clipped to norm at most
    ``C = config.max_grad_norm`` (Opacus's factor ``min(1, C / (||g_i|| + 1e-6))``, the norm
    over all parameters); their sum plus ``noise`` (a draw of ``N(0, (sigma C)^2 I)``, flat,
    in ``named_parameters`` order), divided by the expected batch size ``B``; then
    ``theta <- theta - lr * g~``. Plain SGD only (Adam is post-processing of ``g~``)."""
    if config.optimizer != "sgd":
        raise ValueError(f"the reference step is plain SGD, not {config.optimizer!r}")
    theta = tuple(model.parameters())  # named_parameters order
    clipped_sum = [torch.zeros_like(t) for t in theta]
    for xi, yi in zip(x, y, strict=True):
        loss = F.cross_entropy(model(xi.unsqueeze(0)), yi.unsqueeze(0))
        g = torch.autograd.grad(loss, theta)
        norm = torch.sqrt(sum(gk.pow(2).sum() for gk in g))
        factor = gradient_space.clip_factor(norm, config.max_grad_norm)
        for total, gk in zip(clipped_sum, g, strict=True):
            total += factor * gk
    offset = 0
    with torch.no_grad():
        for t, total in zip(theta, clipped_sum, strict=True):
            z = noise[offset : offset + t.numel()].view_as(t)
            offset += t.numel()
            t -= config.lr * (total + z) / config.batch_size


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


@dataclass
class StepContext:
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


def step_context(
    template: nn.Module,
    params: dict[str, torch.Tensor],
    buffers: dict[str, torch.Tensor],
    data: ShardData,
    config: DPSGDConfig,
    record: Recording,
    engine: str,
    model_chunk: int | None,
    max_physical_batch: int | None = None,
) -> StepContext:
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
        chunk = default_chunk(eng.name, n_params, per_pass)
    n_models = next(iter(params.values())).shape[0]
    wb_index = None if wb_ids is None else torch.as_tensor(wb_ids, device=dev)
    return StepContext(
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


@dataclass
class TrainState:
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
        ctx: StepContext,
        params: dict[str, torch.Tensor],
        seeds: Sequence[ModelSeeds],
        record: Recording,
    ) -> TrainState:
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

    def optional(self) -> dict[str, torch.Tensor | None]:
        """The optional state (None where this run has none) a checkpoint holds."""
        return {
            "white_box": self.white_box,
            "step_dots": self.step_dots,
            "adam_m": self.adam_m,
            "adam_v": self.adam_v,
        }


def dpsgd_step(
    ctx: StepContext, state: TrainState, batches: list[np.ndarray], a: int, b: int, step: int
) -> None:
    """One DP-SGD step (0-based ``step``) of models ``a`` to ``b - 1`` (Abadi et al. 2016,
    Algorithm 1; :func:`reference_step` for one model): clipped gradient sum, gradient
    canaries, noise, recording, update."""
    m = b - a
    p_c = {k: state.params[k][a:b] for k in ctx.names}
    buf_c = {k: v[a:b] for k, v in ctx.buffers.items()}
    extra = adversary_target_weights(
        batches, a, b, ctx.n_inputs, ctx.partially_informed, ctx.batch_worst_case, ctx.plus_items
    )
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
        update = adam_update(
            state.adam_m[a:b],  # type: ignore[index]
            state.adam_v[a:b],  # type: ignore[index]
            flat.div_(ctx.config.batch_size),
            ctx.config.lr,
            ctx.config.betas,
            ctx.config.eps,
            step + 1,
        )
    else:
        update = flat.mul_(ctx.config.lr / ctx.config.batch_size)  # theta_{t-1} - theta_t
    _check_finite(update, a, step + 1, ctx.config)
    if state.white_box is not None:
        state.white_box[a:b] += _white_box_dots(ctx, p_c, buf_c, update)
    for k, part in zip(ctx.names, _unflatten(ctx, update), strict=True):
        state.params[k][a:b].sub_(part)


def _clipped_input_grad_sum(
    ctx: StepContext,
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
    ctx: StepContext,
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
    ctx: StepContext, flat: torch.Tensor, batches: list[np.ndarray], extra: np.ndarray
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


def _unflatten(ctx: StepContext, flat: torch.Tensor) -> list[torch.Tensor]:
    """Views of a flat (m, P) tensor as the parameters' shapes (m, ...), in ``ctx.names`` order."""
    m = flat.shape[0]
    parts, off = [], 0
    for size, shape in zip(ctx.sizes, ctx.shapes, strict=True):
        parts.append(flat[:, off : off + size].view(m, *shape))
        off += size
    return parts


def _white_box_dots(
    ctx: StepContext,
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
