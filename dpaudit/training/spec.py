"""The run spec of a training job, typed: the one owner of the DP-SGD schedule facts.

A *run spec* says what one training job trains: ``design``, ``threat_model``, ``model``,
``canaries``, ``train``, ``target_epsilon`` and, for a tuning audit, ``selection``
(:mod:`dpaudit.training.job`). :class:`RunSpec` holds it frozen, with every key the schema
(``dpaudit/schema.yaml``, filled by :mod:`dpaudit.defaults`) leaves out at its default, and
checks on construction that its design, threat model, canary type, adjacency, adversary and
statistic go together. It also computes what both the config check (:mod:`dpaudit.config`)
and the trainers (:mod:`dpaudit.training.shard`, :mod:`dpaudit.training.tuning`) need:

* :meth:`RunSpec.layout`: canaries scored per trial, the size of the canary pool and the
  expected number of inserted records per trial (:class:`CanaryLayout`);
* :meth:`RunSpec.schedule`: the sample rate, steps and steps per epoch of the nominal dataset
  (training records plus the expected inserted canaries; :class:`Schedule`).

A bad value raises :class:`SpecError`, which names the run-spec key (``canaries.adversary``);
:func:`experiment_spec`, the run spec of a config's train experiment, prefixes it with the
experiment (``experiments.<name>.``), and :func:`nominal_schedule` is the schedule such an
experiment's noise is calibrated with as far as the config knows the dataset's size.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from dpaudit.data import catalog
from dpaudit.defaults import SETTING_KEYS, fill_defaults, train_experiment_defaults
from dpaudit.scores import DESIGNS  # ``design``: a training job writes each score-file layout

#: ``canaries.type`` of canaries that are input records.
INPUT_CANARIES = ("random_input", "mislabeled", "in_distribution", "clipbkd")
#: ``canaries.type`` of canaries that are gradients.
GRADIENT_CANARIES = ("dirac", "random_gradient")
#: ``canaries.type`` of canaries drawn from the dataset's held-out records (dataset.canary_pool).
RECORD_CANARIES = ("mislabeled", "in_distribution")
#: ``threat_model`` -> the canary types it scores.
TRAINING_THREAT_MODELS: dict[str, tuple[str, ...]] = {
    "black_box_loss": INPUT_CANARIES,
    "black_box_logit": INPUT_CANARIES,
    "white_box_dot": INPUT_CANARIES + GRADIENT_CANARIES,
    "final_model_cosine": GRADIENT_CANARIES,
    "per_step_dot": GRADIENT_CANARIES,
}
#: ``canaries.adversary`` (Annamalai et al. 2024, arXiv:2411.10614, §5.1 and §7).
ADVERSARIES = ("natural", "partially_informed", "batch_worst_case")
#: ``canaries.statistic``: what a ``per_step_dot`` canary's observations are reduced to.
CANARY_STATISTICS = ("sum", "likelihood_ratio")
#: ``canaries.neighbouring``.
NEIGHBOURING = ("add_remove", "zero_out")
#: ``canaries.insert``: fair coins (the audit) or no canary inserted (the no-canary control).
INSERT = ("coins", "none")
#: ``canaries.type`` of a tuning audit (``selection``, :mod:`dpaudit.training.tuning`): Z_D
#: (dirac) and natural records of the data's held-out canary pool (in_distribution, mislabeled)
#: or random inputs.
TUNING_CANARIES = ("dirac", "in_distribution", "mislabeled", "random_input")
#: What a tuning audit's run spec needs (Xiang, Wang, Wang 2024, arXiv:2402.13087, Algorithm 1:
#: one multi_run game per tuning trial, the white-box statistic of their Eq. 10, the vectorised
#: engine, the noise calibrated to each target epsilon): run-spec key -> allowed values.
TUNING_NEEDS: dict[str, tuple[Any, ...]] = {
    "design": ("multi_run",),
    "threat_model": ("white_box_dot",),
    "canaries.type": TUNING_CANARIES,
    "train.engine": ("auto", "stacked", "func"),
    "train.noise_multiplier": (None,),
}
#: Default canary pool of design ``lidp`` (Pillutla et al. 2023: a pool of 1000 canaries).
LIDP_DEFAULT_POOL = 1000
#: Gradient canaries are stored as (pool, parameters) float32: the default lidp pool holds at
#: most this many entries (256 MiB), and never fewer canaries than a trial scores.
GRADIENT_POOL_ENTRIES = 2**26


#: Defaults of the ``train`` block of a run spec: the schema's, without the keys that choose
#: settings (``target_epsilons``, ``nonprivate``: a job trains one setting).
TRAIN_DEFAULTS: dict[str, Any] = {
    k: v for k, v in fill_defaults("train").items() if k not in SETTING_KEYS
}
#: Defaults of the ``canaries`` block: the schema's.
CANARY_DEFAULTS: dict[str, Any] = fill_defaults("canaries")


@dataclass(frozen=True)
class JobId:
    """Which job is trained: shard ``shard`` of run seed ``seed`` of ``setting`` of
    ``experiment`` (the Opacus engine trains shard 0 only). Every engine takes it with the run
    spec, and names it in its score file's meta and its errors."""

    experiment: str
    setting: str
    seed: int
    shard: int = 0


