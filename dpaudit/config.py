"""Validation of the pipeline configuration against the schema shipped in the package.

The schema is ``dpaudit/schema.yaml`` (package data; ``config/schema.yaml`` is a link to it), so
the Snakefile and ``dpaudit audit --config`` check against the same file, editable install or
not. Validation runs in ``rules/common.smk`` before any job: a misspelled key, a wrong type, an
out-of-range value or a cross-key limit that a job would hit (an estimator that does not apply
to the experiment's design, more canaries than the pool holds, a target epsilon the accountant
cannot reach) stops the (dry) run with a message naming the key and what is allowed. Defaults
from the schema are filled in, so every rule sees a complete config.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import jsonschema

from dpaudit import estimators
from dpaudit.data import catalog
from dpaudit.defaults import SETTING_KEYS, DefaultFillingValidator, load_schema
from dpaudit.io import read_yaml
from dpaudit.pipeline.guards import GuardError, check_duplicate_keys, check_guards
from dpaudit.pipeline.settings import (
    applicable_estimators,
    apply_point,
    experiment_designs,
    models_per_seed,
    setting_columns,
    setting_name,
    simulate_settings,
    train_points,
)
from dpaudit.pipeline.targets import tradeoff_settings
from dpaudit.training.job import opacus_problem
from dpaudit.training.reachability import reachable_epsilon_problem
from dpaudit.training.spec import RECORD_CANARIES, RunSpec, Schedule, SpecError

# The cross-key checks that build models, read the mechanism and analysis registries or run a
# user's entry point import torch, SciPy or pandas inside their function: every Snakemake
# process imports this module to fill in the defaults (tests/pipeline/test_workflow_imports.py).


class ConfigError(ValueError):
    """The configuration does not satisfy the schema."""


def load_config_file(path: str | Path) -> dict[str, Any]:
    """A YAML config file as a dict; a syntax error or a non-mapping top level raises
    :class:`ConfigError` naming the file (and the line and column of a syntax error). A file
    that cannot be read raises the ``OSError`` (which names it)."""
    try:
        data = read_yaml(path)
    except ValueError as err:  # read_yaml's message starts with the path
        raise ConfigError(f"config file {err}") from None
    try:
        check_duplicate_keys(path)
    except GuardError as err:
        raise ConfigError(str(err)) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"config file {path}: a config must be a mapping of keys, got {type(data).__name__}"
        )
    return data


def _key(path: Iterable[Any]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<top level>"


def _describe(error: jsonschema.ValidationError) -> str:
    key = _key(error.absolute_path)
    schema = error.schema if isinstance(error.schema, dict) else {}
    kind = error.validator
    if kind == "additionalProperties":
        allowed = sorted(schema.get("properties", {}))
        extra = sorted(set(error.instance) - set(allowed))
        if schema.get("patternProperties"):
            allowed = allowed + [f"/{p}/" for p in schema["patternProperties"]]
        where = key if error.absolute_path else "top level"
        return f"config key {where}: unknown key(s) {extra}; allowed keys: {allowed}"
    if kind == "enum":
        allowed = schema["enum"]
        return f"config key {key}: {error.instance!r} is not allowed; allowed values: {allowed}"
    if kind in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
        bounds = {
            k: schema[k]
            for k in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum")
            if k in schema
        }
        return f"config key {key}: {error.instance!r} is out of range; allowed: {bounds}"
    if kind == "type":
        return f"config key {key}: {error.instance!r} has the wrong type; expected {schema['type']}"
    if kind == "required":
        missing = [p for p in schema.get("required", []) if p not in error.instance]
        name = missing[0] if missing else error.message
        allowed = schema.get("properties", {}).get(name, {}).get("enum")
        hint = f"; allowed values: {allowed}" if allowed else ""
        return f"config key {key}: missing required key {name!r}{hint}"
    desc = schema.get("description")
    return f"config key {key}: {error.message}" + (f" ({desc})" if desc else "")


def _check_experiments_block(config: dict[str, Any], require: bool) -> None:
    """An ``experiments`` block that is empty (null or {}) runs nothing: an error, not a no-op."""
    if "experiments" not in config:
        if require:
            raise ConfigError(
                "config key experiments: missing; define at least one named experiment block"
            )
        return
    block = config["experiments"]
    if block is None or (isinstance(block, dict) and not block):
        raise ConfigError(
            f"config key experiments: is empty ({block!r}); define at least one named "
            "experiment block (kind: train, simulate or analysis)"
        )


def validate_config(
    config: dict[str, Any],
    schema: dict[str, Any] | None = None,
    require_experiments: bool = True,
    cross_checks: bool = True,
) -> dict[str, Any]:
    """Fill defaults into ``config`` in place and check it; raise :class:`ConfigError`
    listing every problem once, each naming its key and what is allowed.

    ``schema`` None uses the package's schema. ``require_experiments`` False accepts a config
    without an ``experiments`` key (``dpaudit audit --config`` needs only estimator blocks).
    ``cross_checks`` False fills the defaults and checks the schema only, skipping the
    cross-key checks (they import torch and build every model, several CPU-seconds): for the
    Snakemake processes a cluster job starts, whose config the main process has checked whole
    before submitting anything. The cross-key checks never change the config.
    """
    if not isinstance(config, dict):
        raise ConfigError(f"config: the top level must be a mapping, got {type(config).__name__}")
    _check_experiments_block(config, require_experiments)
    validator = DefaultFillingValidator(load_schema() if schema is None else schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        messages = list(dict.fromkeys(_describe(e) for e in errors))  # once each, in order
        lines = "\n".join(f"  - {m}" for m in messages)
        raise ConfigError(f"invalid configuration ({len(messages)} problem(s)):\n{lines}")
    if cross_checks:
        try:
            check_guards(config)  # the job count first, before any grid is expanded
        except GuardError as err:
            raise ConfigError(str(err)) from None
        _check_references(config, validator)
        from dpaudit.attach.pipeline import EntryPointError, check_entry_points

        try:
            check_entry_points(config)
        except EntryPointError as err:
            raise ConfigError(str(err)) from None
    return config


def default_estimator_config(methods: Iterable[str]) -> dict[str, Any]:
    """A validated config (no experiments) with one estimator block per method, named after it,
    every parameter at its schema default: what ``dpaudit audit --estimator METHOD`` runs."""
    blocks = {m: {"method": m} for m in methods}
    return validate_config({"estimators": blocks}, require_experiments=False)


def _check_dataset(exp: str, dataset: dict[str, Any]) -> None:
    """The dataset keys apply to the named dataset (:mod:`dpaudit.data.catalog`), a checksum
    the catalog does not pin is given, and the sizes fit the source's splits."""
    name = dataset["name"]
    data = catalog.entry(name)
    allowed = data.keys
    for key, value in dataset.items():
        if key not in ("name", "seed") and value is not None and key not in allowed:
            raise ConfigError(
                f"config key experiments.{exp}.dataset.{key}: does not apply to dataset "
                f"{name!r}; allowed keys for it: {sorted(allowed | {'name', 'seed'})}"
            )
    if data.checksum_required and not dataset.get(data.checksum_key):
        raise ConfigError(
            f"config key experiments.{exp}.dataset.{data.checksum_key}: required for dataset "
            f"{name!r} (no published checksum is pinned); allowed: the archive's 64-hex-digit "
            "SHA-256"
        )
    _check_dataset_sizes(exp, name, dataset)


