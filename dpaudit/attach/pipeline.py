"""The user's own training function as a pipeline training step (``train.entry_point``).

An experiment with ``train.entry_point: "package.module:function"`` is trained by that
function instead of dpaudit's engines; everything after the score file (audits, tables, the
``verdict:`` block, figures, the report, the cluster profile and Snakemake's caching) is the
pipeline's, unchanged. The function's signature (checked with :func:`inspect.signature` when
the config is validated, before any job runs)::

    def train(data: dict[str, np.ndarray], audit: EntryPointAudit, seed: int, device: str) -> dict

``data``: the experiment's prepared dataset (``x_train``, ``y_train``, ``x_test``, ``y_test``,
as :func:`dpaudit.data.prepare.load_prepared` returns it); ``audit``: an
:class:`EntryPointAudit`, which carries the experiment's config values (``audit.train``,
``audit.model``, ``audit.target_epsilon``, ``audit.delta``, ``audit.m``) and makes the job's
canaries, exactly one set per call: :meth:`EntryPointAudit.opacus` (attach white-box gradient
canaries to an Opacus ``DPOptimizer``), :meth:`EntryPointAudit.gradient_canaries` (a
hand-written DP-SGD loop) or :meth:`EntryPointAudit.input_canaries` (black-box records to add
to the training data); ``seed``: the run seed (``seeds:``); ``device``: ``cpu`` or ``cuda:N``
(``compute.device`` on this machine or the GPU the scheduler gave the job).

It returns a mapping (:data:`RETURN_KEYS`) with the claim, either ``claimed_epsilon`` (the
user's accountant's epsilon at ``audit.delta``) or ``noise_multiplier``, ``sample_rate`` and
``steps`` (the library's accountant ``train.accountant`` computes it), and optionally
``scores`` (black box: one per canary, higher means IN, e.g. minus the loss),
``test_accuracy``, ``accountant`` (who computed a given epsilon) and ``meta`` (extra JSON
metadata for the score file). The job writes the ``one_run`` score file of the canaries at the
usual path (``results/<experiment>/scores/<setting>/seed<N>.shard0.npz``).

What the function returns adds facts, never the claim, the design or the identity: a ``meta``
key the pipeline owns (:func:`owned_meta`) or a value JSON cannot hold is an error; the claim
settings are numbers of their kind (:func:`dpaudit.attach.claim.check_claim_settings`) and
``steps`` is the count the canaries observed (:data:`OBSERVED_SETTINGS`). Every check runs
before the score file is written. The score file carries the auditor's conformance report
(``measured_mechanism``, ``conformance``; :mod:`dpaudit.attach.conformance`), as
``audit()`` of :mod:`dpaudit.attach` writes it, so the audit and verdict tables show it beside
the bound.

Errors name the config key ``experiments.<name>.train.entry_point``: a function that cannot be
imported or has the wrong signature (:func:`check_entry_points`, from
:func:`dpaudit.config.validate_config`), and at job time one that made no canaries or returned
the wrong thing, raised or called ``sys.exit`` (:func:`run_entry_point`). Snakemake reruns
a job when the entry point's module file changes: its SHA-256 is in the job's params
(:func:`source_hash`).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import json
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from dpaudit.attach.conformance import DEFAULT_ALPHA, SCORE_META_KEYS
from dpaudit.keys import CLAIMED_EPSILON

#: The parameters the entry point is called with, by keyword.
PARAMETERS = ("data", "audit", "seed", "device")
#: The signature, as error messages show it.
SIGNATURE = "fn(data, audit, seed, device) -> dict"
#: Keys of the mapping the entry point returns.
CLAIM_SETTINGS = ("noise_multiplier", "sample_rate", "steps")
RETURN_KEYS = (CLAIMED_EPSILON, *CLAIM_SETTINGS, "scores", "test_accuracy", "accountant", "meta")
#: Designs and shards an entry point can produce.
DESIGN = "one_run"


class EntryPointError(ValueError):
    """An entry point that cannot be imported, called or audited; names the config key."""


def entry_point_key(experiment: str, where: str = "train.entry_point") -> str:
    """The config key an error names: ``experiments.<experiment>.<where>``."""
    return f"experiments.{experiment}.{where}"


def _split(spec: Any, key: str) -> tuple[str, str]:
    if not isinstance(spec, str) or spec.count(":") != 1:
        raise EntryPointError(f"config key {key}: {spec!r} is not 'package.module:function'")
    module, _, name = spec.partition(":")
    if not module or not name:
        raise EntryPointError(f"config key {key}: {spec!r} is not 'package.module:function'")
    return module, name


def load_entry_point(spec: str, key: str = "train.entry_point") -> Callable[..., Any]:
    """Import ``"package.module:function"`` and check its signature; the function, else
    :class:`EntryPointError` naming ``key``."""
    module_name, name = _split(spec, key)
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - any import failure is the user's to see
        raise EntryPointError(
            f"config key {key}: cannot import module {module_name!r} of {spec!r} "
            f"({type(exc).__name__}: {exc}); is it on PYTHONPATH?"
        ) from exc
    fn: Any = module
    for part in name.split("."):
        fn = getattr(fn, part, None)
        if fn is None:
            raise EntryPointError(
                f"config key {key}: module {module_name!r} has no attribute {name!r}"
            )
    if not callable(fn):
        raise EntryPointError(f"config key {key}: {spec!r} is not callable")
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise EntryPointError(f"config key {key}: cannot read the signature of {spec!r}") from exc
    try:
        sig.bind(**dict.fromkeys(PARAMETERS))
    except TypeError as exc:
        raise EntryPointError(
            f"config key {key}: {spec!r} has the signature {name.rsplit('.', 1)[-1]}{sig}; "
            f"an entry point must accept {SIGNATURE} by keyword (other parameters need "
            f"defaults): {exc}"
        ) from None
    return fn


def source_hash(spec: str) -> str:
    """SHA-256 of the file of the entry point's module (so that Snakemake reruns the jobs
    when it changes; ``""`` where the module has no file)."""
    module_name, _ = _split(spec, "train.entry_point")
    try:
        found = importlib.util.find_spec(module_name)  # finds the file, runs no module code
    except (ImportError, ValueError):
        found = None
    path = getattr(found, "origin", None)
    if not path or not Path(path).is_file():
        return ""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _entry_points(exp: str, block: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(config key, spec) of every entry point of a train experiment: its ``train`` block, its
    ``grid`` values and its ``points``."""
    found = []
    own = (block.get("train") or {}).get("entry_point")
    if own is not None:
        found.append((entry_point_key(exp), own))
    for value in (block.get("grid") or {}).get("train.entry_point") or []:
        found.append((entry_point_key(exp, "grid.train.entry_point"), value))
    for i, point in enumerate(block.get("points") or []):
        if point.get("train.entry_point") is not None:
            key = entry_point_key(exp, f"points[{i}].train.entry_point")
            found.append((key, point["train.entry_point"]))
    return found


