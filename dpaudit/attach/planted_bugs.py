"""User-style training functions (``train.entry_point``) with documented DP-SGD bugs planted.

Each function is a complete DP-SGD training of a one-hidden-layer MLP on the experiment's data
(``fn(data, audit, seed, device) -> dict``, :mod:`dpaudit.attach.pipeline`), audited by ``m``
white-box Dirac gradient canaries, and returns the claim its (buggy) accounting makes. The
reference loops are :func:`correct` (Opacus) and :func:`handwritten_correct` (plain PyTorch);
every other function is one of them with a single planted change:

``shuffled_batches``     (a) batches by shuffling, accounted as Poisson sampling (Opacus issue
                         #80; Chua, Ghazi, Kamath et al. 2024, arXiv:2403.17673; Annamalai,
                         Balle, Hayes, De Cristofaro 2024, arXiv:2411.10614). Opacus.
``weighted_sampler``     (b) a ``WeightedRandomSampler`` (class 0 drawn ten times as often) kept
                         by ``make_private(poisson_sampling=False)``, accounted at Opacus'
                         uniform rate 1 / len(data_loader) (Opacus issues #600, #813). Opacus.
``batch_clipping``       (c) the batch's mean gradient clipped (``clip_grad_norm_``) instead of
                         each example's, noise sigma C / B added to the mean. Hand-written.
``noise_normalization``  (d) the noise scaled for the mean (sigma C / B) but added to the sum of
                         the clipped gradients, i.e. divided by the batch size twice (the
                         normalization / batch-size mismatch of issue 25's item 3). Hand-written.
``steps_undercounted``   (e) noise calibrated, and the epsilon reported, for one epoch while the
                         loop trains ``train.epochs`` epochs (the accountant is told fewer
                         steps than were run). Opacus.

Shared settings, all from the experiment's config (``audit.train``, ``audit.model``): batch size
B (expected), epochs, learning rate, clipping norm C, ``train.delta`` and
``train.accountant``; the noise multiplier is calibrated so that the *claimed* epsilon equals
the setting's target epsilon. The canaries sit on first-layer weights of input features that
are constant zero in the training data (:func:`canary_coordinates`), where the records'
clipped gradients are exactly zero, so a score holds only the canaries and the noise. The
canaries are sampled like the records the bug exposes most (the up-weighted class under (b)).
docs/real_data/own_training.md derives each bug's true epsilon against its claim.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from dpaudit.seeding import derive_seed

#: Class of the records the weighted sampler of :func:`weighted_sampler` draws more often, and
#: how much more.
UPWEIGHTED_CLASS = 0
UPWEIGHT = 10.0
BUG_NAMES = {"poisson": "none", "shuffle": "shuffled_batches", "weighted": "weighted_sampler"}


def _setup(data: dict[str, np.ndarray], audit: Any, seed: int, device: str) -> dict[str, Any]:
    """Tensors, the MLP, the hyper-parameters and the canary coordinates of one run."""
    import torch
    from torch import nn

    torch.manual_seed(derive_seed(seed, "planted_bugs", "init") % 2**31)
    x = torch.as_tensor(np.asarray(data["x_train"]), dtype=torch.float32).flatten(1)
    y = torch.as_tensor(np.asarray(data["y_train"]), dtype=torch.long)
    x_test = torch.as_tensor(np.asarray(data["x_test"]), dtype=torch.float32).flatten(1)
    y_test = torch.as_tensor(np.asarray(data["y_test"]), dtype=torch.long)
    n_classes = int(max(y.max(), y_test.max())) + 1
    hidden = (audit.model.get("hidden") or [256])[0]
    model = nn.Sequential(nn.Linear(x.shape[1], hidden), nn.ReLU(), nn.Linear(hidden, n_classes))
    t = audit.train
    n, batch = len(y), int(t["batch_size"])
    steps_per_epoch = math.ceil(n / batch)  # = len(DataLoader), Opacus' 1 / sample_rate
    return {
        "x": x.to(device),
        "y": y.to(device),
        "x_test": x_test.to(device),
        "y_test": y_test.to(device),
        "model": model.to(device),
        "n": n,
        "batch": batch,
        "q": 1.0 / steps_per_epoch,
        "steps_per_epoch": steps_per_epoch,
        "epochs": int(t["epochs"]),
        "lr": float(t["lr"]),
        "clip": float(t["max_grad_norm"]),
        "accountant": t["accountant"],
        "coordinates": canary_coordinates(np.asarray(data["x_train"]), model, audit.m, seed),
    }


def canary_coordinates(x_train: np.ndarray, model: Any, m: int, seed: int) -> np.ndarray:
    """``m`` flat-parameter coordinates on which the data's gradients are smallest: weights
    of the first layer from input features whose largest |value| in ``x_train`` is smallest
    (exactly zero gradient for constant-zero features), ties broken at random
    (:func:`dpaudit.canaries.gradient_space.lowest_mass_coordinates`). Uses the training
    records only, never the canaries' membership."""
    from dpaudit.canaries.gradient_space import lowest_mass_coordinates

    feature = np.abs(x_train.reshape(len(x_train), -1)).max(axis=0)
    first = next(iter(model.parameters()))  # (hidden, features): flat index i * d + j
    hidden, d = first.shape
    n_params = sum(p.numel() for p in model.parameters())
    mass = np.full(n_params, float(feature.max()) + 1.0)
    mass[: hidden * d] = np.tile(feature, hidden)
    return lowest_mass_coordinates(mass, m, derive_seed(seed, "planted_bugs", "coordinates"))