def _check_dataset_sizes(exp: str, name: str, dataset: dict[str, Any]) -> None:
    """n_train, and n_test plus canary_pool, must fit in the source splits (a class filter
    only shrinks them, so this is necessary, and exact without one)."""
    sizes = catalog.source_split_sizes(name, dataset)
    if sizes is None:
        return
    n_train_src, n_test_src = sizes
    filtered = " before the class filter" if dataset.get("classes") else ""
    n_train = dataset.get("n_train")
    if n_train is not None and n_train > n_train_src:
        raise ConfigError(
            f"config key experiments.{exp}.dataset.n_train: {n_train} training records, but "
            f"{name!r} has {n_train_src}{filtered}; allowed: at most {n_train_src}"
        )
    held_out = (dataset.get("n_test") or 0) + (dataset.get("canary_pool") or 0)
    if held_out > n_test_src:
        raise ConfigError(
            f"config key experiments.{exp}.dataset.n_test: n_test + canary_pool = {held_out} "
            f"records from the test split, but {name!r} has {n_test_src}{filtered}; allowed: "
            f"n_test + canary_pool at most {n_test_src}"
        )


def _check_registered(exp: str, block: dict[str, Any]) -> None:
    """Mechanism and analysis names must be registered (their tables are the allowed values)."""
    if block.get("kind") == "simulate":
        from dpaudit.mechanisms.registry import MECHANISMS as table

        key = "mechanism"
    elif block.get("kind") == "analysis":
        from dpaudit.analyses import ANALYSES as table

        key = "analysis"
    else:
        return
    if block.get(key) not in table:
        raise ConfigError(
            f"config key experiments.{exp}.{key}: {block.get(key)!r} is not allowed; "
            f"allowed values: {sorted(table)}"
        )
    if key == "mechanism":
        _check_mechanism_params(exp, block)
    else:
        _check_analysis_inputs(exp, block)