def check_entry_points(config: Mapping[str, Any]) -> None:
    """Import and check every ``train.entry_point`` of ``config`` (a validated config); an
    experiment with one must be ``design: one_run`` with one shard. Raises
    :class:`EntryPointError` naming the config key (:func:`dpaudit.config.validate_config`
    raises it as its ``ConfigError``)."""
    for exp, block in (config.get("experiments") or {}).items():
        if block.get("kind") != "train":
            continue
        found = _entry_points(exp, block)
        if not found:
            continue
        if block.get("design", DESIGN) != DESIGN:
            raise EntryPointError(
                f"config key experiments.{exp}.design: {block.get('design')!r}; an experiment "
                f"trained by train.entry_point writes one-run score files; allowed: {DESIGN}"
            )
        if block.get("shards", 1) != 1:
            raise EntryPointError(
                f"config key experiments.{exp}.shards: {block.get('shards')}; an experiment "
                "trained by train.entry_point trains one model per (setting, seed); allowed: 1"
            )
        for key, spec in found:
            load_entry_point(spec, key)


class EntryPointAudit:
    """What the entry point receives as ``audit``: the job's config values and the factory of
    its canaries (one set per job; the job scores and audits them).

    ``train``, ``model``, ``canaries``: the experiment's blocks (every key, schema defaults
    filled in); ``target_epsilon``: the setting's target (None: no noise); ``delta`` and
    ``accountant``: ``train.delta`` and ``train.accountant``; ``m``: ``canaries.m``; ``seed``:
    the run seed (the canaries' coins and coordinates derive from it)."""

    def __init__(
        self,
        run_spec: Mapping[str, Any],
        *,
        experiment: str,
        setting: str,
        seed: int,
        key: str,
    ) -> None:
        self.train = dict(run_spec["train"])
        self.model = dict(run_spec.get("model") or {})
        self.canaries = dict(run_spec.get("canaries") or {})
        self.threat_model = run_spec.get("threat_model")
        self.target_epsilon = run_spec.get("target_epsilon")
        self.delta = float(self.train["delta"])
        self.accountant = self.train.get("accountant")
        self.m = int(self.canaries.get("m", 1000))
        self.experiment, self.setting, self.seed, self.key = experiment, setting, seed, key
        self.made: Any = None

    def _keep(self, canaries: Any) -> Any:
        if self.made is not None:
            raise EntryPointError(
                f"config key {self.key}: the entry point made a second set of canaries; one "
                "set per job (call audit.opacus, audit.gradient_canaries or "
                "audit.input_canaries once)"
            )
        self.made = canaries
        return canaries

    def opacus(self, optimizer: Any, **kwargs: Any) -> Any:
        """``m`` white-box gradient canaries attached to an Opacus ``DPOptimizer``
        (:func:`dpaudit.attach.opacus`; ``data_loader=`` or ``sample_rate=``, ``sampling=``,
        ``coordinates=`` as there)."""
        from dpaudit.attach.opacus_adapter import opacus

        return self._keep(opacus(optimizer, self.m, self.seed, **kwargs))

    def gradient_canaries(
        self, n_params: int, sample_rate: float, clip_norm: float, **kwargs: Any
    ) -> Any:
        """``m`` :class:`dpaudit.attach.GradientCanaries` for a hand-written DP-SGD loop
        (``sampling=``, ``coordinates=`` as there)."""
        from dpaudit.attach.core import GradientCanaries

        return self._keep(
            GradientCanaries(self.m, n_params, sample_rate, clip_norm, self.seed, **kwargs)
        )

    def input_canaries(self, kind: str | None = None, **kwargs: Any) -> Any:
        """``m`` black-box :class:`dpaudit.attach.InputCanaries` of ``kind`` (default
        ``canaries.type``); return their ``scores`` from the entry point."""
        from dpaudit.attach.core import InputCanaries

        return self._keep(InputCanaries(self.m, kind or self.canaries["type"], self.seed, **kwargs))