def _accuracy(s: dict[str, Any]) -> float:
    import torch

    with torch.no_grad():
        return float((s["model"](s["x_test"]).argmax(1) == s["y_test"]).float().mean())


def _sigma(audit: Any, s: dict[str, Any], steps: int) -> float:
    """The noise multiplier whose epsilon after ``steps`` Poisson steps at rate q is the
    setting's target (the user's ``make_private_with_epsilon``)."""
    return _calibrate(audit.target_epsilon, audit.delta, s["q"], steps, s["accountant"])


@functools.lru_cache(maxsize=64)
def _calibrate(target: float, delta: float, q: float, steps: int, accountant: str) -> float:
    from dpaudit.accounting.dpsgd import noise_multiplier

    return noise_multiplier(target, delta, q, steps, accountant)


def _opacus_loop(
    data: dict[str, np.ndarray],
    audit: Any,
    seed: int,
    device: str,
    *,
    sampler: str = "poisson",
    calibrated_epochs: int | None = None,
) -> dict[str, Any]:
    """DP-SGD with Opacus' ``PrivacyEngine.make_private``; ``sampler``: ``poisson`` (correct),
    ``shuffle`` (bug a) or ``weighted`` (bug b); ``calibrated_epochs``: the epochs the noise is
    calibrated and the claim computed for (None: all of them; bug e: 1)."""
    import torch
    from torch.utils.data import DataLoader, TensorDataset, WeightedRandomSampler

    from dpaudit.opacus_import import import_opacus

    import_opacus()
    from opacus import PrivacyEngine

    s = _setup(data, audit, seed, device)
    told_epochs = s["epochs"] if calibrated_epochs is None else calibrated_epochs
    sigma = _sigma(audit, s, told_epochs * s["steps_per_epoch"])
    dataset = TensorDataset(s["x"], s["y"])
    gen = torch.Generator().manual_seed(derive_seed(seed, "planted_bugs", "loader") % 2**31)
    canary_rate = None
    if sampler == "weighted":
        weights = torch.where(s["y"].cpu() == UPWEIGHTED_CLASS, UPWEIGHT, 1.0).double()
        drawn = WeightedRandomSampler(weights, s["n"], replacement=True, generator=gen)
        loader = DataLoader(dataset, batch_size=s["batch"], sampler=drawn)
        # a canary is a record of the up-weighted class: in a batch with this probability
        canary_rate = 1.0 - (1.0 - UPWEIGHT / float(weights.sum())) ** s["batch"]
    else:
        loader = DataLoader(dataset, batch_size=s["batch"], shuffle=True, generator=gen)
    optimizer = torch.optim.SGD(s["model"].parameters(), lr=s["lr"])
    engine = PrivacyEngine()
    model, optimizer, loader = engine.make_private(
        module=s["model"],
        optimizer=optimizer,
        data_loader=loader,
        noise_multiplier=sigma,
        max_grad_norm=s["clip"],
        poisson_sampling=sampler == "poisson",
    )
    torch.manual_seed(derive_seed(seed, "planted_bugs", "noise") % 2**31)
    if canary_rate is None:
        audit.opacus(optimizer, data_loader=loader, coordinates=s["coordinates"])
    else:
        audit.opacus(
            optimizer, sample_rate=canary_rate, sampling="poisson", coordinates=s["coordinates"]
        )
    loss_fn = torch.nn.CrossEntropyLoss()
    for _ in range(s["epochs"]):
        for xb, yb in loader:
            optimizer.zero_grad()
            loss_fn(model(xb), yb).backward()
            optimizer.step()
    s["model"] = model
    told_steps = told_epochs * s["steps_per_epoch"]
    claim: dict[str, Any] = {
        "noise_multiplier": sigma,
        "sample_rate": s["q"],  # Opacus' accounting: 1 / len(data_loader), Poisson
        "steps": told_steps,
    }
    if calibrated_epochs is not None:
        # bug (e): the epsilon the user's accountant reports for the steps it was told (the
        # pipeline refuses a step count its canaries contradict, so the bug reports epsilon)
        from dpaudit.accounting import dpsgd

        eps = dpsgd.epsilon(s["accountant"], sigma, s["q"], told_steps, audit.delta)
        claim = {"claimed_epsilon": float(eps), "accountant": s["accountant"]}
    return {
        **claim,
        "test_accuracy": _accuracy(s),
        "meta": {"planted_bug": BUG_NAMES[sampler] if calibrated_epochs is None else "steps"},
    }