def _check_analysis_inputs(exp: str, block: dict[str, Any]) -> None:
    """An analysis that reads audit tables needs its ``inputs``; the others take none."""
    from dpaudit.analyses.registry import READS_TABLES

    inputs = block.get("inputs") or []
    if block["analysis"] in READS_TABLES and not inputs:
        raise ConfigError(
            f"config key experiments.{exp}.inputs: analysis {block['analysis']!r} reads the "
            "audit tables of other experiments; allowed: a list of train or simulate experiments"
        )
    if block["analysis"] not in READS_TABLES and inputs:
        raise ConfigError(
            f"config key experiments.{exp}.inputs: analysis {block['analysis']!r} reads no "
            f"tables; allowed: [] (analyses that read tables: {sorted(READS_TABLES)})"
        )


def _check_input_experiments(config: dict[str, Any]) -> None:
    """Every experiment an analysis reads (``inputs``) is a train or simulate experiment."""
    experiments = config.get("experiments", {})
    for exp, block in experiments.items():
        for name in block.get("inputs") or []:
            if experiments.get(name, {}).get("kind") not in ("train", "simulate"):
                allowed = sorted(
                    n for n, b in experiments.items() if b.get("kind") in ("train", "simulate")
                )
                raise ConfigError(
                    f"config key experiments.{exp}.inputs: {name!r} is not a train or simulate "
                    f"experiment of the config; allowed: {allowed}"
                )


def _check_mechanism_params(exp: str, block: dict[str, Any]) -> None:
    """Every key of ``params``, ``grid`` and ``points`` must be a parameter of the mechanism
    (so a misspelt key fails here, not in the middle of a run)."""
    from dpaudit.mechanisms.registry import accepted_params

    allowed = accepted_params(block["mechanism"])
    if allowed is None:
        return
    places = [("params", block.get("params") or {}), ("grid", block.get("grid") or {})]
    places += [(f"points[{i}]", p) for i, p in enumerate(block.get("points") or [])]
    for where, keys in places:
        for k in keys:
            if k not in allowed:
                raise ConfigError(
                    f"config key experiments.{exp}.{where}.{k}: not a parameter of mechanism "
                    f"{block['mechanism']!r}; allowed: {sorted(allowed)}"
                )


def _check_trainer(exp: str, block: dict[str, Any]) -> None:
    """An experiment trained by Opacus (``train.engine: opacus``) uses only what that engine
    supports."""
    if block.get("kind") != "train" or block.get("train", {}).get("engine") != "opacus":
        return
    problem = opacus_problem(block, block["shards"])
    if problem is not None:
        raise ConfigError(f"config key experiments.{exp}.{problem[0]}: {problem[1]}")


def _check_tuning(exp: str, block: dict[str, Any]) -> None:
    """A tuning audit (``selection``: :mod:`dpaudit.training.tuning`) trains noisy settings
    only; what its run spec needs is the run spec's check
    (:data:`dpaudit.training.spec.TUNING_NEEDS`, in :func:`_check_canary_pool`)."""
    if block.get("kind") != "train" or block.get("selection") is None:
        return
    if block["train"]["nonprivate"]:
        raise ConfigError(
            f"config key experiments.{exp}.train.nonprivate: True; a selection (tuning) audit "
            "needs one of [False] (the noise is calibrated to each target epsilon)"
        )


