"""Audit a hand-written DP-SGD loop (plain PyTorch, no Opacus) with the framework-neutral core.

The lines marked ``# dpaudit`` are the audit; the rest is an ordinary DP-SGD loop (Poisson
sampling, per-example gradients with ``torch.func``, clipping, Gaussian noise) on scikit-learn's
bundled 8x8 digits. The same calls audit a JAX loop: hand ``observe`` the noisy sum as a
NumPy array. ``record_batch`` hands in the indices of each step's records, so the printed
conformance report also checks the sampling against the claim (docs/own_training.md).
Seconds on one CPU core::

    python examples/audit_handwritten.py
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from torch import nn
from torch.func import functional_call, grad, vmap

from dpaudit import scores
from dpaudit.attach import GradientCanaries, low_gradient_coordinates  # dpaudit
from dpaudit.data.bundled import load_digits


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--m", type=int, default=1000, help="canaries")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--sample-rate", type=float, default=0.3)
    p.add_argument(
        "--batch-size", type=float, default=539.0, help="the update divisor, a constant"
    )
    p.add_argument("--noise-multiplier", type=float, default=3.0)
    p.add_argument("--clip", type=float, default=1.0)
    p.add_argument("--lr", type=float, default=2.0)
    p.add_argument("--delta", type=float, default=1e-5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="results/own_training_handwritten")
    args = p.parse_args(argv)
    torch.manual_seed(args.seed)
    digits = load_digits()
    x = torch.tensor(digits["x"], dtype=torch.float32).reshape(-1, 64) / 16.0
    y = torch.tensor(digits["y"])
    n, q, c, sigma = len(y), args.sample_rate, args.clip, args.noise_multiplier

    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))
    params = {k: v.detach() for k, v in model.named_parameters()}
    n_params = sum(v.numel() for v in params.values())

    def loss(ps, xi, yi):
        return nn.functional.cross_entropy(functional_call(model, ps, (xi[None],)), yi[None])

    per_example_grads = vmap(grad(loss), in_dims=(None, 0, 0))

    where = low_gradient_coordinates(model, [(x, y)], args.m, c, seed=args.seed)  # dpaudit
    canaries = GradientCanaries(
        args.m, n_params, q, c, seed=args.seed, coordinates=where
    )  # dpaudit
    for _ in range(args.steps):
        batch = torch.rand(n) < q  # Poisson sampling
        canaries.record_batch(batch.nonzero().flatten().numpy(), n)  # dpaudit: which records
        g = per_example_grads(params, x[batch], y[batch])
        flat = torch.cat([g[k].reshape(int(batch.sum()), -1) for k in params], dim=1)
        flat = canaries.probe_rows(flat)  # dpaudit: sensitivity probe, before the clipping
        factor = (c / (flat.norm(dim=1) + 1e-6)).clamp(max=1.0)
        summed = (factor[:, None] * flat).sum(0)
        draw = canaries.draw_step()  # dpaudit
        summed += torch.from_numpy(canaries.canary_gradient(draw)).float()  # dpaudit
        noisy = summed + sigma * c * torch.randn(n_params)
        canaries.observe(noisy.numpy())  # dpaudit
        # divide by a constant: a divisor computed from the data (q * n) would reveal n
        update, offset = noisy / args.batch_size, 0
        for k, v in params.items():
            params[k] = v - args.lr * update[offset : offset + v.numel()].view_as(v)
            offset += v.numel()

    # the claim from this loop's own settings (sample rate and steps as the canaries saw them)
    result = canaries.audit(delta=args.delta, accountant="prv", noise_multiplier=sigma)  # dpaudit
    scores.write(Path(args.out) / "scores.npz", result.score_file)  # dpaudit
    print(result)  # dpaudit
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