def _handwritten_loop(
    data: dict[str, np.ndarray], audit: Any, seed: int, device: str, *, bug: str | None = None
) -> dict[str, Any]:
    """DP-SGD in plain PyTorch (per-example gradients by ``torch.func``), Poisson sampling at
    q = 1 / ceil(n / B); ``bug``: ``batch_clipping`` (c) or ``noise_normalization`` (d)."""
    import torch
    from torch.func import functional_call, grad, vmap

    s = _setup(data, audit, seed, device)
    model, q, clip = s["model"], s["q"], s["clip"]
    steps = s["epochs"] * s["steps_per_epoch"]
    sigma = _sigma(audit, s, steps)
    params = {k: v.detach() for k, v in model.named_parameters()}
    shapes = [(k, v.shape, v.numel()) for k, v in params.items()]
    n_params = sum(n for _, _, n in shapes)
    expected = q * s["n"]  # the expected batch size B: DP-SGD's normalisation
    # the white-box canary's gradient: C per coordinate under per-example clipping; unclipped
    # under batch clipping, where the adversary makes it B C (a mean contribution of C)
    scale = expected if bug == "batch_clipping" else 1.0
    canaries = audit.gradient_canaries(
        n_params, q, clip * scale, sampling="poisson", coordinates=s["coordinates"]
    )
    gen = torch.Generator(device=device).manual_seed(
        derive_seed(seed, "planted_bugs", "steps") % 2**31
    )

    def loss_one(p: dict[str, Any], xi: Any, yi: Any) -> Any:
        out = functional_call(model, p, (xi[None],))
        return torch.nn.functional.cross_entropy(out, yi[None])

    per_example = vmap(grad(loss_one), in_dims=(None, 0, 0))
    for _ in range(steps):
        pick = torch.rand(s["n"], generator=gen, device=device) < q
        xb, yb = s["x"][pick], s["y"][pick]
        canary = torch.as_tensor(
            canaries.canary_gradient(canaries.draw_step()), dtype=torch.float32, device=device
        )
        noise = torch.randn(n_params, generator=gen, device=device) * sigma * clip
        if bug == "batch_clipping":
            g = torch.zeros(n_params, device=device)
            if len(yb):
                g = torch.cat([v.sum(0).reshape(-1) for v in per_example(params, xb, yb).values()])
            mean = (g + canary) / expected
            mean = mean * min(1.0, clip / (float(mean.norm()) + 1e-12))  # clip_grad_norm_
            noisy_sum = expected * (mean + noise / expected)
        else:
            total = torch.zeros(n_params, device=device)
            if len(yb):
                flat = torch.cat(
                    [v.reshape(len(yb), -1) for v in per_example(params, xb, yb).values()], 1
                )
                factor = (clip / (flat.norm(dim=1) + 1e-12)).clamp(max=1.0)
                total = (flat * factor[:, None]).sum(0)
            if bug == "noise_normalization":
                noise = noise / expected  # BUG: noise for the mean, added to the sum
            noisy_sum = total + canary + noise
        canaries.observe(noisy_sum.cpu().numpy())
        update = noisy_sum / expected
        offset = 0
        for k, shape, size in shapes:
            params[k] = params[k] - s["lr"] * update[offset : offset + size].reshape(shape)
            offset += size
    with torch.no_grad():
        for k, v in model.named_parameters():
            v.copy_(params[k])
    return {
        "noise_multiplier": sigma,
        "sample_rate": q,
        "steps": steps,
        "test_accuracy": _accuracy(s),
        "meta": {"planted_bug": bug or "none (hand-written)"},
    }


