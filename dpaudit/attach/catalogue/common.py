"""The setup every catalogue script shares, written once: the data, the model, the user's
hyper-parameters, the documented canary placement and the two training loops a user writes.

Everything here is what a user's script holds before its one bug: the experiment's data as
tensors, the MLP of ``model.hidden`` units, the hyper-parameters of ``train`` (expected batch
B, epochs, learning rate, clipping norm C, delta, accountant), the noise multiplier the user's
accountant calibrates for the claim (``train.target_epsilons``), and the canary coordinates
of :func:`dpaudit.attach.low_gradient_coordinates` (docs/own_training.md, "Placement": the
data and the initial model only, never the bug).
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpaudit.keys import CLAIMED_EPSILON
from dpaudit.seeding import derive_seed


@dataclass
class Run:
    """One user's training setup (tensors on ``device``)."""

    x: Any
    y: Any
    x_test: Any
    y_test: Any
    model: Any
    batch: int
    epochs: int
    lr: float
    clip: float
    delta: float
    accountant: str
    target: float
    seed: int
    device: str

    @property
    def n(self) -> int:
        return len(self.y)

    @property
    def steps_per_epoch(self) -> int:
        """``len(DataLoader(data, batch_size=B))``: Opacus' 1 / sample_rate."""
        return math.ceil(self.n / self.batch)

    @property
    def q(self) -> float:
        return 1.0 / self.steps_per_epoch

    @property
    def steps(self) -> int:
        return self.epochs * self.steps_per_epoch

    def sigma(self, q: float | None = None, steps: int | None = None) -> float:
        """The noise multiplier the user's accountant gives for the target epsilon at
        ``q`` and ``steps`` (default: this run's), as ``make_private_with_epsilon`` does."""
        from dpaudit.accounting.dpsgd import calibrate_noise

        q = self.q if q is None else q
        steps = self.steps if steps is None else steps
        return calibrate_noise(self.target, self.delta, q, steps, self.accountant)

    def coordinates(self, m: int) -> np.ndarray:
        """The documented canary placement (data and initial model only)."""
        from dpaudit.attach import low_gradient_coordinates

        return low_gradient_coordinates(self.model, [(self.x, self.y)], m, self.clip, self.seed)

    def generator(self, what: str, device: str | None = None) -> Any:
        """A generator seeded from the run seed and ``what``, on ``device`` (default the
        run's; a DataLoader's sampler needs ``"cpu"``)."""
        import torch

        gen = torch.Generator(device=device or self.device)
        return gen.manual_seed(derive_seed(self.seed, "catalogue", what) % 2**31)

    def accuracy(self, model: Any = None) -> float:
        import torch

        with torch.no_grad():
            out = (model or self.model)(self.x_test).argmax(1)
            return float((out == self.y_test).float().mean())


def digits_mlp(
    data: dict[str, np.ndarray], audit: Any, seed: int, device: str, n: int | None = None
) -> Run:
    """The user's data (the first ``n`` training records; default all) and MLP, with the
    experiment's hyper-parameters (``audit.train``, ``audit.model``)."""
    import torch
    from torch import nn

    torch.manual_seed(derive_seed(seed, "catalogue", "init") % 2**31)
    x = torch.as_tensor(np.asarray(data["x_train"]), dtype=torch.float32).flatten(1)[:n]
    y = torch.as_tensor(np.asarray(data["y_train"]), dtype=torch.long)[:n]
    x_test = torch.as_tensor(np.asarray(data["x_test"]), dtype=torch.float32).flatten(1)
    y_test = torch.as_tensor(np.asarray(data["y_test"]), dtype=torch.long)
    n_classes = int(max(y.max(), y_test.max())) + 1
    hidden = (audit.model.get("hidden") or [256])[0]
    model = nn.Sequential(nn.Linear(x.shape[1], hidden), nn.ReLU(), nn.Linear(hidden, n_classes))
    t = audit.train
    return Run(
        x=x.to(device),
        y=y.to(device),
        x_test=x_test.to(device),
        y_test=y_test.to(device),
        model=model.to(device),
        batch=int(t["batch_size"]),
        epochs=int(t["epochs"]),
        lr=float(t["lr"]),
        clip=float(t["max_grad_norm"]),
        delta=float(audit.delta),
        accountant=str(t["accountant"]),
        target=float(audit.target_epsilon),
        seed=seed,
        device=device,
    )


@dataclass
class Loop:
    """A hand-written DP-SGD loop as examples/audit_handwritten.py writes it, before its bug:
    the parameters, their per-example gradients, the Dirac gradient canaries at the
    low-gradient coordinates (:func:`loop`) and the steps' generator."""

    run: Run
    params: dict[str, Any]
    grads: Any
    n_params: int
    canaries: Any
    gen: Any

    def poisson_batch(self, n: int, q: float) -> Any:
        """A Poisson batch of ``n`` records (or microbatches) at rate ``q``: a boolean mask."""
        import torch

        return torch.rand(n, generator=self.gen, device=self.run.device) < q

    def gradients(self, rows: Any, b: int) -> Any:
        """The (b, n_params) per-example gradients of the training records ``rows``."""
        return flat(self.grads(self.params, self.run.x[rows], self.run.y[rows]), b)

    def with_canaries(self, summed: Any) -> Any:
        """The clipped sum plus this step's canary gradient (the canaries' noise call)."""
        import torch

        step = self.canaries.canary_gradient(self.canaries.draw_step())
        return summed + torch.from_numpy(step).to(summed)

    def noise(self) -> Any:
        """Standard normal noise, one value per parameter."""
        import torch

        return torch.randn(self.n_params, generator=self.gen, device=self.run.device)

    def release(self, noisy: Any, scale: float) -> None:
        """The canaries observe the noisy sum; the update is ``noisy / scale``."""
        self.canaries.observe(noisy.cpu().numpy())
        sgd_step(self.params, noisy / scale, self.run.lr)

    def finish(self) -> None:
        """The trained parameters back into the model (for its test accuracy)."""
        load_params(self.run.model, self.params)


