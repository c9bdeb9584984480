"""The cross-key checks of the estimator blocks and of the estimators an experiment runs.

An estimator block's keys that need another key; an estimator listed by an experiment applies
to its score-file design (:mod:`dpaudit.estimators.registry`); a LiDP estimator's order and
trials fit the canaries and models of the experiments it runs on.
"""

from __future__ import annotations

from typing import Any

from dpaudit import estimators
from dpaudit.config.errors import ConfigError
from dpaudit.pipeline.settings import (
    applicable_estimators,
    experiment_designs,
    models_per_seed,
    simulate_settings,
)


def check_estimator_block(name: str, block: dict[str, Any]) -> None:
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
    ):  # fdp_abstention reads a null q from the score file (estimators.fdp_abstention.audit)
        raise ConfigError(
            f"config key estimators.{name}.q: required by family 'subsampled_gaussian'; "
            "allowed: a sampling rate in (0, 1]"
        )


def check_estimators_apply(config: dict[str, Any], exp: str, block: dict[str, Any]) -> None:
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


def check_lidp_order(config: dict[str, Any], exp: str, block: dict[str, Any]) -> None:
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


def check_lidp_trials(config: dict[str, Any], exp: str, block: dict[str, Any]) -> None:
    """A LiDP estimator's ``trials`` must fit in the trials of one seed of a train experiment
    (``shards`` x ``train.models_per_shard`` models, less the tuning trials of a held-out
    threshold; :func:`dpaudit.estimators.lidp.audit.trial_subsets`)."""
    if block.get("kind") != "train" or "lidp" not in experiment_designs(block):
        return
    models = models_per_seed(block)
    for name in applicable_estimators(config, exp):
        est = config["estimators"][name]
        if est["method"] != "lidp" or not est.get("trials"):
            continue
        available = models
        if est["threshold"] == "heldout":
            from dpaudit.estimators.lidp.bound import heldout_count  # NumPy, SciPy

            available = models - heldout_count(models, est["heldout_fraction"])
        if max(est["trials"]) > available:
            raise ConfigError(
                f"config key estimators.{name}.trials: asks for {max(est['trials'])} evaluation "
                f"trials, but experiment {exp!r} trains {models} models per seed (shards x "
                f"train.models_per_shard), {available} of them for evaluation; allowed: trials "
                f"<= {available}, or more shards"
            )
