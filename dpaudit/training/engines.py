"""Per-sample-gradient engines of the vectorised trainer: the speed-up, not the definition.

An engine computes, for ``M`` stacked models at once, the clipped per-sample gradients the
DP-SGD step of :mod:`dpaudit.training.step` needs (their sum over a batch, and their dot
products with a direction for the white-box scores). Both engines clip as Opacus's
``DPOptimizer`` does (:func:`clip_factors`); they differ only in how the per-sample gradients
are computed:

* :class:`FuncEngine`: ``torch.func`` (``vmap`` over models of ``vmap`` over samples of
  ``grad``): any model without BatchNorm;
* :class:`StackedEngine`: the ghost-norm engine of :mod:`dpaudit.training.stacked` (plain
  sequential models; 3-4x faster on the CPU for LeNet-5).

Also here: building and stacking the models (:func:`init_models`), the models per chunk
(:func:`default_chunk`) and the logits of a whole shard (:func:`stacked_logits`).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad, vmap

from dpaudit.canaries import gradient_space
from dpaudit.training.seeds import ModelSeeds
from dpaudit.training.stacked import StackedSequential
from dpaudit.training.stacked import supports as stacked_supports

#: Default models per chunk of the stacked engine (see ``train_shard``).
STACKED_CHUNK = 8

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
    return gradient_space.clip_factor(sq.sqrt(), max_grad_norm)


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


def default_model_chunk(n_params: int, batch_size: int, budget_bytes: float = 2**29) -> int:
    """Models per vectorised chunk so that per-sample gradients take about ``budget_bytes``
    (three copies of ``chunk * 1.3 B * P`` floats: the gradients, their squares, the product)."""
    per_model = 3 * 4 * n_params * max(1, math.ceil(1.3 * batch_size))
    return max(1, int(budget_bytes // per_model))


def default_chunk(engine: str, n_params: int, batch_size: int) -> int:
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
