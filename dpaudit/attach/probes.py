"""Sensitivity probes: oversized Dirac values placed *before* the user's per-example clipping,
and their contribution to what reaches the update measured against the clipping norm C.

At each logical step up to :data:`PROBES_PER_STEP` probes are placed (:func:`probe_layout`):
in the per-example gradient rows of a few records of the step, row ``r`` takes the value
``s B_r C`` at coordinate ``j`` (``j`` its own coordinate, distinct within the step, drawn from
the seed among the coordinates no canary uses; ``s`` a fair random sign, drawn from the seed,
fresh for every probe); the record's gradient stays in the row's other coordinates. Half the
probes are *small* (B_r = :data:`PROBE_SCALE`, far above 1) and half *large*
(B_r = PROBE_SCALE x :data:`PARTNER_RATIO`), laid out so that every small probe sits next to a
large one both in the adjacent row and half a batch away: rows 0, 1, 2, ... (small, large,
small, ...) and rows b/2, b/2 + 1, ... (large, small, ...). The user's clipping then processes
the rows like any other: under per-example clipping at C (the claim's sensitivity) each probe
row is clipped on its own and leaves C B_r C / |row| at its coordinate, whatever the clipping
does to the other rows: C up to a relative (|g|^2 - g_j^2) / (2 B_r^2 C^2) for the record's own
gradient ``g``, below the rounding slack :data:`TOLERANCE` while |g| is below 44,000 C (B_r =
10^6), and the record's own gradient reaches the sum scaled by C / |row| <= 1 / B_r. After the
step the value ``v`` at each probe's
coordinate of what reaches the update (Opacus: the summed clipped gradient before the noise; a
hand-written loop: the noisy sum it observes) is read and ``x = s v`` is the probe's measured
contribution plus ``s`` times the data's and the noise's at its coordinate: under the claim
``x - C = s (d + n)`` up to the rounding of the clipping factor (:data:`TOLERANCE`), where the
data's clipped gradient ``d`` and the noise ``n`` at the coordinate do not depend on the fresh
sign, so ``x - C`` is conditionally symmetric given the past.

Two checks (:mod:`dpaudit.attach.sensitivity_checks`) read them:

- *more than C*: a clipping that lets a record through with more than C (fast clipping ignoring
  ``max_grad_norm``, Opacus PR #664; clipping the gradient of the mean loss and scaling it back
  by the batch size, Tramer et al. 2022, arXiv:2202.12219) makes every ``x - C`` about the
  excess: a sign test of the probes above C.
- *clipped one by one*: rows clipped together (microbatches whose mean gradient is clipped, TF
  Privacy #620; batch clipping of the sum) share one clip of norm C among their probes. A small
  probe grouped with a large one then receives about C / PARTNER_RATIO instead of C (two equal
  probes would still receive C / sqrt(2) each), so the small probes' mean deficit below C is
  about C per grouped probe: a one-sided test of that mean
  (:func:`dpaudit.attach.anytime.symmetric_mean_log_e`). Grouping makes each contribution
  smaller, which the first check cannot see, while one record can then move its group's clipped
  gradient, and the update, by up to 2C (groups of two).

One value is written per probe row, and the rest of the row is left as it is: the probes cost a
few scattered writes per step whatever the model's size (issue 37, Done when 3), where
replacing whole rows would cost a row of memory traffic per probe.

Not seen: clipping that holds on the rows but not on the gradient used elsewhere (e.g. ghost
clipping, which never materialises the rows: there is no place to put a probe), a grouping of
rows that pairs no small probe with a larger one (neither adjacent rows nor rows half a batch
apart share a group), and an excess or a deficit below what the noise and the data hide.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dpaudit.seeding import derive_seed

#: A small probe's value in units of the clipping norm C (B >> 1: any clipping at a threshold
#: below B C shows its threshold; and B >> |g| / C for the record's own gradient ``g`` left in
#: the row, which then moves the clipped probe by less than :data:`TOLERANCE`: module docstring).
PROBE_SCALE = 1e6
#: A large probe's norm over a small one's: a small probe clipped together with a large one
#: keeps about 1 / PARTNER_RATIO of the shared clip.
PARTNER_RATIO = 1000.0
#: Relative slack around C for the rounding of the clipping factor (Opacus divides by the norm
#: plus 1e-6; float32 rounding).
TOLERANCE = 1e-3
#: Probes placed per logical step (at most; a quarter of the step's rows, at least 2).
PROBES_PER_STEP = 32
#: Probe coordinates drawn per auditor (each step's probes take distinct ones among them).
N_PROBE_COORDINATES = 2 * PROBES_PER_STEP
#: Steps whose probes are drawn at once while steps take the full number of probes (batches of
#: at least 4 x PROBES_PER_STEP records): the same draws, cheaper back to back (issue 37, Done
#: when 3); a step that takes fewer rewinds the generator first (SensitivityProbes._picks).
DRAW_AHEAD = 16


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


def probe_layout(b: int, k: int = PROBES_PER_STEP) -> tuple[np.ndarray, np.ndarray]:
    """(rows, large) of a step of ``b`` records with at most ``k`` probes: the rows that carry a
    probe and which of them carry a large one. min(k, max(2, b // 4)) probes (all ``b`` rows
    when b <= 2; row 0 alone when b = 0): half from row 0 on, alternating small, large, ...,
    half from row b // 2 on, alternating large, small, ..., so that a small probe has a large one
    in an adjacent row and half a batch away (module docstring)."""
    n = 1 if b == 0 else min(b, k, max(2, b // 4))
    if n >= b or n < 2:
        rows = np.arange(n, dtype=np.int64)
        return rows, rows % 2 == 1
    first = np.arange(n // 2, dtype=np.int64)
    second = np.arange(n - n // 2, dtype=np.int64)
    rows = np.concatenate([first, b // 2 + second])
    return rows, np.concatenate([first % 2 == 1, second % 2 == 0])


class SensitivityProbes:
    """The probes of each logical step on ``coordinates`` (distinct, ascending: as
    :func:`probe_coordinates` gives them) with clipping norm ``clip_norm`` (see the module
    docstring). :meth:`draw` gives the step's probes; :meth:`measure` records the
    values read at their coordinates after the user's clipping."""

    def __init__(
        self, coordinates: np.ndarray, clip_norm: float, seed: int, per_step: int = PROBES_PER_STEP
    ) -> None:
        self.coordinates = np.asarray(coordinates, dtype=np.int64)
        if self.coordinates.ndim != 1 or (np.diff(self.coordinates) <= 0).any():
            raise ValueError("probe coordinates must be distinct and ascending (probe_coordinates)")
        self.clip_norm = float(clip_norm)
        self.per_step = int(per_step)
        self._rng = np.random.default_rng(derive_seed(seed, "attach", "probes"))
        self.pick = np.zeros(0, dtype=np.int64)
        # draws made ahead (_picks): for which (probes, coordinates), the generator's state
        # before them, how many were made, and those not taken yet (the next one last)
        self._ahead_key: tuple[int, int] | None = None
        self._ahead_state: dict[str, Any] | None = None
        self._ahead_made = 0
        self._ahead: list[tuple[np.ndarray, np.ndarray]] = []
        # called with the places drawn ahead (the Opacus hook lays them out at once)
        self.on_ahead: Any = None
        # (rows, coordinates, signs, large) placed, not read
        self.pending: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None
        self.values: list[Any] = []  # s v per measured step (arrays or 1-d tensors)
        self.large: list[np.ndarray] = []  # which of the step's probes were large
        # (rows, large, B_r C) of probe_layout per (batch size, probes)
        self._layouts: dict[tuple[int, int], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    @property
    def active(self) -> bool:
        """Whether there is a coordinate to probe."""
        return self.coordinates.size > 0

    def draw(self, b: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The probes of a step of ``b`` records: (rows, flat coordinates, signed values); they
        are pending until :meth:`measure`."""
        if self.pending is not None:
            raise ValueError(
                "a sensitivity probe was placed twice in one step: place it once per logical "
                "step (probe_rows() before the clipping), then observe the step"
            )
        k = min(self.per_step, self.coordinates.size)
        layout = self._layouts.get((b, k))
        if layout is None:  # once per batch size (issue 37, Done when 3); kept read-only
            rows, large = probe_layout(b, k)
            # the probes' norms: (B_r C), the sign applied per step (exact either way)
            scale = np.where(large, PROBE_SCALE * PARTNER_RATIO, PROBE_SCALE) * self.clip_norm
            for a in (rows, large, scale):
                a.setflags(write=False)
            layout = self._layouts[b, k] = (rows, large, scale)
        rows, large, scale = layout
        pick, uniform = self._picks(rows.size, k)
        coords = self.coordinates[pick]
        signs = np.where(uniform < 0.5, 1.0, -1.0)
        self.pending = (rows, coords, signs, large)
        self.pick = pick  # the pending probes' places in ``coordinates``
        return rows, coords, signs * scale

    def _draw_one(self, n: int, size: int) -> tuple[np.ndarray, np.ndarray]:
        """One step's draws of ``n`` probes among ``size`` coordinates: their places (the same
        draw as ``choice(self.coordinates, ...)``, without its checks of an array) and the
        uniforms of their signs."""
        pick = self._rng.choice(size, size=n, replace=False)
        return pick, self._rng.random(n)

    def _picks(self, n: int, k: int) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`_draw_one` of this step, from the generator as if every step drew its own:
        when the step takes the full ``k`` probes, from :data:`DRAW_AHEAD` steps drawn at once
        (the same calls back to back); a step that takes another number first rewinds the
        generator to the state before them and repeats the draws taken."""
        key = (n, self.coordinates.size)
        if self._ahead and key == self._ahead_key:
            return self._ahead.pop()
        if self._ahead:  # draws made for steps that did not come: undo them
            assert self._ahead_key is not None
            self._rng.bit_generator.state = self._ahead_state
            for _ in range(self._ahead_made - len(self._ahead)):
                self._draw_one(*self._ahead_key)
            self._ahead = []
        if n != k or n == 0:
            return self._draw_one(*key)
        self._ahead_key, self._ahead_state = key, self._rng.bit_generator.state
        self._ahead = [self._draw_one(*key) for _ in range(DRAW_AHEAD)][::-1]
        self._ahead_made = DRAW_AHEAD
        if self.on_ahead is not None:
            self.on_ahead([pick for pick, _ in self._ahead])
        return self._ahead.pop()

    def measure(self, values: Any, back: np.ndarray | None = None) -> None:
        """Record the values at the pending probes' coordinates (after the clipping), times
        their signs; a tensor is kept on its device as it is (no host sync, no operation per
        step: the conversion to float64 and the signs are applied on the host when read,
        :func:`_host`; both exact). ``back``: the permutation that puts ``values`` in the
        probes' order, when they were gathered in another (the Opacus hook's, by parameter)."""
        assert self.pending is not None
        _, _, signs, large = self.pending
        if hasattr(values, "new_tensor"):  # torch
            self.values.append(_Deferred(values, back, signs))
        else:
            values = np.asarray(values, dtype=np.float64)
            self.values.append((values if back is None else values[back]) * signs)
        self.large.append(large)
        self.pending = None

    def contributions(self) -> np.ndarray:
        """The measured ``s v`` of every probe, step after step, on the host."""
        if not self.values:
            return np.zeros(0)
        return np.concatenate([_host(v) for v in self.values])

    def small_by_step(self) -> list[np.ndarray]:
        """Per measured step, the measured ``s v`` of its small probes (the ones a grouping of
        rows would starve: module docstring)."""
        return [_host(v)[~large] for v, large in zip(self.values, self.large, strict=True)]

    def probe_rows(self, rows: Any) -> Any:
        """``rows`` (b, n_params) per-example gradients (NumPy or torch) with the step's probes
        written into a few rows (:func:`probe_layout`: each at its coordinate, the record's
        gradient left in the row's others; one new row when b = 0); a copy, the input is
        unchanged."""
        if hasattr(rows, "clone"):  # torch
            out = rows.clone() if len(rows) else rows.new_zeros((1, *rows.shape[1:]))
        else:
            rows = np.asarray(rows, dtype=np.float64)
            out = rows.copy() if len(rows) else np.zeros((1, *rows.shape[1:]))
        if out.ndim != 2 or (self.coordinates.size and self.coordinates.max() >= out.shape[1]):
            raise ValueError(
                f"probe_rows() needs the (batch, n_params) per-example gradients, got shape "
                f"{tuple(out.shape)}"
            )
        at, coords, values = self.draw(len(rows))
        if hasattr(out, "clone"):
            import torch

            at_t = torch.as_tensor(at, device=out.device)
            out[at_t, torch.as_tensor(coords, device=out.device)] = torch.as_tensor(
                values, dtype=out.dtype, device=out.device
            )
        else:
            out[at, coords] = values
        return out


class _Deferred:
    """A step's probe values as gathered on the device (any float dtype), in the order
    ``back`` undoes (None: the probes' order), and the probes' signs: read on the host by
    :func:`_host` (issue 37, Done when 3: no tensor operation per step for them)."""

    __slots__ = ("back", "signs", "values")

    def __init__(self, values: Any, back: np.ndarray | None, signs: np.ndarray) -> None:
        self.values, self.back, self.signs = values, back, signs


def _host(values: Any) -> np.ndarray:
    """A step's measured values (``s v``) as a float64 NumPy vector."""
    if isinstance(values, _Deferred):
        got = values.values.detach().cpu().double().numpy()
        # float64 conversion and the signs (+-1) are exact: the same numbers as on the device
        return (got if values.back is None else got[values.back]) * values.signs
    if hasattr(values, "detach"):
        values = values.detach().cpu().double().numpy()
    return np.asarray(values, dtype=np.float64).ravel()


class OpacusProbeHook:
    """Places ``probes`` in an Opacus ``DPOptimizer``'s per-example gradient rows before its
    clipping, and reads the clipped sum at the probes' coordinates before the noise.

    It wraps ``clip_and_accumulate`` on this one optimizer object (whatever method the object
    has: Opacus' own or a user's replacement): on the first call of a logical step with a
    non-empty batch, each probe's value is written in place at its coordinate of its row
    (:func:`probe_layout`) of its parameter's ``grad_sample`` (``offsets``: the flat offsets of
    ``optimizer.params``), then the original runs. :meth:`read` (called by the
    auditor before the noise) takes ``p.summed_grad`` at those coordinates, kept on its device.
    """

    def __init__(self, optimizer: Any, probes: SensitivityProbes, offsets: np.ndarray) -> None:
        self.optimizer = optimizer
        self.probes = probes
        self._params = [p for p in optimizer.params if p.requires_grad]
        self._offsets = np.asarray(offsets)
        self._sizes = np.array([p.numel() for p in self._params], dtype=np.int64)
        self._tables_of: Any = None  # the coordinates _tables describe
        dtypes = {p.dtype for p in self._params}
        self._dtype = dtypes.pop() if len(dtypes) == 1 else None  # the rows' one dtype, if so
        self._on_cpu = all(p.device.type == "cpu" for p in self._params)
        # the pending step's layout (_layout), made by _place and reused by read
        self._step: tuple[Any, ...] | None = None
        # the layouts of the probes drawn ahead, made back to back (by id of their places)
        self._laid_out: dict[int, tuple[Any, ...]] = {}
        probes.on_ahead = self._lay_out_ahead
        self._original = optimizer.clip_and_accumulate
        optimizer.clip_and_accumulate = self._clip_and_accumulate

    def _tables(self) -> None:
        """Per probe coordinate (ascending), once per coordinates object: its parameter's row
        length (the parameter's flat size) and its flat index in the parameter; ``_cuts``: the
        coordinates of parameter k are [_cuts[k], _cuts[k + 1])."""
        coords = self.probes.coordinates
        if (np.diff(coords) <= 0).any():
            raise ValueError("probe coordinates must be distinct and ascending (probe_coordinates)")
        owner = np.searchsorted(self._offsets, coords, side="right") - 1
        self._cuts = np.searchsorted(owner, np.arange(len(self._params) + 1))
        self._row_len = self._sizes[owner]
        self._local = coords - self._offsets[owner]
        self._tables_of = coords

    def _layout(self, pick: np.ndarray) -> tuple[Any, ...]:
        """The step's probes (``pick``: their places in the probes' coordinates) grouped by
        parameter, once per step (issue 37, Done when 3): (pick, order, spans, ordered, local_t,
        back): for each ``(k, lo, hi)`` in ``spans`` (the parameters with probes), probes
        ``order[lo:hi]`` sit on parameter ``k`` at its flat indices ``local_t[lo:hi]`` (a
        tensor); ``ordered``: their places, ``pick[order]``; ``back`` puts values gathered in
        that order back in the probes' order."""
        import torch

        if self._tables_of is not self.probes.coordinates:
            self._tables()
        order = np.argsort(pick)  # ascending coordinates: grouped by parameter
        ordered = pick[order]
        cuts = np.searchsorted(ordered, self._cuts).tolist()
        pairs = enumerate(zip(cuts[:-1], cuts[1:], strict=True))
        spans = [(k, lo, hi) for k, (lo, hi) in pairs if hi > lo]
        local_t = torch.from_numpy(self._local[ordered])
        return pick, order, spans, ordered, local_t, np.argsort(order)

    def _lay_out_ahead(self, picks: list[np.ndarray]) -> None:
        """:meth:`_layout` of the probes drawn ahead, at once (issue 37, Done when 3)."""
        self._laid_out = {id(pick): self._layout(pick) for pick in picks}

    def _clip_and_accumulate(self) -> None:
        if self.probes.pending is None:
            rows = [p.grad_sample for p in self._params]
            rows = [g[0] if isinstance(g, list) else g for g in rows]
            if rows and all(g is not None and len(g) > 0 for g in rows):
                self._place(rows)
        self._original()

    def _place(self, rows: list[Any]) -> None:
        """Write each probe's value at its coordinate of its row of the step's per-example
        gradients (one indexed write per parameter with probes; the rest of the row is the
        record's own gradient: module docstring)."""
        import torch

        at, _, values = self.probes.draw(len(rows[0]))
        pick = self.probes.pick
        step = self._laid_out.pop(id(pick), None)
        if step is None or step[0] is not pick:
            step = self._layout(pick)
        self._step = _, order, spans, ordered, local_t, _ = step
        at = at[order]
        values_t = torch.from_numpy(values[order])
        if self._dtype is not None:  # one dtype: convert once
            values_t = values_t.to(self._dtype)
        if self._on_cpu:  # each probe's flat index in its parameter's rows, at once
            flat_t = torch.from_numpy(at * self._row_len[ordered] + local_t.numpy())
        for k, lo, hi in spans:
            g = rows[k]
            if self._on_cpu and g.dtype == values_t.dtype and g.is_contiguous():
                g.view(-1).index_put_((flat_t[lo:hi],), values_t[lo:hi])  # one flat write
                continue
            value = values_t[lo:hi].to(dtype=g.dtype, device=g.device)
            at_k = torch.from_numpy(at[lo:hi]).to(g.device)
            if g.is_contiguous():
                target, idx = g.view(len(g), -1), (at_k, local_t[lo:hi].to(g.device))
            else:  # strided rows: index the parameter's own shape
                unravel = np.unravel_index(local_t[lo:hi].numpy(), tuple(g.shape[1:]))
                target = g
                idx = (at_k, *(torch.from_numpy(i).to(g.device) for i in unravel))
            target.index_put_(idx, value)

    def read(self) -> None:
        """Record the clipped sum at the pending probes' coordinates (before the noise), in the
        order gathered (by parameter) with the permutation back to the probes' order, kept on
        the device (:meth:`SensitivityProbes.measure`)."""
        import torch

        pick = self.probes.pick
        step = self._step
        if step is None or step[0] is not pick:  # placed by someone else: lay it out here
            step = self._layout(pick)
        self._step = None
        _, _, spans, _, local_t, back = step
        parts = []
        for k, lo, hi in spans:  # (detached on the host read, _host)
            flat = self._params[k].summed_grad.reshape(-1)
            idx = local_t[lo:hi]
            parts.append(flat.index_select(0, idx if self._on_cpu else idx.to(flat.device)))
        if self._on_cpu and self._dtype is not None:  # one concatenation, converted on read
            got = torch.cat(parts)
        else:
            device = parts[0].device
            got = torch.cat([v.double().to(device) for v in parts])
        self.probes.measure(got, back)

    def release(self) -> None:
        """The optimizer's own ``clip_and_accumulate`` again."""
        self.optimizer.clip_and_accumulate = self._original
        self.probes.on_ahead = None
