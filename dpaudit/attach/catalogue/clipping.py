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
    loop,
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
    run = digits_mlp(data, audit, seed, device)
    sigma, q = run.sigma(), run.q
    max_grad_norm, default_norm = FAST_CLIPPING_ASKED * run.clip, run.clip
    lp = loop(run, audit, q, max_grad_norm)
    for _ in range(run.steps):
        batch = lp.poisson_batch(run.n, q)
        g = lp.canaries.probe_rows(lp.gradients(batch, int(batch.sum())))
        summed = clip_rows(g, default_norm).sum(0)  # BUG: max_grad_norm not used
        lp.release(lp.with_canaries(summed) + sigma * max_grad_norm * lp.noise(), run.batch)
    lp.finish()
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
    lp = loop(run, audit, q, c)
    for _ in range(steps):
        picked = lp.poisson_batch(n_micro, q).nonzero()[:, 0]
        rows = (MICROBATCH * picked[:, None] + torch.arange(MICROBATCH, device=run.device))
        rows = rows.reshape(-1)  # both records of every sampled microbatch
        g = lp.canaries.probe_rows(lp.gradients(rows, len(rows)))
        means = g.reshape(len(picked), MICROBATCH, -1).mean(1)
        summed = clip_rows(means, c).sum(0)  # one clipped gradient per microbatch
        lp.release(lp.with_canaries(summed) + sigma * c * lp.noise(), run.batch / MICROBATCH)
    lp.finish()
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
    lp = loop(run, audit, q, c)
    per_layer = c / len(lp.params) ** 0.5
    for _ in range(run.steps):
        batch = lp.poisson_batch(run.n, q)
        b = int(batch.sum())
        g = lp.canaries.probe_rows(lp.gradients(batch, b))
        layers = torch.split(g, [v.numel() for v in lp.params.values()], 1)
        # BUG: the gradients of the mean loss (g / b) are clipped, then scaled back by b
        clipped = [clip_rows(v / max(b, 1), per_layer) for v in layers]
        summed = max(b, 1) * torch.cat(clipped, 1).sum(0)
        lp.release(lp.with_canaries(summed) + sigma * c * lp.noise(), run.batch)
    lp.finish()
    return claim_settings(sigma, q, run.steps, run, "per_layer_clipping_batch_factor")