def _check_estimators_apply(config: dict[str, Any], exp: str, block: dict[str, Any]) -> None:
    """Every estimator an experiment lists must apply to its score-file design (else the audit
    would drop it and leave an empty table); an experiment that lists none needs at least one
    estimator block that applies."""
    if block.get("kind") not in ("train", "simulate"):
        return
    designs = experiment_designs(block)
    blocks = config.get("estimators", {})
    fits = sorted(
        n for n, b in blocks.items() if designs & set(estimators.get(b["method"]).designs)
    )
    for name in block.get("estimators") or []:
        method = blocks[name]["method"]
        if not designs & set(estimators.get(method).designs):
            raise ConfigError(
                f"config key experiments.{exp}.estimators: estimator {name!r} (method "
                f"{method!r}, see estimators.{name}) does not apply to the design "
                f"{'/'.join(sorted(designs))!r} of experiment {exp!r}; estimators that apply: "
                f"{fits}"
            )
    if not fits:
        raise ConfigError(
            f"config key experiments.{exp}: no estimator block applies to its design "
            f"{'/'.join(sorted(designs))!r}; define one under 'estimators' with a method among "
            f"{sorted(m for m, f in estimators.METHODS.items() if designs & set(f.designs))}"
        )
    if not block.get("estimators") and not any(estimators.family_free(blocks[n]) for n in fits):
        raise ConfigError(
            f"config key experiments.{exp}.estimators: not given, so the blocks that assume no "
            f"trade-off family run, and none of {fits} does; list the ones to run"
        )


def _check_settings(exp: str, block: dict[str, Any]) -> None:
    """A score-producing experiment needs at least one setting."""
    if block.get("kind") == "train":
        train = block["train"]
        if not train["target_epsilons"] and not train["nonprivate"]:
            raise ConfigError(
                f"config key experiments.{exp}.train.target_epsilons: empty and "
                "train.nonprivate is false, so the experiment has no setting; allowed: at least "
                "one target epsilon, or nonprivate: true"
            )


def run_spec(exp: str, block: dict[str, Any]) -> RunSpec:
    """The run spec of train experiment ``exp`` (its validated block, at any setting); a spec
    that does not check out (:class:`~dpaudit.training.spec.RunSpec`) raises
    :class:`ConfigError` naming the key."""
    try:
        return RunSpec.from_block(block)
    except SpecError as err:
        raise ConfigError(f"config key experiments.{exp}.{err.key}: {err.reason}") from None


def _check_canary_pool(exp: str, block: dict[str, Any]) -> None:
    """The run spec must check out (:class:`~dpaudit.training.spec.RunSpec`: the design,
    threat model, canaries and a pool that holds a trial's canaries), and record canaries
    (mislabeled, in_distribution) must fit in the records the dataset holds out
    (``dataset.canary_pool``)."""
    if block.get("kind") != "train":
        return
    spec = run_spec(exp, block)
    c, design, key = block["canaries"], spec.design, spec.per_trial_key
    pool = spec.layout().pool_size
    if c["type"] in RECORD_CANARIES:
        held_out = (block.get("dataset") or {}).get("canary_pool") or 0
        if held_out < pool:
            raise ConfigError(
                f"config key experiments.{exp}.dataset.canary_pool: {held_out} held-out "
                f"records, but {c['type']} canaries need a pool of {pool} (design {design!r}, "
                f"{key}); allowed: dataset.canary_pool >= {pool}, or a smaller canaries.pool_size"
            )