def loop(run: Run, audit: Any, q: float, clip: float) -> Loop:
    """The :class:`Loop` of ``run``: canaries at sample rate ``q`` and clipping norm ``clip``
    (what the user's accounting assumes), placed as docs/own_training.md places them."""
    params, grads = params_of(run.model), per_example_gradients(run.model)
    n_params = sum(v.numel() for v in params.values())
    canaries = audit.gradient_canaries(n_params, q, clip, coordinates=run.coordinates(audit.m))
    return Loop(run, params, grads, n_params, canaries, run.generator("steps"))


def train_opacus(
    model: Any, optimizer: Any, loader: Any, epochs: int, physical_batch: int | None = None
) -> None:
    """The user's ordinary Opacus training loop; with ``physical_batch``, each epoch through
    Opacus' ``BatchMemoryManager`` (physical batches of at most that size)."""
    import torch

    loss_fn = torch.nn.CrossEntropyLoss()
    for _ in range(epochs):
        context: Any = contextlib.nullcontext(loader)
        if physical_batch is not None:
            from opacus.utils.batch_memory_manager import BatchMemoryManager

            context = BatchMemoryManager(
                data_loader=loader, max_physical_batch_size=physical_batch, optimizer=optimizer
            )
        with context as batches:
            for xb, yb in batches:
                optimizer.zero_grad()
                loss_fn(model(xb), yb).backward()
                optimizer.step()


def per_example_gradients(model: Any) -> Any:
    """``fn(params, xb, yb) -> {name: (b, *shape)}``: the user's ``torch.func`` per-example
    gradients of the cross-entropy (as examples/audit_handwritten.py)."""
    import torch
    from torch.func import functional_call, grad, vmap

    def loss_one(p: dict[str, Any], xi: Any, yi: Any) -> Any:
        out = functional_call(model, p, (xi[None],))
        return torch.nn.functional.cross_entropy(out, yi[None])

    return vmap(grad(loss_one), in_dims=(None, 0, 0))


def flat(grads: dict[str, Any], b: int) -> Any:
    """Per-example gradients as a (b, n_params) matrix."""
    import torch

    return torch.cat([v.reshape(b, -1) for v in grads.values()], 1)


def clip_rows(g: Any, clip: float) -> Any:
    """Each row rescaled to norm at most ``clip`` (per-example clipping, with the library's
    one clip factor, :func:`dpaudit.canaries.gradient_space.clip_factor`)."""
    from dpaudit.canaries.gradient_space import clip_rows as clip_each

    return clip_each(g, clip)


def sgd_step(params: dict[str, Any], update: Any, lr: float) -> None:
    """``params -= lr * update`` (flat ``update``, ``params`` order), in place of the dict."""
    offset = 0
    for k, v in params.items():
        params[k] = v - lr * update[offset : offset + v.numel()].reshape(v.shape)
        offset += v.numel()


def load_params(model: Any, params: dict[str, Any]) -> None:
    """Copy the trained ``params`` into ``model`` (for its test accuracy)."""
    import torch

    with torch.no_grad():
        for k, v in model.named_parameters():
            v.copy_(params[k])


def params_of(model: Any) -> dict[str, Any]:
    return {k: v.detach() for k, v in model.named_parameters()}


def opacus_engine(accountant: str) -> Any:
    from dpaudit.opacus_import import import_opacus

    import_opacus()
    from opacus import PrivacyEngine

    return PrivacyEngine(accountant=accountant)


def opacus_training(
    run: Run,
    audit: Any,
    loader: Any,
    noise_multiplier: float,
    bug: str,
    physical_batch: int | None = None,
    **make_private: Any,
) -> dict[str, Any]:
    """The user's Opacus script: ``make_private`` on ``loader`` (with ``make_private``'s
    other arguments), the documented attach (the loader ``make_private`` returned, the
    coordinates of :func:`dpaudit.attach.low_gradient_coordinates` found before it), the
    ordinary loop (through ``BatchMemoryManager`` with ``physical_batch``), and the epsilon
    the engine reports."""
    import torch

    where = run.coordinates(audit.m)  # the documented placement, before make_private
    engine = opacus_engine(run.accountant)
    model, optimizer, loader = engine.make_private(
        module=run.model,
        optimizer=torch.optim.SGD(run.model.parameters(), lr=run.lr),
        data_loader=loader,
        noise_multiplier=noise_multiplier,
        max_grad_norm=run.clip,
        **make_private,
    )
    audit.opacus(optimizer, data_loader=loader, coordinates=where)
    train_opacus(model, optimizer, loader, run.epochs, physical_batch)
    return claim_of(engine, run, bug=bug)


def claim_settings(sigma: float, q: float, steps: int, run: Run, bug: str) -> dict[str, Any]:
    """What a hand-written script reports: the settings its accounting uses (the library's
    accountant ``train.accountant`` turns them into the claim)."""
    return {
        "noise_multiplier": sigma,
        "sample_rate": q,
        "steps": steps,
        "test_accuracy": run.accuracy(),
        "meta": {"bug": bug},
    }


def claim_of(engine: Any, run: Run, **meta: Any) -> dict[str, Any]:
    """What the user reports after an Opacus training: their engine's epsilon."""
    return {
        CLAIMED_EPSILON: float(engine.get_epsilon(run.delta)),
        "accountant": run.accountant,
        "test_accuracy": run.accuracy(),
        "meta": meta,
    }
