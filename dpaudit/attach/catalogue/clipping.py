"""Catalogue scripts whose one bug is in what is clipped: plain PyTorch DP-SGD loops
(``torch.func`` per-example gradients), each audited with the framework-neutral core placed
as examples/audit_handwritten.py places it (the canaries' gradient added to the user's sum of
clipped gradients, the noisy sum observed; the sensitivity probe swapped into the per-example
gradients before the clipping, ``canaries.probe_rows``, as docs/own_training.md places it).
Their true epsilons:
:mod:`dpaudit.attach.catalogue.true_epsilon`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dpaudit.attach.catalogue.common import (
    claim_settings,
    clip_rows,
    digits_mlp,
    flat,
    load_params,
    params_of,
    per_example_gradients,
    sgd_step,
)

#: The ``max_grad_norm`` the fast-clipping user asks for, as a fraction of ``train.max_grad_norm``
#: (which the buggy clipping uses instead: Opacus PR #664).
FAST_CLIPPING_ASKED = 0.1
#: Records per microbatch (TF Privacy #620).
MICROBATCH = 2


def fast_clipping_ignores_max_grad_norm(
    data: dict[str, np.ndarray], audit: Any, seed: int, device: str
) -> dict:
    """The user asks for ``max_grad_norm`` 0.1 and scales the noise to it; the clipping
    ignores it and clips at the default 1.0 (Opacus PR #664, fast gradient clipping)."""
    import torch

    run = digits_mlp(data, audit, seed, device)
    sigma, q = run.sigma(), run.q
    max_grad_norm, default_norm = FAST_CLIPPING_ASKED * run.clip, run.clip
    params, grads = params_of(run.model), per_example_gradients(run.model)
    n_params = sum(v.numel() for v in params.values())
    canaries = audit.gradient_canaries(
        n_params, q, max_grad_norm, coordinates=run.coordinates(audit.m)
    )
    gen = run.generator("steps")
    for _ in range(run.steps):
        batch = torch.rand(run.n, generator=gen, device=run.device) < q
        b = int(batch.sum())
        g = canaries.probe_rows(flat(grads(params, run.x[batch], run.y[batch]), b))
        summed = clip_rows(g, default_norm).sum(0)  # BUG: max_grad_norm not used
        summed += torch.from_numpy(canaries.canary_gradient(canaries.draw_step())).to(summed)
        noise = torch.randn(n_params, generator=gen, device=run.device)
        noisy = summed + sigma * max_grad_norm * noise
        canaries.observe(noisy.cpu().numpy())
        sgd_step(params, noisy / run.batch, run.lr)
    load_params(run.model, params)
    return claim_settings(sigma, q, run.steps, run, "fast_clipping_ignores_max_grad_norm")


def microbatch_clipping(data: dict[str, np.ndarray], audit: Any, seed: int, device: str) -> dict:
    """Microbatches of two records (records 2i and 2i + 1, sampled together): each
    microbatch's mean gradient is clipped to C, so adding one record moves its microbatch's
    clipped mean by up to 2C; the accounting assumes C (TF Privacy #620)."""
    import torch

    run = digits_mlp(data, audit, seed, device)
    c = run.clip
    n_micro = run.n // MICROBATCH
    q = 1.0 / -(-n_micro // (run.batch // MICROBATCH))  # microbatches per batch: B / 2
    steps = run.epochs * round(1 / q)
    sigma = run.sigma(q, steps)
    params, grads = params_of(run.model), per_example_gradients(run.model)
    n_params = sum(v.numel() for v in params.values())
    canaries = audit.gradient_canaries(n_params, q, c, coordinates=run.coordinates(audit.m))
    gen = run.generator("steps")
    for _ in range(steps):
        picked = (torch.rand(n_micro, generator=gen, device=run.device) < q).nonzero()[:, 0]
        rows = (MICROBATCH * picked[:, None] + torch.arange(MICROBATCH, device=run.device))
        rows = rows.reshape(-1)  # both records of every sampled microbatch
        g = canaries.probe_rows(flat(grads(params, run.x[rows], run.y[rows]), len(rows)))
        means = g.reshape(len(picked), MICROBATCH, -1).mean(1)
        summed = clip_rows(means, c).sum(0)  # one clipped gradient per microbatch
        summed += torch.from_numpy(canaries.canary_gradient(canaries.draw_step())).to(summed)
        noisy = summed + sigma * c * torch.randn(n_params, generator=gen, device=run.device)
        canaries.observe(noisy.cpu().numpy())
        sgd_step(params, noisy / (run.batch / MICROBATCH), run.lr)
    load_params(run.model, params)
    return claim_settings(sigma, q, steps, run, "microbatch_clipping")


def per_layer_clipping_batch_factor(
    data: dict[str, np.ndarray], audit: Any, seed: int, device: str
) -> dict:
    """Per-layer clipping (each parameter tensor to C / sqrt(layers)) of the per-example
    gradients of the batch's *mean* loss, then multiplied by the batch size to form the sum
    the noise is calibrated for: each example is in effect clipped at b C, not C (the
    "Backpropagation Clipping" bug found by Tramer et al. 2022, arXiv:2202.12219)."""
    import torch

    run = digits_mlp(data, audit, seed, device)
    sigma, q, c = run.sigma(), run.q, run.clip
    params, grads = params_of(run.model), per_example_gradients(run.model)
    n_params = sum(v.numel() for v in params.values())
    per_layer = c / len(params) ** 0.5
    canaries = audit.gradient_canaries(n_params, q, c, coordinates=run.coordinates(audit.m))
    gen = run.generator("steps")
    for _ in range(run.steps):
        batch = torch.rand(run.n, generator=gen, device=run.device) < q
        b = int(batch.sum())
        g = canaries.probe_rows(flat(grads(params, run.x[batch], run.y[batch]), b))
        layers = torch.split(g, [v.numel() for v in params.values()], 1)
        # BUG: the gradients of the mean loss (g / b) are clipped, then scaled back by b
        clipped = [clip_rows(v / max(b, 1), per_layer) for v in layers]
        summed = max(b, 1) * torch.cat(clipped, 1).sum(0)
        summed += torch.from_numpy(canaries.canary_gradient(canaries.draw_step())).to(summed)
        noisy = summed + sigma * c * torch.randn(n_params, generator=gen, device=run.device)
        canaries.observe(noisy.cpu().numpy())
        sgd_step(params, noisy / run.batch, run.lr)
    load_params(run.model, params)
    return claim_settings(sigma, q, run.steps, run, "per_layer_clipping_batch_factor")
