"""The grid and settings model: how a config's experiments become settings.

A train experiment's ``grid`` / ``points`` make grid points (:func:`train_points`), each times
every target epsilon one setting (:func:`train_settings`, named by :func:`setting_name`); a
simulate experiment's ``params``, ``grid`` and ``points`` make its settings
(:func:`simulate_settings`). The setting names are the ``{setting}`` wildcard of every path
(:mod:`dpaudit.pipeline.paths`), and :func:`setting_columns` the values joined onto the audit
tables. Plain Python on config dicts (nothing heavy is imported), unit-tested, used by the
config check, the target and parameter lists of the rules and the report.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

NONPRIVATE = "nonprivate"


def setting_text(value: Any) -> str:
    """How a grid or target value appears in a setting name (a path component): floats by
    ``:g``, an entry point by its function name, ``-`` as ``m`` and no ``+``."""
    text = f"{value:g}" if isinstance(value, float) else str(value)
    text = text.rpartition(":")[2]  # train.entry_point "package.module:function" -> function
    return text.replace("-", "m").replace("+", "")


#: The blocks of a train experiment whose keys a ``grid`` / ``points`` entry may vary
#: (``canaries.m``, ``dataset.n_train``, ``train.steps``, ...).
GRID_BLOCKS = ("dataset", "model", "canaries", "train", "selection")


#: The order of the varying keys in setting names (those of ``points`` first, then those of
#: ``grid``: :func:`_product`), by the key's last part (``canaries.m`` is ``m``): the keys of the
#: shipped configs, in the order their setting names have always used (``n1024_K32``,
#: ``epsilon2_d1000``, ``m10_batch_size108_dirac_placementrandom``,
#: ``samplerpartial_shuffle_buffer_size200_adversarypartially_informed_prefix_batches1``); other
#: keys follow, sorted by last part and then by the whole key. A setting name, and so every path, is
#: then the same whatever the order of the keys in the config: a reordered YAML file, or a config
#: written back key-sorted, names the same files. Neither the schema's nor a mechanism's parameter
#: order keeps those names (the schema declares ``canaries`` before ``train`` and ``type`` before
#: ``m``).
NAME_ORDER = (
    "epsilon",
    "m",
    "n_train",
    "n",
    "d",
    "K",
    "k",
    "batch_size",
    "steps_per_epoch",
    "target_epsilon",
    "sigma",
    "threat_model",
    "runs_per_hypothesis",
    "steps",
    "sampler",
    "buffer_size",
    "type",
    "dirac_placement",
    "adversary",
    "prefix_batches",
    "setup",
    "statistic",
)
_NAME_RANK = {name: i for i, name in enumerate(NAME_ORDER)}


def canonical_keys(keys: Any) -> list[str]:
    """``keys`` (grid or point keys, dotted or not) in the canonical order of setting names:
    :data:`NAME_ORDER` first, then the others by last part and whole key."""

    def rank(key: str) -> tuple[int, str, str]:
        last = key.rsplit(".", 1)[-1]
        return (_NAME_RANK.get(last, len(NAME_ORDER)), last, key)

    return sorted(keys, key=rank)


def _product(grid: dict[str, list], points: list[dict] | None) -> list[dict[str, Any]]:
    """Every explicit point updated with every point of the cartesian product of ``grid``; its
    keys in the canonical order of setting names: the point's, then the grid's others, each in
    the order of :func:`canonical_keys` (the product runs over the grid keys in that order)."""
    keys = canonical_keys(grid)
    out = []
    for point in points or [{}]:
        order = canonical_keys(point) + [k for k in keys if k not in point]
        for values in itertools.product(*(grid[k] for k in keys)):
            merged = {**point, **dict(zip(keys, values, strict=True))}
            out.append({k: merged[k] for k in order})
    return out


def _point_name(point: dict[str, Any]) -> str:
    """``m10_steps100`` from ``{"canaries.m": 10, "train.steps": 100}`` (last key components)."""
    return "_".join(f"{k.rsplit('.', 1)[-1]}{setting_text(v)}" for k, v in point.items())


def train_points(experiment: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Grid point name -> the dotted keys it sets, of a ``kind: train`` experiment.

    ``grid`` (cartesian product) and ``points`` (values that vary together) set keys of the
    experiment's ``dataset``, ``model``, ``canaries`` and ``train`` blocks; without either there
    is one point, named ``""``, that sets nothing.
    """
    out: dict[str, dict[str, Any]] = {}
    for point in _product(experiment.get("grid") or {}, experiment.get("points")):
        name = _point_name(point)
        if name in out:
            raise ValueError(f"grid points {out[name]} and {point} are both named {name!r}")
        out[name] = point
    return out


def apply_point(experiment: dict[str, Any], point: dict[str, Any]) -> dict[str, Any]:
    """The experiment with the grid point's dotted keys set (the blocks copied, not changed)."""
    out = {k: v for k, v in experiment.items() if k not in ("grid", "points")}
    for key, value in point.items():
        block, _, name = key.partition(".")
        out[block] = {**(out.get(block) or {}), name: value}
    return out


def setting_name(target_epsilon: float | None, point: str = "") -> str:
    """``eps4``, ``eps0.5``, ``eps1e06`` (6 significant digits, no sign characters), ... or
    ``nonprivate`` for a run without noise; prefixed by the grid point's name (``m10_eps4``) in
    an experiment with a grid."""
    if target_epsilon is None or math.isinf(target_epsilon):
        name = NONPRIVATE
    else:
        name = f"eps{setting_text(float(target_epsilon))}"
    return f"{point}_{name}" if point else name