def _check_model_fits(exp: str, block: dict[str, Any]) -> None:
    """The model must take the data's examples (built and run once on the meta device, no
    memory), and Dirac canaries (distinct coordinates) must fit in its parameter count."""
    if block.get("kind") != "train":
        return
    import torch

    from dpaudit.models import build_for_data

    shape, k = catalog.data_shape(block.get("dataset") or {})
    model = block.get("model") or {}
    try:
        with torch.device("meta"):
            net = build_for_data(model, shape, k)
            net(torch.zeros(2, *shape))
    except (ValueError, RuntimeError, TypeError) as exc:
        raise ConfigError(
            f"config key experiments.{exp}.model: {model.get('name')!r} does not fit the data "
            f"(examples of shape {shape}, {k} classes): {exc}"
        ) from None
    c = block["canaries"]
    first = c.get("dirac_coordinate")
    if first is not None and c["type"] != "dirac":
        raise ConfigError(
            f"config key experiments.{exp}.canaries.dirac_coordinate: set to {first} but "
            f"canaries.type is {c['type']!r}; allowed: null, or canaries.type dirac"
        )
    placement = c["dirac_placement"]
    if placement != "random" and c["type"] != "dirac":
        raise ConfigError(
            f"config key experiments.{exp}.canaries.dirac_placement: set to {placement!r} but "
            f"canaries.type is {c['type']!r}; allowed: random, or canaries.type dirac"
        )
    if placement != "random" and first is not None:
        raise ConfigError(
            f"config key experiments.{exp}.canaries.dirac_placement: {placement!r} places the "
            f"canaries by the data but canaries.dirac_coordinate is {first}; allowed: "
            "dirac_placement random with a dirac_coordinate, or dirac_coordinate null"
        )
    if c["type"] == "dirac":
        n_params = sum(p.numel() for p in net.parameters())
        spec = run_spec(exp, block)
        pool = spec.layout(n_params).pool_size
        if first is not None and first + pool > n_params:
            raise ConfigError(
                f"config key experiments.{exp}.canaries.dirac_coordinate: {first} puts the "
                f"{pool} Dirac canaries on coordinates {first}..{first + pool - 1} but model "
                f"{model.get('name')!r} has {n_params} parameters on this data; allowed: null or "
                f"0..{n_params - pool}"
            )
        if pool > n_params:
            raise ConfigError(
                f"config key experiments.{exp}.{spec.per_trial_key}: {pool} Dirac canaries need "
                f"{pool} distinct coordinates but model {model.get('name')!r} has {n_params} "
                f"parameters on this data; allowed: at most {n_params} (or a larger model)"
            )


def nominal_schedule(block: dict[str, Any]) -> Schedule:
    """The schedule a train experiment's job calibrates its noise with, as far as the config
    knows the dataset's size (:meth:`RunSpec.nominal_schedule
    <dpaudit.training.spec.RunSpec.nominal_schedule>`)."""
    n_train = catalog.known_n_train(block.get("dataset") or {})
    return RunSpec.from_block(block).nominal_schedule(n_train)


def _check_shuffling(exp: str, block: dict[str, Any]) -> None:
    """The shuffling audit's keys go together (Annamalai et al. 2024; dpaudit.training.shard
    and dpaudit.likelihood_ratios): which adversary and statistic go with which design is the
    run spec's check (:class:`~dpaudit.training.spec.RunSpec`); the likelihood-ratio statistic
    scores per-step observations of noisy runs over whole epochs, its prefix lies within an
    epoch; a partial shuffle's buffer is positive and no larger than a model's dataset."""
    if block.get("kind") != "train":
        return
    key = f"config key experiments.{exp}"
    c, t = block["canaries"], block["train"]
    spec = run_spec(exp, block)  # the adversary and statistic go with the design
    lr = c["statistic"] == "likelihood_ratio"
    if lr and t["nonprivate"] and not t.get("noise_multiplier"):
        raise ConfigError(
            f"{key}.train.nonprivate: true, but canaries.statistic likelihood_ratio needs a "
            "noise multiplier > 0 (a noise-free run has no Gaussian likelihood); allowed: false"
        )
    schedule = nominal_schedule(block)
    steps = schedule.steps
    per_epoch = schedule.steps_per_epoch if schedule.sample_rate < 1.0 else None
    if lr and per_epoch is not None:
        if steps % per_epoch:
            raise ConfigError(
                f"{key}.train.steps: {steps} steps are not whole epochs of {per_epoch} steps, "
                "which canaries.statistic likelihood_ratio multiplies over; allowed: a multiple "
                f"of {per_epoch}, or train.epochs"
            )
        if c["prefix_batches"] is not None and c["prefix_batches"] > per_epoch:
            raise ConfigError(
                f"{key}.canaries.prefix_batches: {c['prefix_batches']} is more than the "
                f"{per_epoch} batches of an epoch; allowed: 1..{per_epoch}"
            )
    if t["sampler"] == "partial_shuffle":
        n_train = (block.get("dataset") or {}).get("n_train")
        if t["buffer_size"] is None:
            raise ConfigError(
                f"{key}.train.buffer_size: train.sampler partial_shuffle needs a buffer size "
                "(records shuffled together); allowed: an integer >= 1"
            )
        if n_train is not None and t["buffer_size"] > n_train + spec.layout().per_trial:
            raise ConfigError(
                f"{key}.train.buffer_size: {t['buffer_size']} is larger than a model's dataset "
                f"({n_train} records plus its canaries), which makes partial_shuffle a full "
                "shuffle; allowed: at most the dataset size (or train.sampler shuffle)"
            )
    elif t["buffer_size"] is not None:
        raise ConfigError(
            f"{key}.train.buffer_size: only train.sampler partial_shuffle has a buffer, the "
            f"sampler is {t['sampler']!r}; allowed: null"
        )


