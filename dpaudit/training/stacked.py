"""Clipped per-sample gradient sums for a stack of sequential models without materialising
per-sample gradients of linear layers (the "ghost norm" trick: Goodfellow 2015,
Lee & Kifer 2021, Bu et al. 2023 "book-keeping").

For a linear layer ``z = W a + b`` on one example, the per-sample gradient is ``g a^T`` (``g``
the gradient of that example's loss with respect to ``z``), so

    ||grad_W||^2 = ||g||^2 ||a||^2,     sum_i c_i g_i a_i^T = G^T diag(c) A,

one matrix product per layer instead of ``B`` outer products. The per-sample weight gradients of
a convolution are small for the models here (``out * in * k^2`` numbers per example) and are
materialised, all at once, by one convolution with ``M*B`` groups (Rochette et al. 2019).

Forward and backward passes are written out by hand (the ATen kernels autograd would call,
without its graph), and shaped for one CPU core: see :class:`StackedSequential` and the
helpers below for the layouts and fused steps (measured with ``benchmarks/bench_training.py``).

This is an exact reformulation of per-sample clipping (same numbers as Opacus up to
floating-point round-off; ``tests/training/test_vectorized.py`` checks it), and it applies to models
made only of ``nn.Sequential`` containers and the layers in :data:`SUPPORTED`. The ``torch.func``
path in :mod:`dpaudit.training.engines` handles any other model.

Shapes: ``M`` models, ``B`` examples per model; parameters are stacked along a leading ``M``
dimension, inputs are ``(M, B, ...)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from dpaudit.canaries.gradient_space import clip_factor

SUPPORTED = (
    nn.Linear,
    nn.Conv2d,
    nn.Tanh,
    nn.ReLU,
    nn.Sigmoid,
    nn.AvgPool2d,
    nn.MaxPool2d,
    nn.Flatten,
    nn.Identity,
)


@dataclass
class _Layer:
    module: nn.Module
    prefix: str  # parameter-name prefix, e.g. "features.0."


def flatten_sequential(model: nn.Module, prefix: str = "") -> list[_Layer] | None:
    """The leaf layers of a model built only from ``nn.Sequential`` and :data:`SUPPORTED`
    layers, in execution order; ``None`` if the model has any other structure."""
    if isinstance(model, nn.Sequential):
        out: list[_Layer] = []
        for name, child in model.named_children():
            sub = flatten_sequential(child, f"{prefix}{name}.")
            if sub is None:
                return None
            out += sub
        return out
    if type(model) in SUPPORTED:
        if isinstance(model, nn.Conv2d) and (
            model.groups != 1 or model.padding_mode != "zeros" or isinstance(model.padding, str)
        ):
            return None
        if isinstance(model, nn.Flatten) and model.start_dim != 1:
            return None
        return [_Layer(model, prefix)]
    return None


def supports(model: nn.Module) -> bool:
    """Whether :class:`StackedSequential` can run ``model``."""
    return flatten_sequential(model) is not None


def _conv_per_sample_weight_grad(mod: nn.Conv2d, a: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """Per-sample weight gradients (M, B, out, in*k*k) of a convolution with input ``a``
    (M, B, in, H, W) and output gradient ``g`` (M, B, out, Ho, Wo).

    The gradient of example ``s`` is the cross-correlation of its input with its output
    gradient; all ``M*B`` of them are one grouped convolution with the input channels as the
    batch (Rochette et al. 2019): stride and dilation swap roles.
    """
    m, b, c, hh, ww = a.shape
    out_c, ho, wo = g.shape[2:]
    kh, kw = mod.kernel_size
    if c > 1:
        # the weight gradient of one convolution with M*B groups (each example's channels a
        # group) is the stack of per-example weight gradients; oneDNN's backward-weight
        # kernel, on free views, no permutation. On this CPU ~1.5x faster than the grouped
        # forward below for LeNet-5's second convolution, slower for a single input channel.
        return _conv_backward(
            mod,
            g.reshape(1, m * b * out_c, ho, wo),
            a.reshape(1, m * b * c, hh, ww),
            a.new_empty(m * b * out_c, c, kh, kw),
            m * b,
            want="weight",
        ).view(m, b, out_c, c * kh * kw)
    inp = a.permute(2, 0, 1, 3, 4).reshape(c, m * b, hh, ww)
    ker = g.reshape(m * b * out_c, 1, ho, wo)
    r = F.conv2d(
        inp, ker, padding=mod.padding, stride=mod.dilation, dilation=mod.stride, groups=m * b
    )  # (c, m*b*out, >=kh, >=kw)
    r = r[:, :, :kh, :kw]
    return r.reshape(c, m, b, out_c, kh * kw).permute(1, 2, 3, 0, 4).reshape(m, b, out_c, -1)


_PARAM_LAYERS = (nn.Linear, nn.Conv2d)


def _numpy_ok(h: torch.Tensor) -> bool:
    return h.device.type == "cpu" and h.dtype in (torch.float32, torch.float64)


def _tanh(h: torch.Tensor, inplace: bool) -> torch.Tensor:
    """``tanh(h)``; on the CPU with numpy's SIMD ``tanh`` (float32: ~10x faster than
    ``torch.tanh`` on this machine, within a few ulp), in place if ``inplace``."""
    if not _numpy_ok(h):
        return torch.tanh(h)
    out = h if inplace else torch.empty_like(h)
    np.tanh(h.numpy(), out=out.numpy())
    return out


def _tiling_pool(mod: nn.AvgPool2d) -> bool:
    """Whether an average pooling tiles its input: kernel = stride, no padding, floor mode."""
    k = _pair(mod.kernel_size)
    st = _pair(mod.stride if mod.stride is not None else mod.kernel_size)
    return (
        k == st
        and _pair(mod.padding) == [0, 0]
        and not mod.ceil_mode
        and mod.divisor_override is None
    )


def _tiling_avg_pool(
    h: torch.Tensor, k: list[int], ws: _Workspace | None = None, key: str = ""
) -> torch.Tensor:
    """Average pooling (..., H, W) -> (..., H // kh, W // kw) with non-overlapping ``k``
    windows, as a sum of ``kh * kw`` strided views (faster than ``avg_pool2d`` on the CPU);
    the output in workspace buffer ``key`` if ``ws`` is given."""
    kh, kw = k
    ho, wo = h.shape[-2] // kh, h.shape[-1] // kw
    out = None if ws is None else ws.get(key, (*h.shape[:-2], ho, wo), h)
    first = True
    for i in range(kh):
        for j in range(kw):
            v = h[..., i : i + kh * ho : kh, j : j + kw * wo : kw]
            if first:
                out = v.clone() if out is None else out.copy_(v)
                first = False
            else:
                out.add_(v)  # type: ignore[union-attr]
    assert out is not None
    return out.mul_(1.0 / (kh * kw))


def _tiling_avg_pool_backward(
    g: torch.Tensor,
    a: torch.Tensor,
    k: list[int],
    tanh_out: torch.Tensor | None,
    ws: _Workspace | None = None,
    key: str = "",
) -> torch.Tensor:
    """Gradient with respect to the input ``a`` of :func:`_tiling_avg_pool` from the output
    gradient ``g``; with ``tanh_out`` (the pooled input is ``tanh`` of something) also through
    that tanh. In workspace buffer ``key`` if ``ws`` is given."""
    kh, kw = k
    ho, wo = g.shape[-2:]
    exact = a.shape[-2] == kh * ho and a.shape[-1] == kw * wo
    out = torch.empty_like(a) if ws is None else ws.get(key, a.shape, a)
    if not exact:
        out.zero_()
    gq = g * (1.0 / (kh * kw))
    for i in range(kh):
        for j in range(kw):
            out[..., i : i + kh * ho : kh, j : j + kw * wo : kw] = gq
    if tanh_out is not None:
        torch.ops.aten.tanh_backward.grad_input(out, tanh_out, grad_input=out)
    return out


class _Workspace:
    """Large per-chunk buffers kept across calls, one per key, grown on demand: on the CPU a
    fresh multi-MB tensor in every chunk costs page faults comparable to the work done in it.
    A buffer's contents live until the next call that asks for the same key."""

    def __init__(self) -> None:
        self._bufs: dict[str, torch.Tensor] = {}

    def get(self, key: str, shape, like: torch.Tensor) -> torch.Tensor:
        n = math.prod(shape)
        t = self._bufs.get(key)
        if t is None or t.numel() < n or t.dtype != like.dtype or t.device != like.device:
            t = torch.empty(n + n // 4, dtype=like.dtype, device=like.device)
            self._bufs[key] = t
        return t[:n].view(shape)


def _pair(v) -> list[int]:
    return [int(v), int(v)] if isinstance(v, int) else [int(t) for t in v]


def _conv_input_grad(
    mod: nn.Conv2d,
    a: torch.Tensor,
    g: torch.Tensor,
    w: torch.Tensor,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """Gradient (M, B, in, H, W) with respect to the input ``a`` of a convolution, from the
    output gradient ``g`` (M, B, out, Ho, Wo) and the stacked weights ``w``; one ATen
    convolution backward per model (stacked into ``out`` if given)."""
    return torch.stack(
        [_conv_backward(mod, g[i], a[i], w[i], 1, want="input") for i in range(a.shape[0])],
        out=out,
    )


def _conv_backward(
    mod: nn.Conv2d,
    g: torch.Tensor,
    a: torch.Tensor,
    w: torch.Tensor,
    groups: int,
    want: str,
) -> torch.Tensor:
    """One ATen convolution backward with ``mod``'s stride, padding and dilation (no bias):
    the gradient with respect to the input (``want="input"``) or the weight (``"weight"``)
    of a convolution of input ``a`` with weight ``w`` in ``groups`` groups, given the output
    gradient ``g``; only that gradient is computed."""
    index = {"input": 0, "weight": 1}[want]
    mask = [index == 0, index == 1, False]
    return torch.ops.aten.convolution_backward(
        g,
        a,
        w,
        None,
        _pair(mod.stride),
        _pair(mod.padding),
        _pair(mod.dilation),
        False,
        [0, 0],
        groups,
        mask,
    )[index]


class StackedSequential:
    """Forward, backward and clipped per-sample gradient sums for ``M`` stacked copies of one
    sequential architecture (parameters as returned by ``torch.func.stack_module_state``).

    Activations are laid out (M, B, ...): linear layers are batched matrix products over
    models computed as ``z^T = W h^T`` (so a linear layer's output is the transposed view of a
    contiguous (M, out, B) tensor, and its input gradient is produced in the same layout),
    convolutions one ordinary convolution per model (on the CPU faster than one grouped
    convolution over all models: 2-4x for LeNet-5's layers), a following ``tanh`` written
    straight into the stacked output, pooling on the free view (M*B, C, H, W).
    """

    def __init__(self, template: nn.Module) -> None:
        layers = flatten_sequential(template)
        if layers is None:
            raise ValueError(
                f"{type(template).__name__} is not a plain stack of nn.Sequential and "
                f"{[c.__name__ for c in SUPPORTED]} layers"
            )
        self.layers = layers
        self._ws = _Workspace()
        # whether the first layer with parameters is a Linear layer applied to the (flattened)
        # input itself: its ghost norm can then use precomputed squared norms of the examples
        self.input_linear = False
        for lay in layers:
            if isinstance(lay.module, nn.Flatten | nn.Identity):
                continue
            self.input_linear = isinstance(lay.module, nn.Linear)
            break

    def _forward(self, params: dict[str, torch.Tensor], x: torch.Tensor):
        """Logits (M, B, classes) and the tape the manual backward pass reads: per layer, what
        its backward needs (a parametrised layer's input, an activation's output, a pooling
        layer's input and indices).

        Long on purpose: one branch per layer kind of :data:`SUPPORTED`, sharing the state
        that makes it fast (``owned``: whether ``h`` may be overwritten in place; a ``tanh``
        fused into the convolution before it; the workspace buffers); split into functions,
        each would pass that state in and out. The reference it must match is
        :class:`~dpaudit.training.engines.FuncEngine` (``tests/training/test_vectorized.py``)."""
        m, b = x.shape[:2]
        h = x.contiguous()
        tape: list[tuple[_Layer, object]] = []
        owned = False  # whether h is a fresh buffer of this pass (may be overwritten in place)
        fused_tanh = False
        for li, lay in enumerate(self.layers):
            mod = lay.module
            if fused_tanh:  # this Tanh was applied by the convolution before it
                fused_tanh = False
                tape.append((lay, h))
                continue
            # the input of this layer is a buffer of this pass that nothing else reads
            owned = bool(tape) and isinstance(
                tape[-1][0].module, nn.Linear | nn.Conv2d | nn.AvgPool2d | nn.MaxPool2d
            )
            if isinstance(mod, nn.Linear):
                if h.dim() != 3:
                    raise ValueError(f"{lay.prefix}: Linear expects flat inputs, got {h.shape}")
                w = params[lay.prefix + "weight"]  # (M, out, in)
                # z^T = W h^T + b, (M, out, B): on the CPU 20-30% faster than h W^T for the
                # shapes here; z is its transposed view, and the next linear layer's h^T is
                # contiguous again
                if mod.bias is not None:
                    zt = torch.baddbmm(
                        params[lay.prefix + "bias"][:, :, None], w, h.transpose(1, 2)
                    )
                else:
                    zt = torch.bmm(w, h.transpose(1, 2))
                tape.append((lay, h))
                h = zt.transpose(1, 2)
            elif isinstance(mod, nn.Conv2d):
                w = params[lay.prefix + "weight"]  # (M, out, c, k, k)
                bias = params[lay.prefix + "bias"] if mod.bias is not None else None
                nxt = self.layers[li + 1].module if li + 1 < len(self.layers) else None
                fused_tanh = isinstance(nxt, nn.Tanh) and _numpy_ok(h)
                z = None
                for i in range(m):
                    zi = F.conv2d(
                        h[i],
                        w[i],
                        None if bias is None else bias[i],
                        stride=mod.stride,
                        padding=mod.padding,
                        dilation=mod.dilation,
                    )
                    if z is None:
                        z = self._ws.get(f"conv{li}", (m, *zi.shape), zi)
                    if fused_tanh:  # write tanh(conv) straight into the stacked output
                        np.tanh(zi.numpy(), out=z[i].numpy())
                    else:
                        z[i] = zi
                tape.append((lay, h))
                h = z
            elif isinstance(mod, nn.Flatten):
                tape.append((lay, h.shape))
                h = h.reshape(m, b, -1)
            elif isinstance(mod, nn.AvgPool2d) and _tiling_pool(mod):
                tape.append((lay, h))
                h = _tiling_avg_pool(h, _pair(mod.kernel_size), self._ws, f"pool{li}")
            elif isinstance(mod, nn.AvgPool2d):
                y = F.avg_pool2d(
                    h.reshape(m * b, *h.shape[2:]),
                    mod.kernel_size,
                    mod.stride,
                    mod.padding,
                    mod.ceil_mode,
                    mod.count_include_pad,
                    mod.divisor_override,
                )
                tape.append((lay, h))
                h = y.view(m, b, *y.shape[1:])
            elif isinstance(mod, nn.MaxPool2d):
                y, ind = F.max_pool2d(
                    h.reshape(m * b, *h.shape[2:]),
                    mod.kernel_size,
                    mod.stride,
                    mod.padding,
                    mod.dilation,
                    ceil_mode=mod.ceil_mode,
                    return_indices=True,
                )
                tape.append((lay, (h, ind)))
                h = y.view(m, b, *y.shape[1:])
            elif isinstance(mod, nn.Tanh):
                h = _tanh(h, inplace=owned)
                tape.append((lay, h))
            elif isinstance(mod, nn.Sigmoid):
                h = torch.sigmoid(h)
                tape.append((lay, h))
            elif isinstance(mod, nn.ReLU):
                h = torch.relu(h)
                tape.append((lay, h))
            else:  # Identity
                tape.append((lay, None))
        return h, tape

    def logits(self, params: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        """Logits (M, B, classes) of model ``m`` on ``x[m]``."""
        with torch.no_grad():
            return self._forward(params, x)[0].clone()  # not a workspace view

    def _grads(self, params, x, y):
        """Forward and a hand-written backward pass of the summed cross-entropy loss (the same
        ATen backward kernels autograd would call, without its bookkeeping); per parametrised
        layer ``(layer, a, g)``: linear ``a`` its input and ``g`` the gradient with respect to
        its output; convolution ``a`` the per-sample weight gradients and ``g`` the output
        gradient summed over positions.

        Long on purpose, as :meth:`_forward`: the backward pass walks the tape in reverse with
        one branch per layer kind and reuses buffers in place across branches; the torch.func
        engine (:class:`~dpaudit.training.engines.FuncEngine`) is the reference it is tested
        against."""
        with torch.no_grad():
            out, tape = self._forward(params, x.detach())
            # d/dz of sum_i CE(z_i, y_i) = softmax(z_i) - onehot(y_i)
            # (softmax over dim 1 of the (M, K, B) layout a final linear layer produces: on the
            # CPU ~10x faster than over a last dimension of 10 classes)
            g = torch.softmax(out.transpose(1, 2), 1).transpose(1, 2)
            g.scatter_add_(
                -1, y[..., None], torch.full(y.shape + (1,), -1.0, dtype=g.dtype, device=g.device)
            )
            first = next(
                (i for i, (lay, _) in enumerate(tape) if isinstance(lay.module, _PARAM_LAYERS)),
                len(tape),
            )
            items = []
            skip_tanh = -1
            for i in range(len(tape) - 1, first - 1, -1):
                lay, saved = tape[i]
                mod = lay.module
                if isinstance(mod, nn.Linear):
                    items.append((lay, saved, g))
                    if i > first:
                        w = params[lay.prefix + "weight"]
                        if saved.dim() == 3 and saved.transpose(1, 2).is_contiguous():
                            # the layer's input is the (M, in, B) layout of the linear layer
                            # below: produce the gradient in that layout too, so that the
                            # activation backward between them runs on matching strides
                            # (~30x faster than on mismatched ones)
                            g = torch.bmm(w.transpose(1, 2), g.transpose(1, 2)).transpose(1, 2)
                        else:
                            g = torch.bmm(g, w)
                elif isinstance(mod, nn.Conv2d):
                    a = saved
                    # (the output gradient is only needed summed over positions: the bias's)
                    gw = _conv_per_sample_weight_grad(mod, a, g)
                    items.append((lay, gw, g.sum((-1, -2))))
                    if i > first:
                        g = _conv_input_grad(
                            mod,
                            a,
                            g,
                            params[lay.prefix + "weight"],
                            self._ws.get(f"gconv{i}", a.shape, a),
                        )
                elif isinstance(mod, nn.Flatten):
                    g = g.reshape(saved)
                elif isinstance(mod, nn.Tanh):
                    if i != skip_tanh:
                        g = torch.ops.aten.tanh_backward(g, saved)
                elif isinstance(mod, nn.Sigmoid):
                    g = torch.ops.aten.sigmoid_backward(g, saved)
                elif isinstance(mod, nn.ReLU):
                    g = torch.ops.aten.threshold_backward(g, saved, 0)
                elif isinstance(mod, nn.AvgPool2d) and _tiling_pool(mod):
                    if i > 0 and isinstance(tape[i - 1][0].module, nn.Tanh):
                        # pool and tanh backward fused: one pass over the large gradient
                        g = _tiling_avg_pool_backward(
                            g, saved, _pair(mod.kernel_size), tape[i - 1][1], self._ws, f"gpool{i}"
                        )
                        skip_tanh = i - 1
                    else:
                        g = _tiling_avg_pool_backward(
                            g, saved, _pair(mod.kernel_size), None, self._ws, f"gpool{i}"
                        )
                elif isinstance(mod, nn.AvgPool2d):
                    a = saved
                    k, st, pad = _pair(mod.kernel_size), _pair(mod.stride), _pair(mod.padding)
                    g = torch.ops.aten.avg_pool2d_backward(
                        g.reshape(-1, *g.shape[2:]),
                        a.reshape(-1, *a.shape[2:]),
                        k,
                        st,
                        pad,
                        mod.ceil_mode,
                        mod.count_include_pad,
                        mod.divisor_override,
                    ).view(a.shape)
                elif isinstance(mod, nn.MaxPool2d):
                    a, ind = saved
                    g = torch.ops.aten.max_pool2d_with_indices_backward(
                        g.reshape(-1, *g.shape[2:]),
                        a.reshape(-1, *a.shape[2:]),
                        _pair(mod.kernel_size),
                        _pair(mod.stride),
                        _pair(mod.padding),
                        _pair(mod.dilation),
                        mod.ceil_mode,
                        ind,
                    ).view(a.shape)
            items.reverse()
        return items

    def _sq_norms(self, items, x_sqnorm=None) -> tuple[torch.Tensor, list]:
        """Per-sample squared gradient norms (M, B) and the per-layer pieces reused later.

        Layer items: linear ``a`` (M, B, in), ``g`` (M, B, out); convolution ``a`` the
        per-sample weight gradient (M, B, out, in*k*k), ``g`` the output gradient summed over
        positions (M, B, out) (the per-sample bias gradient). ``x_sqnorm`` (M, B): the squared
        norms of the flattened inputs, used for a first linear layer on the input instead of
        recomputing them.
        """
        total = None
        pieces = []
        for i, (lay, a, g) in enumerate(items):
            mod = lay.module
            if isinstance(mod, nn.Linear):
                if i == 0 and self.input_linear and x_sqnorm is not None:
                    a_sq = x_sqnorm
                else:
                    a_sq = (a * a).sum(-1)
                # (t * t).sum(-1), not vector_norm: ~5-25x faster on these small (M, B, k)
                # tensors on the CPU
                g_sq = (g * g).sum(-1)
                sq = a_sq * g_sq
                if mod.bias is not None:
                    sq = sq + g_sq
                pieces.append(None)
            else:  # conv: ``a`` is already the per-sample weight gradient
                gw = a
                sq = gw.pow(2).sum((-1, -2))
                if mod.bias is not None:
                    sq = sq + (g * g).sum(-1)
                pieces.append(gw)
            total = sq if total is None else total + sq
        assert total is not None
        return total, pieces

    def clipped_grad_sum(
        self,
        params: dict[str, torch.Tensor],
        x: torch.Tensor,
        y: torch.Tensor,
        weight: torch.Tensor,
        max_grad_norm: float,
        x_sqnorm: torch.Tensor | None = None,
    ) -> dict[str, torch.Tensor]:
        """Same contract as :meth:`dpaudit.training.engines.FuncEngine.clipped_grad_sum`;
        ``x_sqnorm`` (M, B), optional: squared norms of the flattened inputs (saves a pass over
        them)."""
        items = self._grads(params, x, y)
        sq, pieces = self._sq_norms(items, x_sqnorm)
        factor = clip_factor(sq.sqrt(), max_grad_norm) * weight  # (M, B)
        out: dict[str, torch.Tensor] = {}
        for (lay, a, g), gw in zip(items, pieces, strict=True):
            mod = lay.module
            if isinstance(mod, nn.Linear):
                gc = g * factor[..., None]  # (M, B, out)
                out[lay.prefix + "weight"] = torch.bmm(gc.transpose(1, 2), a)
                if mod.bias is not None:
                    out[lay.prefix + "bias"] = gc.sum(1)
            else:
                w = params[lay.prefix + "weight"]
                out[lay.prefix + "weight"] = torch.bmm(
                    factor[:, None, :], gw.reshape(gw.shape[0], gw.shape[1], -1)
                ).reshape(w.shape)
                if mod.bias is not None:
                    out[lay.prefix + "bias"] = torch.einsum("mb,mbo->mo", factor, g)
        return out

    def clipped_dot(
        self,
        params: dict[str, torch.Tensor],
        x: torch.Tensor,
        y: torch.Tensor,
        max_grad_norm: float,
        direction: dict[str, torch.Tensor],
    ) -> torch.Tensor:
        """``<direction_m, clip(grad loss(params_m; x[m, b]))>`` for every (m, b): (M, B)."""
        items = self._grads(params, x, y)
        sq, pieces = self._sq_norms(items)
        factor = clip_factor(sq.sqrt(), max_grad_norm)
        dot = torch.zeros_like(factor)
        for (lay, a, g), gw in zip(items, pieces, strict=True):
            mod = lay.module
            u = direction[lay.prefix + "weight"]
            if isinstance(mod, nn.Linear):
                # <U, g a^T> = g^T U a
                dot = dot + (torch.bmm(g, u) * a).sum(-1)
            else:
                dot = dot + torch.einsum("mboi,moi->mb", gw, u.reshape(u.shape[0], u.shape[1], -1))
            if mod.bias is not None:
                dot = dot + torch.einsum("mbo,mo->mb", g, direction[lay.prefix + "bias"])
        return dot * factor
