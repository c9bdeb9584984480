"""The cross-key checks of a train experiment's block, run on each of its grid points.

What the schema cannot say about one train block: the dataset's keys and sizes
(:mod:`dpaudit.data.catalog`), the engine (Opacus), the tuning audit, the run spec
(:class:`dpaudit.training.spec.RunSpec`: design, threat model, canaries and their pool), the
model against the data and the Dirac canaries, the target epsilons the accountant can reach,
and the shuffling audit's keys. Each failure is a :class:`~dpaudit.config.errors.ConfigError`
naming the key and what is allowed.
"""

from __future__ import annotations

from typing import Any

from dpaudit.config.errors import ConfigError
from dpaudit.data import catalog
from dpaudit.pipeline.settings import setting_name
from dpaudit.training.job import opacus_problem
from dpaudit.training.reachability import reachable_epsilon_problem
from dpaudit.training.spec import (
    RECORD_CANARIES,
    RunSpec,
    SpecError,
    experiment_spec,
    nominal_schedule,
)


def check_train_point(exp: str, block: dict[str, Any]) -> None:
    """Every check of this module on ``block``, the experiment block of one grid point of
    experiment ``exp`` (any experiment: each check skips what does not apply)."""
    _check_trainer(exp, block)
    _check_tuning(exp, block)
    if "dataset" in block:
        _check_dataset(exp, block["dataset"])
    _check_settings(exp, block)
    _check_canary_pool(exp, block)
    _check_model_fits(exp, block)
    _check_target_epsilons(exp, block)
    _check_shuffling(exp, block)


def _run_spec(exp: str, block: dict[str, Any]) -> RunSpec:
    """The run spec of train experiment ``exp`` (:func:`dpaudit.training.spec.experiment_spec`);
    one that does not check out raises :class:`ConfigError` naming the key."""
    try:
        return experiment_spec(exp, block)
    except SpecError as err:
        raise ConfigError(f"config key {err}") from None


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


def _check_canary_pool(exp: str, block: dict[str, Any]) -> None:
    """The run spec must check out (:class:`~dpaudit.training.spec.RunSpec`: the design,
    threat model, canaries and a pool that holds a trial's canaries), and record canaries
    (mislabeled, in_distribution) must fit in the records the dataset holds out
    (``dataset.canary_pool``)."""
    if block.get("kind") != "train":
        return
    spec = _run_spec(exp, block)
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
        spec = _run_spec(exp, block)
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
    spec = _run_spec(exp, block)  # the adversary and statistic go with the design
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