def _check_result(result: Any, key: str) -> dict[str, Any]:
    from dpaudit.attach.claim import check_claim_settings

    if not isinstance(result, Mapping):
        raise EntryPointError(
            f"config key {key}: the entry point returned {type(result).__name__}; it must "
            f"return a dict with the claim (claimed_epsilon, or {', '.join(CLAIM_SETTINGS)})"
        )
    unknown = sorted(set(result) - set(RETURN_KEYS))
    if unknown:
        raise EntryPointError(
            f"config key {key}: the entry point returned unknown key(s) {unknown}; "
            f"allowed: {list(RETURN_KEYS)}"
        )
    given = [k for k in CLAIM_SETTINGS if result.get(k) is not None]
    has_eps = result.get(CLAIMED_EPSILON) is not None
    if has_eps == bool(given) or (given and len(given) != len(CLAIM_SETTINGS)):
        raise EntryPointError(
            f"config key {key}: the entry point must return the claim: claimed_epsilon, or "
            f"all of {list(CLAIM_SETTINGS)} (got {sorted(k for k in result)})"
        )
    try:  # numbers of their kind: no bool, no truncated step count
        check_claim_settings(**{k: result[k] for k in given})
    except ValueError as exc:
        raise EntryPointError(f"config key {key}: the entry point returned {exc}") from None
    acc = result.get("test_accuracy")
    if acc is not None and (
        isinstance(acc, bool)
        or not isinstance(acc, int | float | np.floating)
        or not math.isfinite(acc)
    ):
        raise EntryPointError(
            f"config key {key}: test_accuracy must be a finite number, got {acc!r}"
        )
    accountant = result.get("accountant")
    if accountant is not None and not isinstance(accountant, str):
        raise EntryPointError(
            f"config key {key}: accountant must be a name (a string), got {accountant!r}"
        )
    if result.get("meta") is not None and not isinstance(result["meta"], Mapping):
        raise EntryPointError(f"config key {key}: meta must be a dict")
    return dict(result)


