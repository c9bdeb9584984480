"""Framework-neutral canaries for auditing a user's own DP training loop (pure NumPy).

White box, :class:`GradientCanaries` (Steinke, Nasr, Jagielski 2023, arXiv:2305.08846,
Sec. 4 and Algorithm 1; Dirac gradient canaries as Nasr et al. 2023, arXiv:2302.07956): m
canaries, canary i a gradient ``C e_{j_i}`` on its own coordinate ``j_i`` of the flat parameter
vector (C the clipping norm, so clipping leaves it unchanged), IN by a fair coin. An IN canary
is sampled into each logical batch like a record of the training (``sampling``: ``poisson``,
each step with probability q; ``shuffle``, once per epoch at a uniformly random step), and its
gradient is added to the *sum of the clipped per-example gradients* before the noise. The
score of canary i is the noisy sum at its coordinate, summed over the steps and divided by C:

    score_i = sum_t (sum_b clip(g_b)[j_i] + C N_{i,t} + sigma C Z_t[j_i]) / C,

N_{i,t} = 1 when IN canary i was sampled at step t. This is the update *before* the optimizer's
learning rate, its batch-size normalisation and any momentum (the white-box adversary sees every
step; Steinke et al. Sec. 4: "we directly control the gradient"). Where the data's clipped
gradients do not move coordinate j_i, score_i = (number of steps that sampled it) +
sigma sqrt(T) Z: about T q + N(0, sigma^2 T) for an IN canary and N(0, sigma^2 T) for an OUT one.

Black box, :class:`InputCanaries`: m records (``mislabeled``, ``random_input`` or held-out
``in_distribution`` records, as :mod:`dpaudit.canaries.input_space` defines them), IN by a fair
coin; the IN ones join the training data; after training every canary is scored by the final
model (e.g. minus its loss).

Both end in an ordinary score file (:meth:`score_file`, design ``one_run``) and an audit with a
verdict (:meth:`audit`, see :mod:`dpaudit.attach.claim`). Any framework drives them: the
Opacus adapter (:mod:`dpaudit.attach.opacus_adapter`), the dataset wrapper
(:mod:`dpaudit.attach.dataset`), a hand-written PyTorch loop (``examples/audit_handwritten.py``)
or a JAX loop (hand in the noisy update as a NumPy array, or final scores to
:func:`dpaudit.attach.claim.make_score_file`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from dpaudit.attach.claim import (
    DIRAC_SCORE,
    AuditResult,
    audit_file,
    check_claim_settings,
    check_rate,
    make_score_file,
)
from dpaudit.attach.conformance import DEFAULT_ALPHA, ConformanceReport
from dpaudit.attach.power import unseen_after
from dpaudit.attach.probes import SensitivityProbes, probe_coordinates
from dpaudit.attach.sampling_record import SamplingRecord
from dpaudit.canaries import input_space
from dpaudit.canaries.gradient_space import dirac_coordinates
from dpaudit.canaries.inclusion import fair_coins
from dpaudit.keys import CLAIMED_EPSILON
from dpaudit.scores import ScoreFile
from dpaudit.seeding import derive_seed

SAMPLINGS = ("poisson", "shuffle")
INPUT_KINDS = ("mislabeled", "random_input", "in_distribution")


def _check_int(value: Any, name: str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


class _Audited:
    """Score file and audit of canaries with fair-coin ``membership`` (subclasses provide the
    scores, the threat model and their metadata)."""

    membership: np.ndarray
    seed: int
    threat_model: str

    def _scores(self, scores: Any) -> np.ndarray:
        raise NotImplementedError

    def _meta(self) -> dict[str, Any]:
        return {}

    def _claim_settings(self) -> dict[str, Any]:
        return {}

    def score_file(
        self,
        claimed_epsilon: float | None = None,
        *,
        delta: float,
        accountant: str | None = None,
        scores: Any = None,
        experiment: str = "own_training",
        setting: str = "default",
        **settings: Any,
    ) -> ScoreFile:
        """The ``one_run`` score file of these canaries (:mod:`dpaudit.scores`): write it with
        :func:`dpaudit.scores.write`; ``dpaudit audit`` and every estimator read it unchanged.

        The claim (:func:`dpaudit.attach.claim.resolve_claim`): ``claimed_epsilon`` from the
        user's accountant, or computed at ``delta`` by ``accountant`` from ``noise_multiplier``,
        ``sample_rate`` and ``steps`` (keywords; an attached auditor fills in what it saw).
        ``scores``: the final scores (black box only)."""
        given = {k: v for k, v in settings.items() if v is not None}
        unknown = sorted(set(given) - {"noise_multiplier", "sample_rate", "steps"})
        if unknown:
            raise TypeError(f"unknown keyword argument(s) {unknown}")
        # checked also beside claimed_epsilon: the conformance report compares them
        # (steps=2.5 or steps=True was read there as 2 or 1 steps)
        given = check_claim_settings(**given)
        claim_settings = {} if claimed_epsilon is not None else {**self._claim_settings(), **given}
        return make_score_file(
            self._scores(scores),
            self.membership,
            claimed_epsilon,
            delta=delta,
            accountant=accountant,
            threat_model=self.threat_model,
            experiment=experiment,
            setting=setting,
            seed=self.seed,
            extra_meta=self._meta(),
            **claim_settings,
        )

    def audit(
        self,
        claimed_epsilon: float | None = None,
        *,
        delta: float,
        confidence: float = 0.95,
        extra_estimators: Mapping[str, Mapping[str, Any]] | None = None,
        conformance_alpha: float = DEFAULT_ALPHA,
        **kwargs: Any,
    ) -> AuditResult:
        """The audit table and verdict (:func:`dpaudit.attach.claim.audit_file`) of
        :meth:`score_file` (same arguments) at ``confidence``, and the conformance report of
        what the auditor measured (``result.conformance``, each stage's checks at error
        probability ``conformance_alpha``; :mod:`dpaudit.attach.conformance`). The measured
        mechanism's epsilon and the departing stages go into the score file's metadata
        (``measured_mechanism``, ``conformance``), also when ``claimed_epsilon`` is given."""
        if not 0 < conformance_alpha < 1:
            raise ValueError(f"conformance_alpha must lie in (0, 1), got {conformance_alpha!r}")
        sf = self.score_file(claimed_epsilon, delta=delta, **kwargs)
        result = audit_file(sf, confidence, extra_estimators)
        result.conformance = self._conformance(sf, kwargs, conformance_alpha)
        if result.conformance is not None:
            result.unseen_stages = unseen_after(result.conformance.seen, result.unseen_stages)
            sf.meta.update(result.conformance.score_meta())
        return result

    def _conformance(
        self, sf: ScoreFile, given: Mapping[str, Any], alpha: float
    ) -> ConformanceReport | None:
        return None


class GradientCanaries(_Audited):
    """m Dirac gradient canaries for a DP-SGD loop (see the module docstring for the score).

    ``n_params``: length of the flat parameter vector (the trainable parameters in order);
    ``sample_rate``: the training's sampling rate q (Poisson) or 1 / steps per epoch
    (``sampling="shuffle"``); ``clip_norm``: the clipping norm C; ``coordinates``: the m
    distinct canary coordinates (default: random, from ``seed``; coordinates the data's
    gradients rarely move make the audit stronger, see
    :func:`dpaudit.canaries.gradient_space.lowest_mass_coordinates`).

    Per logical step: ``draw = c.draw_step()``; add ``c.canary_gradient(draw)`` (or
    ``clip_norm`` at ``c.coordinates[draw]``) to the summed clipped gradient; add the noise;
    ``c.observe(noisy_sum)`` with the flat noisy sum (before any division by the batch size).
    """

    threat_model = "per_step_dot"

    def __init__(
        self,
        m: int,
        n_params: int,
        sample_rate: float,
        clip_norm: float,
        seed: int = 0,
        coordinates: Any = None,
        sampling: str = "poisson",
    ) -> None:
        self.m = _check_int(m, "m", 2)
        self.n_params = _check_int(n_params, "n_params", 1)
        self.sample_rate = check_rate(sample_rate)
        if isinstance(clip_norm, bool) or not isinstance(clip_norm, int | float | np.floating):
            raise ValueError(f"clip_norm must be a finite number > 0, got {clip_norm!r}")
        if not (math.isfinite(clip_norm) and clip_norm > 0):
            raise ValueError(f"clip_norm must be a finite number > 0, got {clip_norm!r}")
        self.clip_norm = float(clip_norm)
        if sampling not in SAMPLINGS:
            raise ValueError(f"sampling must be one of {list(SAMPLINGS)}, got {sampling!r}")
        self.sampling = sampling
        self.seed = _check_int(seed, "seed", 0)
        if self.m > self.n_params:
            raise ValueError(
                f"m = {self.m} Dirac canaries need {self.m} distinct coordinates, but the model "
                f"has {self.n_params} trainable parameters: lower m"
            )
        self.membership = fair_coins(self.m, derive_seed(self.seed, "attach", "coins"))
        self._in = self.membership == 1
        if coordinates is None:
            coords = dirac_coordinates(
                self.m, self.n_params, derive_seed(self.seed, "attach", "coordinates")
            )
        else:
            coords = np.asarray(coordinates)
            if coords.dtype.kind not in "iu" or coords.shape != (self.m,):
                raise ValueError(f"coordinates must be {self.m} integers, got {coords!r}")
            if len(np.unique(coords)) != self.m:
                raise ValueError("coordinates must be distinct (one per canary)")
            if coords.min() < 0 or coords.max() >= self.n_params:
                raise ValueError(f"coordinates must lie in 0..{self.n_params - 1}")
        self.coordinates = coords.astype(np.int64)
        self._rng = np.random.default_rng(derive_seed(self.seed, "attach", "sampling"))
        # Poisson: the uniforms of the next steps, drawn at once (random((r, m)) gives the
        # rows that r calls of random(m) give, in order: the same draws, issue 37, Done
        # when 3); at most about 1 MB of them
        self._uniforms = np.zeros((0, self.m))
        self._uniform_row = 0
        self._score = np.zeros(self.m)
        self._epoch_slot: np.ndarray | None = None
        self.steps = 0
        self.draws = 0
        self.sampled_counts = np.zeros(self.m, dtype=np.int64)
        self._first_bad: int | None = None
        self.last_draw = np.zeros(self.m, dtype=bool)
        self.sampling_record: SamplingRecord | None = None
        # sum of squared noisy sums at the coordinates of canaries not drawn that step, and
        # their number (the noise check, :mod:`dpaudit.attach.noise_checks`)
        self.noise_sum_sq = 0.0
        self.noise_df = 0
        self.noise_path: list[tuple[float, int]] = []  # the two after each observed step
        # a few sensitivity probes per step on coordinates no canary uses, placed only when the
        # loop asks (probe_rows; the Opacus adapter places them itself): dpaudit.attach.probes
        self.probes = SensitivityProbes(
            probe_coordinates(self.n_params, self.coordinates, self.seed), self.clip_norm, seed
        )

    @property
    def steps_per_epoch(self) -> int:
        """Logical steps per epoch under ``sampling="shuffle"``: round(1 / sample_rate)."""
        return max(1, round(1.0 / self.sample_rate))

    def draw_step(self) -> np.ndarray:
        """Which canaries this logical step samples, (m,) bool: only IN canaries, each like a
        record (Poisson: independently with probability q; shuffle: at its step of the epoch).
        Exactly once per logical step, before that step's :meth:`observe` (issue 36, item 10:
        a second draw before the observation is an error naming both counts)."""
        if self.draws > self.steps:
            raise ValueError(
                f"draw_step() called again before observe(): step {self.steps + 1}'s canaries "
                "were drawn but its noisy sum was never observed (canaries drawn but never "
                "observed). Per logical step call draw_step() once, add canary_gradient(draw) "
                "to the summed clipped gradient, add the noise, then observe(noisy_sum)"
            )
        if self.sampling == "poisson":
            if self._uniform_row == len(self._uniforms):
                ahead = max(1, min(16, 2**17 // self.m))
                self._uniforms, self._uniform_row = self._rng.random((ahead, self.m)), 0
            hit = self._uniforms[self._uniform_row] < self.sample_rate
            self._uniform_row += 1
        else:
            k = self.steps_per_epoch
            pos = self.draws % k
            if pos == 0 or self._epoch_slot is None:
                self._epoch_slot = self._rng.integers(0, k, size=self.m)
            hit = self._epoch_slot == pos
        draw = np.logical_and(hit, self._in, out=hit)
        self.sampled_counts += draw
        self.last_draw = draw
        self.draws += 1
        return draw

    def canary_gradient(self, draw: np.ndarray) -> np.ndarray:
        """The flat vector (n_params,) to add to the summed clipped gradient: ``clip_norm`` at
        the coordinate of each canary in ``draw`` (from :meth:`draw_step`), 0 elsewhere."""
        draw = self._check_draw(draw)
        vec = np.zeros(self.n_params)
        vec[self.coordinates[draw]] = self.clip_norm
        return vec

    def _check_draw(self, draw: Any) -> np.ndarray:
        draw = np.asarray(draw)
        if draw.shape != (self.m,) or draw.dtype != bool:
            raise ValueError(f"draw must be the (m,) = ({self.m},) bool array of draw_step()")
        return draw

    def probe_rows(self, per_example_grads: Any) -> Any:
        """This step's per-example gradients (b, n_params) (NumPy or torch), *before* the
        loop's clipping, with sensitivity probes (Diracs of norm
        :data:`~dpaudit.attach.probes.PROBE_SCALE` C or larger, random signs) in place of a few
        rows (:func:`~dpaudit.attach.probes.probe_layout`: adjacent rows and rows half a batch
        apart; a new row when b = 0); a copy. Clip and sum the returned rows, then
        :meth:`observe` the whole noisy sum: the audit's conformance report checks what the
        clipping let through against C, and that each row was clipped on its own
        (:mod:`dpaudit.attach.probes`). At most once per logical step."""
        if not self.probes.active:
            raise ValueError(
                f"probe_rows(): every one of the {self.n_params} coordinates holds a canary, none "
                "is left for a probe: lower m"
            )
        return self.probes.probe_rows(per_example_grads)

    def observe(self, noisy_sum: Any) -> None:
        """Add one logical step's flat noisy sum (n_params,) (summed clipped gradients,
        canaries and noise; before the batch-size division and the learning rate)."""
        flat = np.asarray(noisy_sum, dtype=np.float64).ravel()
        if flat.shape != (self.n_params,):
            raise ValueError(
                f"the noisy sum must have n_params = {self.n_params} entries, got {flat.size}"
            )
        if self.probes.pending is not None:  # the step's probes, read off the noisy sum
            self.probes.measure(flat[self.probes.pending[1]])
        self.observe_values(flat[self.coordinates])

    def observe_values(self, values: Any) -> None:
        """As :meth:`observe`, given only the noisy sum at the m canary coordinates (m,)."""
        vals = np.asarray(values, dtype=np.float64).ravel()
        if self.probes.pending is not None:
            raise ValueError(
                "observe_values() after probe_rows(): the probe's coordinate is not among the "
                "canaries' values; pass the whole noisy sum to observe()"
            )
        if vals.shape != (self.m,):
            raise ValueError(
                f"expected the noisy sum at the {self.m} canary coordinates, got {vals.size} values"
            )
        if self.draws != self.steps + 1:
            raise ValueError(
                f"observe() for step {self.steps + 1} without draw_step(): a noisy sum observed "
                f"but no canaries drawn for it ({self.draws} draws, {self.steps} steps observed "
                "before this one). Per logical step call draw_step() once, add "
                "canary_gradient(draw) to the summed clipped gradient, add the noise, then "
                "observe(noisy_sum)"
            )
        self.steps += 1
        if self.sampling_record is not None:
            self.sampling_record.close_step()
        free = ~self.last_draw  # no canary gradient at these coordinates this step
        self.noise_sum_sq += float(np.square(vals[free]).sum())
        self.noise_df += int(free.sum())
        self.noise_path.append((self.noise_sum_sq, self.noise_df))
        if self._first_bad is None and not np.isfinite(vals).all():
            self._first_bad = self.steps
        self._score += vals / self.clip_norm

    def record_batch(self, indices: Any, n_records: int) -> None:
        """The dataset indices (of a dataset of ``n_records``) of the records the training's
        sampler put into this logical step: call it once per logical batch, before the step's
        :meth:`observe`; the audit's conformance report then checks the sampling, the steps
        and the accounting against the claim (:mod:`dpaudit.attach.sampling_checks`)."""
        if self.sampling_record is None:
            if self.steps:
                raise ValueError(
                    f"record_batch() first called after {self.steps} observed steps: call it "
                    "from the first step on"
                )
            self.sampling_record = SamplingRecord(n_records, source="record_batch()")
        elif n_records != self.sampling_record.n_records:
            raise ValueError(
                f"record_batch(): n_records {n_records} differs from the first call's "
                f"{self.sampling_record.n_records}"
            )
        self.sampling_record.deliver(indices)

    def _noise_stats(self) -> tuple[float, int]:
        """(sum of squares, count) of the noisy sums at the coordinates of the canaries not
        drawn at their step (:mod:`dpaudit.attach.noise_checks`)."""
        return self.noise_sum_sq, self.noise_df

    def _noise_multiplier_used(self, given: Mapping[str, Any]) -> float | None:
        """The noise multiplier the training used: the one the audit is given (a hand-written
        loop states it); an adapter reads its optimizer's."""
        value = given.get("noise_multiplier")
        return None if value is None else float(value)

    def _conformance(
        self, sf: ScoreFile, given: Mapping[str, Any], alpha: float
    ) -> ConformanceReport | None:
        from dpaudit.attach.measured import measure

        return measure(
            steps_taken=self.steps,
            record=self.sampling_record,
            claimed_rate=self.sample_rate,
            noise_multiplier=self._noise_multiplier_used(given),
            noise=(*self._noise_stats(), self.clip_norm),
            noise_path=self.noise_path if len(self.noise_path) == self.steps else None,
            claimed_epsilon=sf.meta[CLAIMED_EPSILON],
            delta=sf.delta,
            claim_accountant=sf.meta["accountant"],
            given=given,
            alpha=alpha,
            sensitivity=self._sensitivity_measured(),
            normalisation=self._normalisation_measured(),
        )

    def _normalisation_measured(self) -> Any:
        """The update's divisor as measured (:class:`~dpaudit.attach.normalisation_checks.
        Normalisation`); None here: a hand-written loop divides after :meth:`observe`, where
        the canaries cannot see it (normalisation unseen)."""
        return None

    #: Why no noisy step was observed (the audit's error; a step function that never steps).
    _no_step_hint = (
        "observe() was never called (the training loop never stepped, or the canaries were "
        "made after it); per logical step call draw_step(), add canary_gradient(draw) to the "
        "summed clipped gradient, add the noise, then observe(noisy_sum)"
    )

    #: What the probe's value is read from (the check's text).
    _probe_read_from = "the noisy sum observed, noise included"

    def _sensitivity_measured(self) -> tuple[np.ndarray, list, float, str] | None:
        """The probes' contributions, the small probes' per step, the clipping norm and where
        they were read; None when no probe was placed (sensitivity unseen)."""
        if not self.probes.values:
            return None
        probes = self.probes
        return probes.contributions(), probes.small_by_step(), self.clip_norm, self._probe_read_from

    @property
    def scores(self) -> np.ndarray:
        """The scores so far (m,): the noisy sums at the canary coordinates / C, over steps."""
        return self._score.copy()

    @property
    def first_nonfinite_step(self) -> int | None:
        """The first step (1-based) whose noisy sum was not finite at a canary coordinate."""
        return self._first_bad

    def _scores(self, scores: Any) -> np.ndarray:
        if scores is not None:
            raise ValueError("gradient canaries score themselves (observe); do not pass scores")
        if self.steps == 0:
            raise ValueError(f"no noisy step was observed: {self._no_step_hint}")
        if self.draws != self.steps:
            raise ValueError(
                f"canaries drawn for {self.draws} steps but {self.steps} noisy sums observed: "
                "the last draw_step() has no observe() (canaries drawn but never observed)"
            )
        first_bad = self.first_nonfinite_step
        if first_bad is not None:
            score = self.scores
            bad = int(np.argmax(~np.isfinite(score)))
            raise ValueError(
                f"non-finite scores: the noisy update at canary {bad}'s coordinate "
                f"{int(self.coordinates[bad])} was not finite at step "
                f"{first_bad} of {self.steps} (the training diverged); "
                "no bound can be drawn"
            )
        return self.scores

    def _meta(self) -> dict[str, Any]:
        return {
            "score": DIRAC_SCORE,
            "canary_type": "dirac",
            "canary_sampling": self.sampling,
            "canary_sample_rate": self.sample_rate,
            "max_grad_norm": self.clip_norm,
            "steps": self.steps,
            "n_params": self.n_params,
        }

    def _claim_settings(self) -> dict[str, Any]:
        return {"sample_rate": self.sample_rate, "steps": self.steps}


