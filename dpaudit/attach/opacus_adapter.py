"""Attach white-box gradient canaries to an Opacus ``DPOptimizer`` (Opacus 1.4-1.6).

``auditor = dpaudit.attach.opacus(optimizer, data_loader=train_loader, m=1000, seed=0)``
after ``PrivacyEngine.make_private``; the training loop stays as it is. Opacus'
``DPOptimizer.pre_step`` runs ``clip_and_accumulate`` (the clipped per-example gradients summed
into ``p.summed_grad``), returns early on the virtual steps of ``BatchMemoryManager``
(``_check_skip_next_step``), and otherwise calls ``add_noise`` (``p.grad = p.summed_grad +
noise``) and ``scale_grad``. The auditor wraps ``add_noise`` of this one optimizer, which runs
once per *logical* step: before it, the gradients of the IN canaries sampled this step
(:meth:`GradientCanaries.draw_step`) are added to ``p.summed_grad``; after it, the noisy sum at
the canary coordinates is observed (before ``scale_grad`` and the learning rate). See
:mod:`dpaudit.attach.core` for the score. It also wraps ``scale_grad`` to measure the divisor
the noisy sum is really divided by (the normalisation check,
:mod:`dpaudit.attach.normalisation_checks`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from dpaudit.attach.core import GradientCanaries, check_rate
from dpaudit.attach.loader_probe import check_observable, observe_loader, release
from dpaudit.attach.normalisation_checks import Normalisation
from dpaudit.attach.probes import OpacusProbeHook
from dpaudit.opacus_import import import_opacus


def _supported_types() -> tuple[type, ...]:
    import_opacus()
    from opacus.optimizers import DPOptimizer, DPOptimizerFastGradientClipping

    return DPOptimizer, DPOptimizerFastGradientClipping


def _loader_sampling(data_loader: Any) -> tuple[float, str]:
    """(sample rate, sampling) of the training as Opacus accounts it: a ``DPDataLoader``
    (Poisson) has ``sample_rate``; any other loader draws batches without replacement, 1 /
    ``len(data_loader)`` per step (Opacus' ``make_private`` with ``poisson_sampling=False``)."""
    import_opacus()
    from opacus.data_loader import DPDataLoader

    if isinstance(data_loader, DPDataLoader):
        return float(data_loader.sample_rate), "poisson"
    try:
        steps = len(data_loader)
    except TypeError:
        raise ValueError(
            "data_loader has no length: give sample_rate= (the training's sampling rate)"
        ) from None
    if steps < 1:
        raise ValueError("data_loader is empty")
    return 1.0 / steps, "shuffle"


def _check_not_memory_manager(data_loader: Any) -> None:
    """``ValueError`` when ``data_loader`` is the loader ``BatchMemoryManager`` yields (its
    batch sampler a ``BatchSplittingSampler``): its batches are the physical ones, so its
    length and its batches are not the logical steps' (the canaries would be drawn at the
    physical rate and every noisy step would look like several merged batches)."""
    import_opacus()
    from opacus.utils.batch_memory_manager import BatchSplittingSampler

    if isinstance(getattr(data_loader, "batch_sampler", None), BatchSplittingSampler):
        raise ValueError(
            "data_loader is the loader BatchMemoryManager yields (its batch sampler is a "
            "BatchSplittingSampler of physical batches): dpaudit observes the logical batches; "
            "pass the loader PrivacyEngine.make_private returned (the one given to "
            "BatchMemoryManager), attached before the memory manager's loop"
        )


#: Steps whose gathered values wait before their arithmetic is folded in (OpacusAuditor._fold).
_DEFERRED = 64

#: What the Opacus auditor does itself, in place of the hand-written loop's calls.
_SELF_DRIVEN = (
    "the Opacus auditor draws the canaries, places the probe and observes the noisy sum of "
    "each logical step itself, inside the optimizer's step (add_noise); {call} is the "
    "hand-written loop's API (dpaudit.attach.GradientCanaries): remove the call, the training "
    "loop stays as it was"
)


class OpacusAuditor(GradientCanaries):
    """Dirac gradient canaries attached to an Opacus optimizer (see :func:`opacus`).

    :meth:`score_file` and :meth:`audit` fill in the claim's DP-SGD settings from what the
    auditor saw: the optimizer's ``noise_multiplier``, the sample rate and the logical steps
    (so ``auditor.audit(delta=1e-5, accountant="prv")`` audits the epsilon those settings
    imply; pass ``claimed_epsilon=`` to audit the epsilon the user's own accountant reports).
    """

    def __init__(
        self,
        optimizer: Any,
        m: int,
        seed: int,
        sample_rate: float,
        sampling: str,
        coordinates: Any = None,
        probes: bool = True,
    ) -> None:
        params = [p for p in optimizer.params if p.requires_grad]
        sizes = [p.numel() for p in params]
        n_params = int(sum(sizes))
        if isinstance(m, int) and not isinstance(m, bool) and m > n_params:
            raise ValueError(
                f"m = {m} Dirac canaries need {m} distinct coordinates, but the optimizer's "
                f"model has {n_params} trainable parameters: lower m"
            )
        super().__init__(
            m, n_params, sample_rate, float(optimizer.max_grad_norm), seed, coordinates, sampling
        )
        self.optimizer = optimizer
        self._params = params
        # Canaries grouped by parameter, once: canaries order[bounds[k]:bounds[k + 1]] sit on
        # params[k] at its flat coordinates _local[bounds[k]:bounds[k + 1]]. Each parameter
        # with canaries is a group (p, those coordinates and clip_norm as tensors on p's
        # device); the groups of one device form a bucket, whose running sums (float64, in
        # the bucket's canary order ids) and count of steps with a non-finite sum stay on the
        # device: no host sync per step. Each step only gathers the values (and, for the
        # normalisation check, the divisor's two gathers); the arithmetic on them runs every
        # _DEFERRED steps and before any read (_fold), the same operations in the same order:
        # run back to back they cost a fraction of what they cost one per step, between the
        # training's large tensor operations (issue 37, Done when 3).
        offsets = np.cumsum([0, *sizes])
        owner = np.searchsorted(offsets, self.coordinates, side="right") - 1
        self._order = np.argsort(owner, kind="stable")
        self._local = self.coordinates[self._order] - offsets[owner[self._order]]
        self._bounds = np.searchsorted(owner[self._order], np.arange(len(params) + 1))
        self._group_of: dict[int, tuple[torch.nn.Parameter, torch.Tensor, torch.Tensor]] = {}
        self._on_cpu = all(p.device.type == "cpu" for p in params)  # no copies between devices
        buckets: dict[torch.device, list[int]] = {}
        for k, p in enumerate(params):
            lo, hi = int(self._bounds[k]), int(self._bounds[k + 1])
            if hi > lo:
                local = torch.from_numpy(self._local[lo:hi]).to(p.device)
                clip = torch.full((hi - lo,), self.clip_norm, dtype=p.dtype, device=p.device)
                self._group_of[k] = (p, local, clip)
                buckets.setdefault(p.device, []).append(k)
        self._buckets = []
        for device, ks in buckets.items():
            ids = self._order[
                np.concatenate([np.arange(self._bounds[k], self._bounds[k + 1]) for k in ks])
            ]
            acc = torch.zeros(len(ids), dtype=torch.float64, device=device)
            nonfinite = torch.zeros((), dtype=torch.int64, device=device)
            sq = torch.zeros((), dtype=torch.float64, device=device)
            self._buckets.append(([self._group_of[k] for k in ks], ids, acc, nonfinite, sq, []))
        self.data_loader: Any = None  # the observed loader (:func:`opacus`), if any
        self._original_add_noise = optimizer.add_noise
        optimizer.add_noise = self._add_noise
        # the divisor scale_grad applies, at (up to 16 of) the first canary parameter's canary
        # coordinates: its smallest and largest over the noisy steps, kept on the device (no
        # host sync)
        first, at, _ = next(iter(self._group_of.values()))
        self._divisor_at = (first, at[:16])
        self._divisor_low = torch.full((), math.inf, dtype=torch.float64, device=first.device)
        self._divisor_high = torch.full((), -math.inf, dtype=torch.float64, device=first.device)
        self._divisor_steps = 0
        self._divisor_pending: list[tuple[torch.Tensor, torch.Tensor]] = []
        self._original_scale_grad = optimizer.scale_grad
        optimizer.scale_grad = self._scale_grad
        optimizer._dpaudit_auditor = self
        # sensitivity probes in Opacus' per-example gradient rows, before its clipping
        # (dpaudit.attach.probes); not with ghost clipping, which has no rows
        self._probe_hook = (
            OpacusProbeHook(optimizer, self.probes, offsets)
            if probes and self.probes.active and type(optimizer) is _supported_types()[0]
            else None
        )

    def _add_noise(self) -> None:
        for p, _, _ in self._group_of.values():
            if p.summed_grad is None:
                raise RuntimeError("Opacus gave no summed gradient for a trainable parameter")
        if self.probes.pending is not None:  # the clipped sum at the probe, before the noise
            self._probe_hook.read()  # type: ignore[union-attr]
        # only the canaries sampled this step are added (the others would add 0)
        draw = GradientCanaries.draw_step(self)
        hit = np.flatnonzero(draw[self._order])
        if hit.size:
            cuts = np.searchsorted(hit, self._bounds).tolist()
            local = self._local[hit]  # their flat indices in their parameters, in that order
            for k, (p, _, clip) in self._group_of.items():  # the parameters with canaries
                lo, hi = cuts[k], cuts[k + 1]
                if hi > lo:
                    flat = p.summed_grad.view(-1)  # contiguous (Opacus' einsum / clone)
                    idx = torch.from_numpy(local[lo:hi])
                    if self._on_cpu and flat.dtype == clip.dtype:
                        flat.index_add_(0, idx, clip[: hi - lo])
                    else:
                        idx = idx.to(flat.device, non_blocking=True)
                        flat.index_add_(0, idx, clip[: hi - lo].to(flat.dtype))
        self._original_add_noise()
        self.steps += 1
        if self.sampling_record is not None:
            self.sampling_record.close_step()
        free = ~draw  # coordinates without a canary gradient this step (the noise check)
        self.noise_df += int(free.sum())
        for groups, ids, *_, pending in self._buckets:  # folded in by _fold
            vals = torch.cat([p.grad.view(-1).index_select(0, i) for p, i, _ in groups])
            pending.append((vals, free[ids]))
        if len(self._buckets[0][-1]) >= _DEFERRED:
            self._fold()

    def _fold(self) -> None:
        """Fold the gathered steps into the running sums and the divisor's extremes (see
        ``__init__``): in step order, the operations a step would have run at once."""
        for _, _, acc, nonfinite, sq, pending in self._buckets:
            for vals, free in pending:
                vals = vals.double()  # once for both sums
                acc += vals
                # a non-finite running sum stays non-finite: count the steps since the first
                nonfinite += ~torch.isfinite(acc.sum())
                mask = torch.from_numpy(free)
                if not self._on_cpu:
                    mask = mask.to(vals.device, non_blocking=True)
                sq += torch.where(mask, vals, 0.0).square_().sum()
            pending.clear()
        norm = torch.linalg.vector_norm  # what Tensor.norm() calls, without its Python layers
        for before, after in self._divisor_pending:
            ratio = norm(before, dtype=torch.float64) / norm(after, dtype=torch.float64)
            # NaN where both are 0: ignored by fmin / fmax
            torch.fmin(self._divisor_low, ratio, out=self._divisor_low)
            torch.fmax(self._divisor_high, ratio, out=self._divisor_high)
        self._divisor_pending.clear()

    def _scale_grad(self) -> None:
        p, at = self._divisor_at
        before = p.grad.view(-1).index_select(0, at)
        self._original_scale_grad()
        self._divisor_pending.append((before, p.grad.view(-1).index_select(0, at)))
        self._divisor_steps += 1  # the ratio of their norms: _fold
        if len(self._divisor_pending) >= _DEFERRED:
            self._fold()

    def _normalisation_measured(self) -> Normalisation | None:
        """The optimizer's ``loss_reduction`` and ``expected_batch_size``, the size of the
        dataset the observed loader draws from, Opacus' sample rate and the divisor measured
        in ``scale_grad``; None without ``data_loader=`` (the dataset size unseen)."""
        try:
            n_records = len(self.data_loader.dataset)
        except (AttributeError, TypeError):
            return None
        self._fold()
        low, high = float(self._divisor_low), float(self._divisor_high)
        measured = self._divisor_steps > 0 and math.isfinite(low) and math.isfinite(high)
        expected = getattr(self.optimizer, "expected_batch_size", None)
        return Normalisation(
            str(getattr(self.optimizer, "loss_reduction", "mean")),
            None if expected is None else float(expected),
            int(n_records),
            self.sample_rate,
            (low, high) if measured else None,
            self._divisor_steps,
        )

    def draw_step(self) -> np.ndarray:
        """Not for an Opacus auditor: a ``TypeError`` (it draws each step itself)."""
        raise TypeError(_SELF_DRIVEN.format(call="draw_step()"))

    def observe(self, noisy_sum: Any) -> None:
        """Not for an Opacus auditor: a ``TypeError`` (it observes each step itself)."""
        raise TypeError(_SELF_DRIVEN.format(call="observe()"))

    def observe_values(self, values: Any) -> None:
        """Not for an Opacus auditor: a ``TypeError`` (it observes each step itself)."""
        raise TypeError(_SELF_DRIVEN.format(call="observe_values()"))

    def probe_rows(self, per_example_grads: Any) -> Any:
        """Not for an Opacus auditor: a ``TypeError`` (it places its probes itself)."""
        raise TypeError(_SELF_DRIVEN.format(call="probe_rows()"))

    #: Why no noisy step was observed (the audit's error).
    _no_step_hint = (
        "the optimizer's add_noise never ran: step() was never called on the DPOptimizer this "
        "auditor is attached to (a step function that steps optimizer.original_optimizer or "
        "another optimizer never adds the noise), or the auditor was attached after the "
        "training; attach it after make_private, before the loop, and step that optimizer"
    )

    def _scores(self, scores: Any) -> np.ndarray:
        rec = self.sampling_record
        if self.steps and rec is not None and rec.batches_delivered == 0:
            raise ValueError(
                f"data_loader= delivered no batch during the {self.steps} noisy steps observed: "
                "the training iterates another loader, so neither the sampling checks nor the "
                "canaries' rate describe it; pass the loader PrivacyEngine.make_private "
                "returned (with Poisson sampling a new DPDataLoader, not the one given to it) "
                "and iterate that one, or sample_rate= (the sampling stage is then not checked)"
            )
        return super()._scores(scores)

    @property
    def scores(self) -> np.ndarray:
        """The scores so far (m,), gathered from the devices (see the core)."""
        self._fold()
        out = np.empty(self.m)
        for _, ids, acc, *_ in self._buckets:
            out[ids] = acc.cpu().numpy() / self.clip_norm
        return out

    @property
    def first_nonfinite_step(self) -> int | None:
        self._fold()
        counts = [int(c) for _, _, _, c, *_ in self._buckets]
        return min((self.steps - c + 1 for c in counts if c > 0), default=None)

    def detach(self) -> None:
        """Stop auditing: the optimizer's own ``add_noise`` again. Once: detaching an auditor
        that is not attached is a ``RuntimeError`` (it would unhook another auditor)."""
        if getattr(self.optimizer, "_dpaudit_auditor", None) is not self:
            raise RuntimeError(
                "this auditor is not attached to its optimizer (detach() was called already); "
                "its scores stay readable, call detach() once"
            )
        self.optimizer.add_noise = self._original_add_noise
        self.optimizer.scale_grad = self._original_scale_grad
        if self._probe_hook is not None:
            self._probe_hook.release()
        del self.optimizer._dpaudit_auditor
        if self.data_loader is not None:
            release(self.data_loader)

    _probe_read_from = "Opacus' summed clipped gradient before the noise"

    def _noise_stats(self) -> tuple[float, int]:
        """The noise check's sum of squares (gathered from the devices) and coordinate-steps."""
        self._fold()
        return float(sum(float(sq) for _, _, _, _, sq, _ in self._buckets)), self.noise_df

    def _noise_multiplier_used(self, given: Any) -> float | None:
        """The optimizer's noise multiplier (what the noise call used), whatever the claim."""
        return float(self.optimizer.noise_multiplier)

    def _claim_settings(self) -> dict[str, Any]:
        return {**super()._claim_settings(), "noise_multiplier": self.optimizer.noise_multiplier}

    def _meta(self) -> dict[str, Any]:
        return {
            **super()._meta(),
            "noise_multiplier": float(self.optimizer.noise_multiplier),
            "framework": "opacus",
            "optimizer": type(self.optimizer.original_optimizer).__name__,
        }


def opacus(
    optimizer: Any,
    m: int = 1000,
    seed: int = 0,
    *,
    data_loader: Any = None,
    sample_rate: float | None = None,
    sampling: str | None = None,
    coordinates: Any = None,
    probes: bool = True,
) -> OpacusAuditor:
    """Attach ``m`` Dirac gradient canaries to the ``DPOptimizer`` that Opacus'
    ``PrivacyEngine.make_private`` returned; returns the :class:`OpacusAuditor`.

    The canaries are sampled like the training's records: give ``data_loader`` (the loader
    ``make_private`` returned; with ``BatchMemoryManager``, that loader, not the memory
    manager's) or ``sample_rate`` (then ``sampling`` is ``poisson`` unless given). Works with
    and without ``BatchMemoryManager`` (one canary draw per logical step) and with Poisson
    sampling on (``DPDataLoader``) or off (each IN canary once per epoch). Flat clipping only
    (``clipping="flat"``, also with ``grad_sample_mode="ghost"``), one process.

    With ``data_loader`` the auditor also observes the loader's batch sampler
    (:mod:`dpaudit.attach.loader_probe`): the records each noisy step really received, which
    the audit's conformance report checks against Poisson sampling at the sample rate Opacus
    accounts (:mod:`dpaudit.attach.sampling_checks`) and uses for the measured mechanism's
    epsilon; a loader it cannot observe is a ``ValueError`` naming why.

    With ``probes`` (default) each logical step also places one sensitivity probe in Opacus'
    per-example gradient rows before its clipping (:mod:`dpaudit.attach.probes`; one record's
    gradient of the step is replaced by it) and reads the clipped sum at its coordinate before
    the noise: the report's sensitivity check. Not with ``DPOptimizerFastGradientClipping``
    (ghost clipping has no rows); ``probes=False`` leaves the training untouched but for the
    canaries.
    """
    supported = _supported_types()
    if not isinstance(optimizer, supported[0]):
        raise TypeError(
            "dpaudit.attach.opacus needs the Opacus DPOptimizer returned by "
            f"PrivacyEngine.make_private, got {type(optimizer).__module__}."
            f"{type(optimizer).__name__}; for a loop without Opacus use "
            "dpaudit.attach.GradientCanaries"
        )
    if type(optimizer) not in supported:
        raise TypeError(
            f"dpaudit.attach.opacus supports flat clipping in one process (DPOptimizer, "
            f"DPOptimizerFastGradientClipping), not {type(optimizer).__name__} (per-layer, "
            "adaptive or distributed clipping)"
        )
    if getattr(optimizer, "_dpaudit_auditor", None) is not None:
        raise ValueError("this optimizer already has an auditor attached (detach() it first)")
    if (data_loader is None) == (sample_rate is None):
        raise ValueError(
            "give data_loader= (the loader PrivacyEngine.make_private returned) or "
            "sample_rate= (the training's sampling rate), exactly one"
        )
    if data_loader is not None:
        _check_not_memory_manager(data_loader)
        check_observable(data_loader)
        rate, loader_sampling = _loader_sampling(data_loader)
    else:
        rate, loader_sampling = check_rate(sample_rate), "poisson"
    auditor = OpacusAuditor(
        optimizer, m, seed, rate, sampling or loader_sampling, coordinates, probes
    )
    if data_loader is not None:
        try:
            auditor.sampling_record = observe_loader(data_loader)
        except ValueError:
            auditor.detach()  # nothing stays attached: a retry with sample_rate= works
            raise
        auditor.data_loader = data_loader
    return auditor