def train_setting_specs(experiment: dict[str, Any]) -> dict[str, tuple[str, float | None]]:
    """Setting name -> (grid point name, target epsilon or None for no noise) of a train
    experiment: every grid point times every target epsilon (and ``nonprivate``)."""
    out: dict[str, tuple[str, float | None]] = {}
    for point_name, point in train_points(experiment).items():
        train = apply_point(experiment, point)["train"]
        targets: list[float | None] = [float(e) for e in train["target_epsilons"]]
        if train.get("nonprivate"):
            targets.append(None)
        for target in targets:
            name = setting_name(target, point_name)
            if name in out:  # the same target twice, or equal to 6 significant digits
                raise ValueError(
                    f"target epsilons {out[name][1]!r} and {target!r} both name setting {name!r}"
                )
            out[name] = (point_name, target)
    return out


def train_settings(experiment: dict[str, Any]) -> dict[str, float | None]:
    """Setting name -> target epsilon (None: no noise) of a ``kind: train`` experiment."""
    return {name: target for name, (_, target) in train_setting_specs(experiment).items()}


def models_per_seed(experiment: dict[str, Any]) -> int:
    """Models a train experiment trains per (setting, seed): ``shards`` jobs of
    ``train.models_per_shard`` models each (the Opacus engine trains one model per job)."""
    train = experiment["train"]
    per_job = 1 if train["engine"] == "opacus" else int(train["models_per_shard"])
    return int(experiment["shards"]) * per_job


def setting_experiment(experiment: dict[str, Any], setting: str) -> dict[str, Any]:
    """The experiment block that trains ``setting``: its grid point applied."""
    point_name, _ = train_setting_specs(experiment)[setting]
    return apply_point(experiment, train_points(experiment)[point_name])


def data_variant(experiment: dict[str, Any], setting: str) -> str:
    """The prepared dataset a train setting reads: ``base``, or the name of the ``dataset.*``
    values of its grid point (``n_train1000``), so that settings differing only in other keys
    share one prepared file."""
    point_name, _ = train_setting_specs(experiment)[setting]
    point = train_points(experiment)[point_name]
    return _point_name({k: v for k, v in point.items() if k.startswith("dataset.")}) or "base"


def data_variants(experiment: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Dataset variant name -> the dataset block it is prepared from."""
    return {
        data_variant(experiment, s): setting_experiment(experiment, s)["dataset"]
        for s in train_setting_specs(experiment)
    }


def simulate_settings(experiment: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Setting name -> mechanism parameters of a ``kind: simulate`` experiment.

    Each setting is the fixed ``params`` updated with one of the explicit ``points`` (a list of
    dicts, for parameters that vary together) and one point of the cartesian product of
    ``grid``; it is named after the varying values in the canonical order
    (:func:`canonical_keys`), like ``n1024_K32`` (also from ``grid: {K: ..., n: ...}``).
    """
    base = dict(experiment.get("params") or {})
    out: dict[str, dict[str, Any]] = {}
    for varying in _product(experiment.get("grid") or {}, experiment.get("points")):
        name = "_".join(f"{k}{setting_text(v)}" for k, v in varying.items()) or "base"
        if name in out:
            first = {k: out[name].get(k) for k in varying}
            raise ValueError(f"points {first} and {varying} both name setting {name!r}")
        out[name] = {**base, **varying}
    return out


def varying_keys(experiment: dict[str, Any]) -> list[str]:
    """The parameter names that vary across the settings of a simulate experiment (or the
    dotted keys of a train experiment's grid)."""
    points = experiment.get("points") or []
    keys = canonical_keys(set().union(*points))
    return keys + [k for k in canonical_keys(experiment.get("grid") or {}) if k not in keys]


def experiment_settings(experiment: dict[str, Any]) -> dict[str, Any]:
    """Setting name -> what defines it, for experiments that write score files."""
    kind = experiment["kind"]
    if kind == "train":
        return train_settings(experiment)
    if kind == "simulate":
        return simulate_settings(experiment)
    return {}


def setting_columns(experiment: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Setting name -> the grid values that vary across settings (joined onto audit tables)."""
    if experiment["kind"] == "simulate":
        keys = varying_keys(experiment)
        return {s: {k: p[k] for k in keys} for s, p in simulate_settings(experiment).items()}
    if experiment["kind"] == "train":
        points = train_points(experiment)
        return {
            s: {
                **{k.rsplit(".", 1)[-1]: v for k, v in points[point].items()},
                "target_epsilon": target,
            }
            for s, (point, target) in train_setting_specs(experiment).items()
        }
    return {}


def experiment_designs(experiment: dict[str, Any]) -> set[str]:
    """The score-file designs an experiment produces."""
    if experiment["kind"] == "simulate":
        from dpaudit.mechanisms.registry import MECHANISM_DESIGNS

        return {MECHANISM_DESIGNS[experiment["mechanism"]]}
    return {experiment.get("design", "one_run")}


def applicable_estimators(config: dict[str, Any], experiment: str) -> list[str]:
    """Names of the estimator blocks to run on ``experiment``: those it lists (default: every
    block whose bounds assume no trade-off family, :func:`dpaudit.estimators.family_free`),
    restricted to the methods that apply to its designs."""
    from dpaudit import estimators

    exp = config["experiments"][experiment]
    blocks = config.get("estimators", {})
    names = exp.get("estimators") or [
        n for n in sorted(blocks) if estimators.family_free(blocks[n])
    ]
    designs = experiment_designs(exp)
    keep = []
    for name in names:
        method = estimators.get(config["estimators"][name]["method"])
        if designs & set(method.designs):
            keep.append(name)
    return keep