class InputCanaries(_Audited):
    """m black-box input canaries with fair-coin membership (pure NumPy).

    ``kind``: ``mislabeled`` (records of ``x_pool``/``y_pool`` with a random different label,
    Steinke et al. Sec. 4.2), ``in_distribution`` (records of the pool, labels kept) or
    ``random_input`` (N(0, scale^2 / d) inputs of ``input_shape``, random labels; needs no
    pool). The pool must hold records the training never sees otherwise (held out), at least m
    of them. ``n_classes``: default the pool's largest label + 1.

    ``x``, ``y``: the canaries; ``membership``: 1 = IN; ``x[membership == 1]`` and
    ``y[membership == 1]`` go into the training data. After training, score every canary
    (higher means IN, e.g. minus the loss) and call :meth:`score_file` / :meth:`audit` with
    ``scores=``.
    """

    def __init__(
        self,
        m: int,
        kind: str,
        seed: int = 0,
        *,
        x_pool: Any = None,
        y_pool: Any = None,
        n_classes: int | None = None,
        input_shape: tuple[int, ...] | None = None,
        scale: float = 1.0,
        score: str = "minus_loss",
    ) -> None:
        self.m = _check_int(m, "m", 2)
        self.seed = _check_int(seed, "seed", 0)
        if kind not in INPUT_KINDS:
            raise ValueError(f"canary kind must be one of {list(INPUT_KINDS)}, got {kind!r}")
        self.kind = kind
        self.score_name = score
        self.threat_model = "black_box_loss" if score == "minus_loss" else "black_box_" + score
        self.membership = fair_coins(self.m, derive_seed(self.seed, "attach", "coins"))
        canary_seed = derive_seed(self.seed, "attach", "canaries") % 2**32
        if kind == "random_input":
            if input_shape is None or n_classes is None:
                raise ValueError("random_input canaries need input_shape and n_classes")
            n_classes = _check_int(n_classes, "n_classes", 2)
            d = int(np.prod(input_shape))
            x, y = input_space.random_inputs(self.m, d, n_classes, scale, canary_seed)
            self.x, self.y = x.reshape((self.m, *input_shape)), y
        else:
            if x_pool is None or y_pool is None:
                raise ValueError(f"{kind} canaries need held-out records: x_pool and y_pool")
            x_pool, y_pool = np.asarray(x_pool), np.asarray(y_pool)
            if y_pool.dtype.kind not in "iu" or y_pool.ndim != 1 or len(y_pool) != len(x_pool):
                raise ValueError(
                    f"{kind} canaries need integer class labels, one per pool record "
                    f"(got labels of dtype {y_pool.dtype}, shape {y_pool.shape})"
                )
            if n_classes is None:
                n_classes = int(y_pool.max()) + 1
            n_classes = _check_int(n_classes, "n_classes", 2)
            if kind == "mislabeled":
                x, y = input_space.mislabeled(x_pool, y_pool, self.m, n_classes, canary_seed)
            else:
                x, y = input_space.in_distribution(x_pool, y_pool, self.m, canary_seed)
            self.x, self.y = x, y
        self.n_classes = n_classes

    @property
    def members(self) -> tuple[np.ndarray, np.ndarray]:
        """The IN canaries (x, y): add them to the training data."""
        keep = self.membership == 1
        return self.x[keep], self.y[keep]

    def _scores(self, scores: Any) -> np.ndarray:
        if scores is None:
            raise ValueError("give the final model's score of every canary: scores=")
        return np.asarray(scores, dtype=np.float64)

    def _meta(self) -> dict[str, Any]:
        return {"score": self.score_name, "canary_type": self.kind}