def _call(fn: Callable[..., Any], spec: str, key: str, **kwargs: Any) -> Any:
    """``fn(**kwargs)``; what it raises (and ``sys.exit`` inside it) as an
    :class:`EntryPointError` naming ``key``, the cause chained (its traceback in the job log)."""
    try:
        return fn(**kwargs)
    except EntryPointError:
        raise
    except SystemExit as exc:  # else Snakemake reports a missing output ("latency")
        raise EntryPointError(
            f"config key {key}: {spec!r} called sys.exit({exc.code!r}); an entry point "
            "returns its dict (the claim) and must not exit; no score file was written"
        ) from None
    except Exception as exc:
        raise EntryPointError(
            f"config key {key}: {spec!r} raised {type(exc).__name__}: {exc}"
        ) from exc


#: Claim settings compared with what the canaries observed: the logical steps they counted.
#: Not the sample rate (canaries may be sampled like the records a bug exposes, at a rate of
#: their own) nor an optimizer's noise multiplier (a noise schedule changes it as it trains).
OBSERVED_SETTINGS = ("steps",)


def _check_observed(result: Mapping[str, Any], canaries: Any, key: str) -> None:
    """The DP-SGD settings the entry point returned against those its canaries observed
    (:data:`OBSERVED_SETTINGS`): a mismatch would account a training other than the audited
    one (the canaries saw every step the noise was added at)."""
    from dpaudit.attach.claim import check_claim_settings

    seen = canaries._claim_settings()
    claimed = check_claim_settings(**{k: result.get(k) for k in CLAIM_SETTINGS})
    for name in OBSERVED_SETTINGS:
        if name in claimed and name in seen and claimed[name] != seen[name]:
            raise EntryPointError(
                f"config key {key}: the entry point returned {name} = {claimed[name]!r}, but "
                f"its canaries observed {name} = {seen[name]!r}; return the {name} of the "
                "training the canaries observed (or claimed_epsilon from your own accountant)"
            )


def owned_meta(pipeline_meta: Mapping[str, Any]) -> frozenset[str]:
    """The metadata keys an entry point's ``meta`` may not set: those the pipeline wrote into
    this file (``pipeline_meta``), every required key of a score file, the claim's, the
    storage keys, those that change the file's audit rows, the auditor's conformance facts
    (:data:`dpaudit.attach.conformance.SCORE_META_KEYS`, also where the canaries measure none)
    and the keys of the returned dict itself (:data:`RETURN_KEYS`)."""
    from dpaudit import scores
    from dpaudit.attach.claim import claim_meta_keys
    from dpaudit.audit import DECLARED_META

    return frozenset(pipeline_meta).union(
        scores.REQUIRED_META,
        claim_meta_keys(),
        scores.STORAGE_META,
        DECLARED_META,
        SCORE_META_KEYS,
        RETURN_KEYS,
    )


def _user_meta(meta: Mapping[str, Any] | None, owned: frozenset[str], key: str) -> dict:
    """The entry point's ``meta``: facts added to the score file, each a JSON value under a
    key of its own; a key the pipeline owns (:func:`owned_meta`) or a value JSON cannot hold
    (NaN, infinity, a NumPy array, an object) is an :class:`EntryPointError` naming ``key``
    and the meta key."""
    out: dict[str, Any] = {}
    for name, value in (meta or {}).items():
        if not isinstance(name, str):
            raise EntryPointError(
                f"config key {key}: the entry point's meta key {name!r} is not a string"
            )
        if name in owned:
            raise EntryPointError(
                f"config key {key}: the entry point's meta sets {name!r}, which the pipeline "
                "owns (the claim, the design and the run's identity come from the config and "
                "the canaries); rename the key to add it as a fact of your own"
            )
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise EntryPointError(
                f"config key {key}: the entry point's meta[{name!r}] = {value!r} is not a "
                f"JSON value ({exc}); give finite numbers, strings, bools, None, lists and "
                "dicts of them (convert NumPy values with .tolist() or float())"
            ) from None
        out[name] = value
    return out


