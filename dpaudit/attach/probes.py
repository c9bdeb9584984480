"""Sensitivity probes: oversized Dirac gradients placed *before* the user's per-example clipping,
and their contribution to what reaches the update measured against the clipping norm C.

At each logical step one probe is placed: the per-example gradient row of one record of the
step is replaced by ``s_t B C e_{j_t}`` (B = :data:`PROBE_SCALE`, far above 1; ``j_t`` one of a
few probe coordinates, drawn from the seed among the coordinates no canary uses; ``s_t`` a fair
random sign, drawn from the seed, fresh each step). The user's clipping then processes the row
like any other: under per-example clipping at C (the claim's sensitivity) it leaves at most C at
``j_t``, whatever it does to the other rows. After the step the value ``v_t`` at ``j_t`` of what
reaches the update (Opacus: the summed clipped gradient before the noise; a hand-written loop:
the noisy sum it observes) is read and ``x_t = s_t v_t`` is the probe's measured contribution
plus ``s_t`` times the data's and the noise's at ``j_t``.

The test (:func:`dpaudit.attach.sensitivity_checks.sensitivity_check`) counts the steps with
``x_t > C (1 + tol)``. Under the claim, ``x_t - C <= s_t (d_t + n_t)`` where the data's
clipped gradient ``d_t`` and the noise ``n_t`` at ``j_t`` do not depend on the fresh sign
(given the past and the step's batch) and the noise is symmetric, so each step exceeds with
probability at most 1/2 given the past, and the count is stochastically below Binomial(T, 1/2)
whatever the data do: an exact one-sided sign test. A clipping that lets the probe through with
more than C (fast clipping ignoring ``max_grad_norm``, Opacus PR #664; clipping the gradient of
the mean loss and scaling it back by the batch size, Tramer et al. 2022, arXiv:2202.12219) makes
``x_t - C`` about the excess on every step and departs. The replaced record's own gradient is
dropped from that step (one record per step); ``tol`` (:data:`TOLERANCE`) absorbs the rounding
of the clipping factor.

Not seen: a bug that needs two records to show (microbatches clipped together, TF Privacy #620:
the probe alone is still clipped to C), clipping that holds on the rows but not on the gradient
used elsewhere (e.g. ghost clipping, which never materialises the rows: there is no place to put
a probe), and an excess below what the noise and the data at ``j_t`` hide.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dpaudit.seeding import derive_seed

#: The probe's norm in units of the clipping norm C (B >> 1: any clipping at a threshold below
#: B C shows its threshold).
PROBE_SCALE = 1000.0
#: Relative slack above C for the rounding of the clipping factor (Opacus divides by the norm
#: plus 1e-6; float32 rounding).
TOLERANCE = 1e-3
#: Probe coordinates drawn per auditor (one is used per step).
N_PROBE_COORDINATES = 16


def probe_coordinates(
    n_params: int, taken: np.ndarray, seed: int, k: int = N_PROBE_COORDINATES
) -> np.ndarray:
    """Up to ``k`` distinct coordinates of ``0..n_params - 1`` outside ``taken`` (the canaries'),
    drawn from ``seed``; empty when every coordinate is taken."""
    taken = np.unique(np.asarray(taken, dtype=np.int64))
    rng = np.random.default_rng(derive_seed(seed, "attach", "probe_coordinates"))
    if n_params - taken.size <= 4 * k:  # few free coordinates: list them
        free = np.setdiff1d(np.arange(n_params, dtype=np.int64), taken)
        return np.sort(rng.choice(free, size=min(k, free.size), replace=False))
    out: list[int] = []
    while len(out) < k:  # rejection: at least 4k of the coordinates are free
        j = int(rng.integers(n_params))
        if j not in out and not np.isin(j, taken):
            out.append(j)
    return np.sort(np.array(out, dtype=np.int64))


class SensitivityProbes:
    """One probe per logical step on ``coordinates`` with clipping norm ``clip_norm`` (see the
    module docstring). :meth:`draw` gives the step's (coordinate, sign); :meth:`measure`
    records the value read at that coordinate after the user's clipping."""

    def __init__(self, coordinates: np.ndarray, clip_norm: float, seed: int) -> None:
        self.coordinates = np.asarray(coordinates, dtype=np.int64)
        self.clip_norm = float(clip_norm)
        self._rng = np.random.default_rng(derive_seed(seed, "attach", "probes"))
        self.pending: tuple[int, float] | None = None  # (coordinate, sign) placed, not read
        self.values: list[Any] = []  # s_t v_t per measured step (floats or 0-d tensors)

    @property
    def active(self) -> bool:
        """Whether there is a coordinate to probe."""
        return self.coordinates.size > 0

    def draw(self) -> tuple[int, float]:
        """The step's probe: (flat coordinate, sign); it is pending until :meth:`measure`."""
        if self.pending is not None:
            raise ValueError(
                "a sensitivity probe was placed twice in one step: place it once per logical "
                "step (probe_rows() before the clipping), then observe the step"
            )
        j = int(self.coordinates[self._rng.integers(self.coordinates.size)])
        sign = 1.0 if self._rng.random() < 0.5 else -1.0
        self.pending = (j, sign)
        return self.pending

    def measure(self, value: Any) -> None:
        """Record the value at the pending probe's coordinate (after the clipping), times its
        sign; a 0-d tensor is kept on its device (no host sync per step)."""
        assert self.pending is not None
        self.values.append(value * self.pending[1])
        self.pending = None

    def contributions(self) -> np.ndarray:
        """The measured ``s_t v_t`` of every probed step, on the host."""
        return np.array([float(v) for v in self.values], dtype=np.float64)

    def probe_rows(self, rows: Any) -> Any:
        """``rows`` (b, n_params) per-example gradients (NumPy or torch) with the step's probe
        in row 0 (a new row when b = 0); a copy, the input is unchanged."""
        j, sign = self.draw()
        value = sign * PROBE_SCALE * self.clip_norm
        if hasattr(rows, "clone"):  # torch
            out = rows.clone() if len(rows) else rows.new_zeros((1, *rows.shape[1:]))
        else:
            rows = np.asarray(rows, dtype=np.float64)
            out = rows.copy() if len(rows) else np.zeros((1, *rows.shape[1:]))
        if out.ndim != 2 or j >= out.shape[1]:
            raise ValueError(
                f"probe_rows() needs the (batch, n_params) per-example gradients, got shape "
                f"{tuple(out.shape)}"
            )
        out[0] = 0
        out[0, j] = value
        return out


class OpacusProbeHook:
    """Places ``probes`` in an Opacus ``DPOptimizer``'s per-example gradient rows before its
    clipping, and reads the clipped sum at the probe's coordinate before the noise.

    It wraps ``clip_and_accumulate`` on this one optimizer object (whatever method the object
    has: Opacus' own or a user's replacement): on the first call of a logical step with a
    non-empty batch, row 0 of every parameter's ``grad_sample`` is zeroed in place and the
    probe's value written at its coordinate (``offsets``: the flat offsets of
    ``optimizer.params``), then the original runs. :meth:`read` (called by the auditor before
    the noise) takes ``p.summed_grad`` at that coordinate, kept on its device.
    """

    def __init__(self, optimizer: Any, probes: SensitivityProbes, offsets: np.ndarray) -> None:
        self.optimizer = optimizer
        self.probes = probes
        self._params = [p for p in optimizer.params if p.requires_grad]
        self._offsets = np.asarray(offsets)
        self._original = optimizer.clip_and_accumulate
        optimizer.clip_and_accumulate = self._clip_and_accumulate

    def _locate(self, j: int) -> tuple[Any, tuple[int, ...]]:
        k = int(np.searchsorted(self._offsets, j, side="right") - 1)
        p = self._params[k]
        return p, tuple(int(i) for i in np.unravel_index(j - int(self._offsets[k]), p.shape))

    def _clip_and_accumulate(self) -> None:
        if self.probes.pending is None:
            rows = [p.grad_sample for p in self._params]
            rows = [g[0] if isinstance(g, list) else g for g in rows]
            if rows and all(g is not None and len(g) > 0 for g in rows):
                j, sign = self.probes.draw()
                for g in rows:
                    g[0].zero_()
                p, at = self._locate(j)
                k = next(i for i, q in enumerate(self._params) if q is p)
                rows[k][(0, *at)] = sign * PROBE_SCALE * self.probes.clip_norm
        self._original()

    def read(self) -> None:
        """Record the clipped sum at the pending probe's coordinate (before the noise)."""
        j, _ = self.probes.pending  # type: ignore[misc]
        p, at = self._locate(j)
        self.probes.measure(p.summed_grad[at].detach().clone())

    def release(self) -> None:
        """The optimizer's own ``clip_and_accumulate`` again."""
        self.optimizer.clip_and_accumulate = self._original