def correct(data: dict[str, np.ndarray], audit: Any, seed: int, device: str) -> dict[str, Any]:
    """Correct DP-SGD with Opacus: Poisson sampling, accounted as Poisson."""
    return _opacus_loop(data, audit, seed, device)


def shuffled_batches(
    data: dict[str, np.ndarray], audit: Any, seed: int, device: str
) -> dict[str, Any]:
    """(a) Shuffled fixed-size batches (``poisson_sampling=False``) with Poisson accounting."""
    return _opacus_loop(data, audit, seed, device, sampler="shuffle")


def weighted_sampler(
    data: dict[str, np.ndarray], audit: Any, seed: int, device: str
) -> dict[str, Any]:
    """(b) A ``WeightedRandomSampler`` drawing class 0 ten times as often, accounted at the
    uniform rate 1 / len(data_loader)."""
    return _opacus_loop(data, audit, seed, device, sampler="weighted")


def steps_undercounted(
    data: dict[str, np.ndarray], audit: Any, seed: int, device: str
) -> dict[str, Any]:
    """(e) Noise calibrated and epsilon reported for one epoch; ``train.epochs`` are run."""
    return _opacus_loop(data, audit, seed, device, calibrated_epochs=1)


def handwritten_correct(
    data: dict[str, np.ndarray], audit: Any, seed: int, device: str
) -> dict[str, Any]:
    """Correct DP-SGD in plain PyTorch (the reference of the hand-written bugs)."""
    return _handwritten_loop(data, audit, seed, device)


def batch_clipping(
    data: dict[str, np.ndarray], audit: Any, seed: int, device: str
) -> dict[str, Any]:
    """(c) The batch's mean gradient clipped instead of each example's gradient."""
    return _handwritten_loop(data, audit, seed, device, bug="batch_clipping")


def noise_normalization(
    data: dict[str, np.ndarray], audit: Any, seed: int, device: str
) -> dict[str, Any]:
    """(d) Noise sigma C / B (calibrated for the mean) added to the sum of clipped gradients."""
    return _handwritten_loop(data, audit, seed, device, bug="noise_normalization")