def run_entry_point(
    data: dict[str, np.ndarray],
    *,
    experiment: str,
    setting: str,
    seed: int,
    shard: int,
    run_spec: Mapping[str, Any],
    device: str,
) -> Any:
    """Call the run spec's ``train.entry_point`` for one job and return its ``one_run``
    :class:`dpaudit.scores.ScoreFile`; every failure is an :class:`EntryPointError` naming
    ``experiments.<experiment>.train.entry_point``."""
    from dpaudit.scores import ScoreFileError, validate

    key = entry_point_key(experiment)
    spec = run_spec["train"]["entry_point"]
    if shard != 0:
        raise EntryPointError(f"config key {key}: an entry point trains shard 0 only")
    fn = load_entry_point(spec, key)
    audit = EntryPointAudit(run_spec, experiment=experiment, setting=setting, seed=seed, key=key)
    returned = _call(fn, spec, key, data=data, audit=audit, seed=seed, device=device)
    result = _check_result(returned, key)
    if audit.made is None:
        raise EntryPointError(
            f"config key {key}: {spec!r} made no canaries; call audit.opacus, "
            "audit.gradient_canaries or audit.input_canaries"
        )
    if audit.made.threat_model != run_spec["threat_model"]:
        raise EntryPointError(
            f"config key {key}: the entry point's canaries are {audit.made.threat_model!r}, "
            f"but experiments.{experiment}.threat_model is {run_spec['threat_model']!r}"
        )
    _check_observed(result, audit.made, key)
    settings = {k: result.get(k) for k in CLAIM_SETTINGS}
    try:
        sf = audit.made.score_file(
            result.get(CLAIMED_EPSILON),
            delta=audit.delta,
            accountant=result.get("accountant") or audit.accountant,
            scores=result.get("scores"),
            experiment=experiment,
            setting=setting,
            **settings,
        )
    except (ValueError, TypeError) as exc:
        raise EntryPointError(f"config key {key}: {spec!r}: {exc}") from exc
    acc = result.get("test_accuracy")
    # the auditor's conformance report, as EntryPointAudit's audit() writes it: its facts are
    # the pipeline's (owned, never the user's meta), carried into the audit and verdict tables
    given = {k: v for k, v in settings.items() if v is not None}
    conformance = audit.made._conformance(sf, given, DEFAULT_ALPHA)
    ours = {
        **sf.meta,
        **(conformance.score_meta() if conformance is not None else {}),
        "entry_point": spec,
        "shard": shard,
        "target_epsilon": audit.target_epsilon,
        **({"test_accuracy": float(acc)} if acc is not None else {}),
    }
    # the returned meta adds facts; the claim, the design and the identity stay the pipeline's
    sf.meta = {**_user_meta(result.get("meta"), owned_meta(ours), key), **ours}
    try:
        validate(sf)
    except ScoreFileError as exc:
        raise EntryPointError(f"config key {key}: {spec!r}: {exc}") from exc
    return sf


def train_entry_point(
    data: dict[str, np.ndarray],
    *,
    out: Any,
    device: str = "cpu",
    max_physical_batch: int | None = None,
    **job: Any,
) -> Any:
    """The training job of an experiment with ``train.entry_point``, called like
    :func:`dpaudit.training.job.train_job` (the rule ``train`` picks it): :func:`run_entry_point`
    with the job's keywords ``job`` (experiment, setting, seed, shard, run_spec), its score file
    written to ``out`` (atomically). ``max_physical_batch`` is the user's function's business
    (not passed on). An ``out`` that cannot be written raises an ``OSError`` naming it before
    the user's function runs."""
    from dpaudit import scores
    from dpaudit.io import check_writable

    check_writable(out)
    sf = run_entry_point(data, device=device, **job)
    scores.write(out, sf)
    return sf