class SpecError(ValueError):
    """A run spec value that is not allowed; ``key`` is its dotted run-spec key."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"{key}: {reason}")
        self.key = key
        self.reason = reason


@dataclass(frozen=True)
class CanaryLayout:
    """The canaries of one trial: ``per_trial`` scored (the score file's columns), drawn from
    a pool of ``pool_size``; ``expected_in`` records per trial are inserted in expectation
    (a canary or its zero-out record), the nominal dataset's extra records."""

    per_trial: int
    pool_size: int
    expected_in: float


@dataclass(frozen=True)
class Schedule:
    """DP-SGD's sampling schedule: the sample rate the accountant uses, the steps trained and
    the steps of one epoch (the shuffling samplers' epoch length)."""

    sample_rate: float
    steps: int
    steps_per_epoch: int


@functools.cache
def _experiment_defaults() -> dict[str, Any]:
    return train_experiment_defaults()


def _train_block(run_spec: Mapping[str, Any], drop_settings: bool) -> dict[str, Any]:
    """The run spec's ``train`` block, without the keys that choose settings (a job trains
    one) if ``drop_settings``."""
    train = dict(run_spec.get("train") or {})
    return {k: v for k, v in train.items() if not (drop_settings and k in SETTING_KEYS)}


def _frozen(block: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(block or {}))


def _merged(defaults: Mapping[str, Any], given: Mapping[str, Any] | None, block: str) -> dict:
    """``given`` with ``defaults`` filled in; an unknown key raises :class:`SpecError` naming
    the block and the keys allowed."""
    given = dict(given or {})
    unknown = sorted(set(given) - set(defaults))
    if unknown:
        raise SpecError(block, f"unknown key(s) {unknown}; allowed: {sorted(defaults)}")
    return {**defaults, **given}


@dataclass(frozen=True)
class RunSpec:
    """One training job's run spec, complete and checked (see the module docstring).

    ``model``, ``canaries``, ``train`` and ``selection`` are read-only mappings with every
    schema key; ``train`` leaves out the keys that choose settings (``target_epsilons``,
    ``nonprivate``). Build one with :meth:`from_block` (a config's experiment block) or
    :meth:`from_run_spec` (a job's run spec, partial or complete)."""

    design: str
    threat_model: str
    model: Mapping[str, Any]
    canaries: Mapping[str, Any]
    train: Mapping[str, Any]
    target_epsilon: float | None = None
    selection: Mapping[str, Any] | None = field(default=None)

    def __post_init__(self) -> None:
        for name in ("model", "canaries", "train"):
            object.__setattr__(self, name, _frozen(getattr(self, name)))
        if self.selection is not None:
            object.__setattr__(self, "selection", _frozen(self.selection))
        self._check()

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_run_spec(cls, run_spec: Mapping[str, Any], drop_settings: bool = False) -> RunSpec:
        """The run spec of a job from a mapping with (some of) the keys ``design``,
        ``threat_model``, ``model``, ``canaries``, ``train``, ``target_epsilon`` and
        ``selection``; keys left out take the schema's defaults, unknown keys raise.
        ``drop_settings``: leave out the ``train`` keys that choose settings
        (``target_epsilons``, ``nonprivate``) instead of rejecting them."""
        if isinstance(run_spec, RunSpec):
            return run_spec
        unknown = sorted(set(run_spec) - set(RUN_SPEC_KEYS))
        if unknown:
            raise SpecError("run spec", f"unknown key(s) {unknown}; allowed: {list(RUN_SPEC_KEYS)}")
        experiment = _experiment_defaults()
        selection = run_spec.get("selection")
        return cls(
            design=run_spec.get("design", experiment["design"]),
            threat_model=run_spec.get("threat_model", experiment["threat_model"]),
            model=fill_defaults("model", run_spec.get("model") or {}),
            canaries=_merged(CANARY_DEFAULTS, run_spec.get("canaries"), "canaries"),
            train=_merged(TRAIN_DEFAULTS, _train_block(run_spec, drop_settings), "train"),
            target_epsilon=run_spec.get("target_epsilon"),
            selection=None if selection is None else fill_defaults("selection", selection),
        )

    @classmethod
    def from_block(cls, block: Mapping[str, Any], target_epsilon: float | None = None) -> RunSpec:
        """The run spec of a train experiment block of a validated config (schema defaults
        filled in), at ``target_epsilon`` (None: any setting; the checks do not depend on it)."""
        spec = {k: block[k] for k in RUN_SPEC_KEYS if block.get(k) is not None}
        spec["target_epsilon"] = target_epsilon
        return cls.from_run_spec(spec, drop_settings=True)

    def to_dict(self) -> dict[str, Any]:
        """The run spec as plain dicts (what a job's ``run`` file and ``train_job`` take)."""
        out: dict[str, Any] = {
            "design": self.design,
            "threat_model": self.threat_model,
            "model": dict(self.model),
            "canaries": dict(self.canaries),
            "train": dict(self.train),
            "target_epsilon": self.target_epsilon,
        }
        if self.selection is not None:
            out["selection"] = dict(self.selection)
        return out

    # ------------------------------------------------------------------ facts

    @property
    def gradient(self) -> bool:
        """Whether the canaries are gradients (dirac, random_gradient)."""
        return self.canaries["type"] in GRADIENT_CANARIES

    @property
    def per_trial_key(self) -> str:
        """The config key that sets the canaries scored per trial."""
        return {"one_run": "canaries.m", "lidp": "canaries.k"}.get(self.design, "canaries")

    def layout(self, n_params: int | None = None) -> CanaryLayout:
        """Canaries per trial, the pool size and the expected inserted records per trial.

        The pool is ``canaries.pool_size`` when set; else the clipbkd components
        (``last_component - first_component``); else ``m`` (one_run), 1 (multi_run) or, for
        lidp, at least ``2k`` and by default :data:`LIDP_DEFAULT_POOL`, capped for gradient
        canaries at :data:`GRADIENT_POOL_ENTRIES` / ``n_params`` (``n_params`` None: the cap
        is unknown and the pool given is the smallest it can be, ``2k``)."""
        c, design = self.canaries, self.design
        if design == "one_run":
            per_trial, expected_in = int(c["m"]), int(c["m"]) / 2
            default = per_trial
        elif design == "lidp":
            per_trial, expected_in = 2 * int(c["k"]), int(c["k"])
            if not self.gradient:
                cap = LIDP_DEFAULT_POOL
            elif n_params is None:
                cap = per_trial
            else:
                cap = min(LIDP_DEFAULT_POOL, GRADIENT_POOL_ENTRIES // n_params)
            default = max(per_trial, cap)
        else:
            per_trial, expected_in, default = 1, 0.5, 1
        if c["type"] == "clipbkd":
            default = int(c["last_component"]) - int(c["first_component"])
        pool = int(c["pool_size"]) if c["pool_size"] is not None else default
        if per_trial < 1:
            key = "canaries.m" if design == "one_run" else "canaries.k"
            raise SpecError(key, f"must be >= 1 (canaries per trial), got {c[key[9:]]!r}")
        if pool < per_trial:
            raise SpecError(
                self.per_trial_key,
                f"design {design!r} needs {per_trial} canaries per trial but the canary pool "
                f"holds {pool} (canaries.pool_size or the clipbkd components); allowed: a pool "
                f"of at least {per_trial}",
            )
        if c["neighbouring"] == "zero_out":  # every column holds a record (canary or zero-out)
            expected_in = per_trial
        if c["insert"] == "none":  # the no-canary control: the data alone sets the sample rate
            expected_in = 0
        return CanaryLayout(per_trial, pool, expected_in)

    def nominal_records(self, n_train: int, n_params: int | None = None) -> int:
        """The records a batch is drawn from on ``n_train`` training records: ``max(1,
        round(n_train + expected_in))``, the expected inserted canaries included
        (:meth:`layout`)."""
        return max(1, round(n_train + self.layout(n_params).expected_in))

    def schedule(self, n_train: int, n_params: int | None = None) -> Schedule:
        """Sample rate, steps and steps per epoch of a job on ``n_train`` training records.

        The nominal dataset is ``n = max(1, round(n_train + expected_in))`` records
        (:meth:`layout`). The vectorised engines sample at ``q = min(1, B / n)`` for
        ``train.steps`` steps, or ``train.epochs`` epochs of ``max(1, round(n / B))`` steps.
        The Opacus engine's data loader has ``ceil(n / B)`` batches an epoch, sampled at
        ``q = 1 / batches`` (it measures both on its own loader; this is their nominal value)."""
        t = self.train
        b = int(t["batch_size"])
        n = self.nominal_records(n_train, n_params)
        if t["engine"] == "opacus":
            batches = math.ceil(n / b)
            return Schedule(1.0 / batches, int(t["epochs"]) * batches, batches)
        per_epoch = max(1, round(n / b))
        steps = int(t["steps"]) if t["steps"] is not None else int(t["epochs"]) * per_epoch
        return Schedule(min(1.0, b / n), steps, per_epoch)

    def nominal_schedule(self, n_train: int | None) -> Schedule:
        """:meth:`schedule` on ``n_train`` records, or, with ``n_train`` None (real data whose
        size is known only once it is prepared: :func:`dpaudit.data.catalog.known_n_train`),
        sample rate 1 and ``train.steps`` or else ``train.epochs`` steps: the largest epsilon
        the accountant claims at a given noise, so that a check of the targets it can reach
        stays conservative."""
        if n_train is not None:
            return self.schedule(int(n_train))
        t = self.train
        return Schedule(1.0, int(t["steps"] or t["epochs"]), 1)

    # ------------------------------------------------------------------ checks

    def _check(self) -> None:
        """Raise :class:`SpecError` unless the design, threat model, canary type, adjacency,
        adversary, statistic and insertion go together."""
        c, design, tm = self.canaries, self.design, self.threat_model
        if design not in DESIGNS:
            raise SpecError("design", f"unknown design {design!r}; allowed: {list(DESIGNS)}")
        if tm not in TRAINING_THREAT_MODELS:
            raise SpecError(
                "threat_model",
                f"unknown threat_model {tm!r}; allowed: {list(TRAINING_THREAT_MODELS)}",
            )
        kind, kinds = c["type"], list(INPUT_CANARIES + GRADIENT_CANARIES)
        if kind not in kinds:
            raise SpecError("canaries.type", f"unknown canary type {kind!r}; allowed: {kinds}")
        for key, allowed in (
            ("neighbouring", NEIGHBOURING),
            ("adversary", ADVERSARIES),
            ("statistic", CANARY_STATISTICS),
            ("insert", INSERT),
        ):
            if c[key] not in allowed:
                raise SpecError(f"canaries.{key}", f"{c[key]!r}; allowed: {list(allowed)}")
        if self.selection is not None:
            self._check_tuning()
        zero_out = c["neighbouring"] == "zero_out"
        if c["adversary"] != "natural" and not (
            self.gradient and zero_out and design == "multi_run"
        ):
            raise SpecError(
                "canaries.adversary",
                f"{c['adversary']!r} needs design multi_run, gradient canaries (dirac, "
                f"random_gradient) and canaries.neighbouring zero_out; got design {design!r}, "
                f"type {kind!r}, neighbouring {c['neighbouring']!r}; allowed: natural",
            )
        lr = c["statistic"] == "likelihood_ratio"
        if (lr or c["prefix_batches"] is not None) and tm != "per_step_dot":
            which = "statistic" if lr else "prefix_batches"
            raise SpecError(
                f"canaries.{which}",
                f"scores the per-step observations, so it needs threat_model per_step_dot, "
                f"not {tm!r}",
            )
        if c["prefix_batches"] is not None and not lr:
            raise SpecError(
                "canaries.prefix_batches",
                f"needs canaries.statistic likelihood_ratio (got {c['statistic']!r})",
            )
        if c["insert"] == "none" and design != "one_run":
            raise SpecError(
                "canaries.insert",
                f"none (the no-canary control) is for design one_run, not {design!r}",
            )
        if zero_out and not self.gradient:
            raise SpecError(
                "canaries.neighbouring",
                "zero_out needs gradient canaries (the zero-out record has a zero gradient, "
                "which no input has)",
            )
        if kind not in TRAINING_THREAT_MODELS[tm]:
            raise SpecError(
                "threat_model",
                f"threat model {tm!r} does not apply to {kind!r} canaries; it takes "
                f"{list(TRAINING_THREAT_MODELS[tm])}",
            )
        if kind == "clipbkd":
            for part in ("first_component", "last_component"):
                if c[part] is None:
                    raise SpecError(
                        f"canaries.{part}",
                        "required for clipbkd canaries (the pool is components "
                        "first_component..last_component)",
                    )
        self.layout()

    def _check_tuning(self) -> None:
        """Raise :class:`SpecError` unless a tuning audit's run spec has what
        :data:`TUNING_NEEDS` lists."""
        for key, allowed in TUNING_NEEDS.items():
            head, _, tail = key.partition(".")
            value = getattr(self, head) if not tail else getattr(self, head)[tail]
            if value not in allowed:
                raise SpecError(
                    key,
                    f"{value!r}; a selection (tuning) audit needs one of {list(allowed)} (the "
                    "noise is calibrated to each target epsilon)",
                )


#: Keys of a run spec.
RUN_SPEC_KEYS = (
    "design",
    "threat_model",
    "model",
    "canaries",
    "train",
    "target_epsilon",
    "selection",
)


def experiment_spec(exp: str, block: Mapping[str, Any]) -> RunSpec:
    """The run spec of train experiment ``exp`` (its validated config block, at any setting:
    :meth:`RunSpec.from_block`); a spec that does not check out raises :class:`SpecError`
    whose key is the config key, ``experiments.<exp>.<run-spec key>``."""
    try:
        return RunSpec.from_block(block)
    except SpecError as err:
        raise SpecError(f"experiments.{exp}.{err.key}", err.reason) from None


def nominal_schedule(block: Mapping[str, Any]) -> Schedule:
    """The schedule a train experiment's job calibrates its noise with, as far as the config
    knows the dataset's size (:meth:`RunSpec.nominal_schedule` at
    :func:`dpaudit.data.catalog.known_n_train`)."""
    n_train = catalog.known_n_train(block.get("dataset") or {})
    return RunSpec.from_block(block).nominal_schedule(n_train)