def _check_target_epsilons(exp: str, block: dict[str, Any]) -> None:
    """Every target epsilon must be one the accountant can calibrate noise to."""
    if block.get("kind") != "train" or block["train"].get("noise_multiplier") is not None:
        return
    t = block["train"]
    schedule = nominal_schedule(block)
    q, steps = schedule.sample_rate, schedule.steps
    for i, eps in enumerate(t["target_epsilons"]):
        problem = reachable_epsilon_problem(
            float(eps), float(t["delta"]), q, steps, t["accountant"]
        )
        if problem:
            raise ConfigError(
                f"config key experiments.{exp}.train.target_epsilons[{i}]: target epsilon "
                f"{eps!r} (setting {setting_name(float(eps))}) cannot be reached by accountant "
                f"{t['accountant']!r} at delta {t['delta']} (sample rate {q:.4g}, {steps} "
                f"steps): {problem}; allowed: a larger target epsilon or delta"
            )


def _lidp_sizes(block: dict[str, Any]) -> dict[str, int]:
    """Setting (or key) -> the smaller of K and m (inserted and null canaries) of an experiment
    writing lidp score files, where the config fixes them."""
    if block.get("kind") == "train":
        return {"canaries.k": int(block["canaries"]["k"])}
    out = {}
    for setting, params in simulate_settings(block).items():
        k = params.get("K")
        m = params.get("m") if params.get("m") is not None else k
        if isinstance(k, int) and isinstance(m, int):
            out[f"setting {setting}"] = min(k, m)
    return out


def _check_lidp_order(config: dict[str, Any], exp: str, block: dict[str, Any]) -> None:
    """A LiDP estimator of order o with ``below_order: error`` fails on a file with fewer than
    o inserted or null canaries: reject the pair here."""
    if block.get("kind") not in ("train", "simulate") or "lidp" not in experiment_designs(block):
        return
    sizes = _lidp_sizes(block)
    for name in applicable_estimators(config, exp):
        est = config["estimators"][name]
        if est["method"] != "lidp" or est["below_order"] != "error":
            continue
        for where, size in sizes.items():
            if size < int(est["order"]):
                raise ConfigError(
                    f"config key experiments.{exp}.estimators: estimator {name!r} has order "
                    f"{est['order']} but {where} has only {size} inserted/null canaries; "
                    f"allowed: order <= {size}, or estimators.{name}.below_order: skip"
                )


def _check_lidp_trials(config: dict[str, Any], exp: str, block: dict[str, Any]) -> None:
    """A LiDP estimator's ``trials`` must fit in the trials of one seed of a train experiment
    (``shards`` x ``train.models_per_shard`` models, less the tuning trials of a held-out
    threshold; :func:`dpaudit.estimators.lidp_audit.trial_subsets`)."""
    if block.get("kind") != "train" or "lidp" not in experiment_designs(block):
        return
    models = models_per_seed(block)
    for name in applicable_estimators(config, exp):
        est = config["estimators"][name]
        if est["method"] != "lidp" or not est.get("trials"):
            continue
        available = models
        if est["threshold"] == "heldout":
            from dpaudit.estimators.lidp import heldout_count  # NumPy, SciPy

            available = models - heldout_count(models, est["heldout_fraction"])
        if max(est["trials"]) > available:
            raise ConfigError(
                f"config key estimators.{name}.trials: asks for {max(est['trials'])} evaluation "
                f"trials, but experiment {exp!r} trains {models} models per seed (shards x "
                f"train.models_per_shard), {available} of them for evaluation; allowed: trials "
                f"<= {available}, or more shards"
            )


def _check_paper_targets(config: dict[str, Any]) -> None:
    """Two experiments (or two products of one: its figure, verdict and trade-off figure) must
    not publish the same paper target (one would overwrite the other)."""
    seen: dict[str, str] = {}
    for exp, block in config.get("experiments", {}).items():
        keys = {"paper_target": block.get("paper_target")}
        for product in ("verdict", "tradeoff"):
            keys[f"{product}.target"] = (block.get(product) or {}).get("target")
        for key, target in keys.items():
            if target and target in seen:
                raise ConfigError(
                    f"config key experiments.{exp}.{key}: {target!r} is already published by "
                    f"{seen[target]}; allowed: a target nothing else publishes"
                )
            if target:
                seen[target] = f"experiments.{exp}.{key}"


def _check_verdict_tradeoff(config: dict[str, Any], exp: str, block: dict[str, Any]) -> None:
    """A verdict groups by columns the audit table has and reads an estimator the experiment
    runs; a trade-off figure selects at least one setting of a multi_run experiment and asks
    for no more runs than a setting has (each fails only inside a job otherwise)."""
    from dpaudit.tables import VERDICT_ID_COLUMNS  # pandas

    verdict, tradeoff = block.get("verdict"), block.get("tradeoff")
    if (verdict or tradeoff) and block.get("kind") != "train":
        raise ConfigError(
            f"config key experiments.{exp}.{'verdict' if verdict else 'tradeoff'}: only train "
            "experiments have it; allowed: null"
        )
    if verdict:
        columns = sorted(
            {k for values in setting_columns(block).values() for k in values}
            | set(VERDICT_ID_COLUMNS)
        )
        bad = [c for c in verdict["by"] if c not in columns]
        if bad:
            raise ConfigError(
                f"config key experiments.{exp}.verdict.by: no audit-table column {bad}; "
                f"allowed: {columns}"
            )
        names = applicable_estimators(config, exp)
        if verdict.get("estimator") is not None and verdict["estimator"] not in names:
            raise ConfigError(
                f"config key experiments.{exp}.verdict.estimator: {verdict['estimator']!r} does "
                f"not run on this experiment; allowed: {names} or null"
            )
    if tradeoff:
        if block.get("design") != "multi_run":
            raise ConfigError(
                f"config key experiments.{exp}.tradeoff: needs design multi_run (one target "
                f"per run), got {block.get('design')!r}; allowed: null"
            )
        if block.get("selection"):
            raise ConfigError(
                f"config key experiments.{exp}.tradeoff: a tuning audit's trials are not "
                "DP-SGD runs of the claimed epsilon; allowed: null"
            )
        if not tradeoff_settings(config, exp):
            columns = setting_columns(block)
            raise ConfigError(
                f"config key experiments.{exp}.tradeoff.where: {tradeoff.get('where')!r} "
                f"selects no setting; allowed: values of the setting columns {columns}"
            )
        runs = tradeoff.get("runs") or []
        available = len(block["seeds"]) * models_per_seed(block)
        if runs and available and max(runs) > available:
            raise ConfigError(
                f"config key experiments.{exp}.tradeoff.runs: asks for {max(runs)} runs, but a "
                f"setting trains {available} (seeds x shards x train.models_per_shard); "
                f"allowed: runs <= {available}"
            )


def _check_estimator_block(name: str, block: dict[str, Any]) -> None:
    """Estimator keys that need another key (each fails only inside an audit job otherwise)."""
    method, selections = block["method"], block.get("selections") or []
    if method == "one_run" and "fixed" in selections:
        if not block.get("fixed") and block.get("fixed_fraction") is None:
            raise ConfigError(
                f"config key estimators.{name}.fixed: required by selection 'fixed' in "
                f"estimators.{name}.selections; allowed: [k_plus, k_minus], or "
                "fixed_fraction in (0, 1]"
            )
    if method == "one_run" and block.get("fixed") and block.get("fixed_fraction") is not None:
        raise ConfigError(
            f"config key estimators.{name}.fixed_fraction: set fixed or fixed_fraction, not both"
        )
    if method not in ("fdp_one_run", "fdp_abstention"):
        return
    if "fixed" in selections and block.get("r") is None and block.get("r_fraction") is None:
        raise ConfigError(
            f"config key estimators.{name}.r: selection 'fixed' in estimators.{name}.selections "
            "needs r or r_fraction; allowed: an integer r >= 1, or r_fraction in (0, 1]"
        )
    if (
        method == "fdp_one_run"
        and block.get("family") == "subsampled_gaussian"
        and block.get("q") is None
    ):  # fdp_abstention reads a null q from the score file (estimators.fdp_abstention_audit)
        raise ConfigError(
            f"config key estimators.{name}.q: required by family 'subsampled_gaussian'; "
            "allowed: a sampling rate in (0, 1]"
        )


def _check_references(config: dict[str, Any], validator: Any = None) -> None:
    """Cross-key checks the schema cannot express."""
    names = sorted(config.get("estimators", {}))
    for name in names:
        _check_estimator_block(name, config["estimators"][name])
    for exp, block in config.get("experiments", {}).items():
        _check_registered(exp, block)
        for name in block.get("estimators", []) or []:
            if name not in names:
                raise ConfigError(
                    f"config key experiments.{exp}.estimators: unknown estimator {name!r}; "
                    f"allowed: names defined under 'estimators': {names}"
                )
        _check_estimators_apply(config, exp, block)
        for point, effective in _grid_points(config, exp, block, validator):
            try:
                _check_trainer(exp, effective)
                _check_tuning(exp, effective)
                if "dataset" in effective:
                    _check_dataset(exp, effective["dataset"])
                _check_settings(exp, effective)
                _check_canary_pool(exp, effective)
                _check_model_fits(exp, effective)
                _check_target_epsilons(exp, effective)
                _check_shuffling(exp, effective)
            except ConfigError as err:
                if not point:
                    raise
                raise ConfigError(f"{err} (at grid point {point!r} of experiments.{exp})") from None
        _check_lidp_order(config, exp, block)
        _check_lidp_trials(config, exp, block)
        _check_verdict_tradeoff(config, exp, block)
    _check_input_experiments(config)
    _check_paper_targets(config)


def _grid_points(
    config: dict[str, Any], exp: str, block: dict[str, Any], validator: Any
) -> list[tuple[str, dict[str, Any]]]:
    """(grid point name, the experiment block with its values set) of each point of a train
    experiment's ``grid`` / ``points`` (one unnamed point without them); each point's block is
    checked against the schema like the experiment's own keys."""
    from dpaudit.audit import RESERVED_COLUMNS  # pandas

    if block.get("kind") != "train":
        return [("", block)]
    varied = list(block.get("grid") or {})
    for point in block.get("points") or []:
        varied += [k for k in point if k not in varied]
    for key in varied:
        if key.partition(".")[2] in SETTING_KEYS and key.startswith("train."):
            raise ConfigError(
                f"config key experiments.{exp}.grid.{key}: the target epsilons are the settings "
                "of every grid point already; allowed: keys of dataset, model, canaries, train "
                f"other than {['train.' + k for k in SETTING_KEYS]}"
            )
    columns = [k.rsplit(".", 1)[-1] for k in varied]
    for key, column in zip(varied, columns, strict=True):
        if columns.count(column) > 1 or column in RESERVED_COLUMNS:
            taken = "another grid key" if columns.count(column) > 1 else "the table"
            raise ConfigError(
                f"config key experiments.{exp}.grid.{key}: its audit-table column {column!r} "
                f"(the key's last part) is taken by {taken}; "
                f"allowed: grid keys with distinct last parts, none of {sorted(RESERVED_COLUMNS)}"
            )
    try:
        points = train_points(block)
    except ValueError as err:
        raise ConfigError(f"config key experiments.{exp}.grid: {err}") from None
    out = []
    for name, point in points.items():
        effective = apply_point(block, point)
        if point and validator is not None:
            errors = list(validator.iter_errors({"experiments": {exp: effective}}))
            errors = [e for e in errors if list(e.absolute_path)[:1] == ["experiments"]]
            if errors:
                raise ConfigError(
                    f"{_describe(errors[0])} (the value set by grid point {name!r} of "
                    f"experiments.{exp})"
                )
        out.append((name, effective))
    return out
