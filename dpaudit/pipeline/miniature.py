"""The miniature of a paper-scale config: one job of every kind of training job it runs.

A paper config (``config/paper/*_training.yaml``) trains thousands of models with the papers'
data sets and networks; none of its jobs fits a CPU. Its *miniature* keeps every code path
and shrinks every size: :func:`job_kinds` groups the config's training jobs by what decides
which code they run (data set, model, engine, optimizer, canary type and placement, sampler,
threat model and score, tuning protocol); :func:`miniature_overlay` is a config that, merged
after the paper config (Snakemake's ``--configfile paper.yaml overlay.yaml``), keeps of each
experiment one setting per kind (so every experiment, and with it every table, figure, paper
target and reproduction check, still runs) and makes every job small: a few dozen training
records, a few canaries, two steps (or one epoch), batches of 8 processed in passes of at
most :data:`MINI["train.max_physical_batch"]` examples, so every job makes several passes a
batch. The model stays the paper's (WRN-16-4 stays WRN-16-4). The data come through
``data.mirror`` as small files in the real formats (:mod:`dpaudit.data.fixtures`):
:func:`mirror_datasets` says which. The paper config itself is not touched.

``benchmarks/paper_miniature.py`` runs a miniature end to end (the first step of the GPU
acceptance run, ``benchmarks/gpu_acceptance.sh``);
``tests/workflow/test_paper_miniature.py`` runs it in CI.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Iterator
from typing import Any

from dpaudit.data.catalog import entry
from dpaudit.pipeline.settings import (
    apply_point,
    setting_experiment,
    train_points,
    train_setting_specs,
)

#: What a training job's code path depends on, in the order :func:`describe_kind` prints it.
KIND_FIELDS = (
    "dataset",
    "model",
    "engine",
    "optimizer",
    "design",
    "canary",
    "placement",
    "sampler",
    "threat_model",
    "score",
    "tuning",
)

#: The miniature's value of each dotted key (an upper bound where the paper's value is
#: smaller: ``dataset.n_train: 1`` stays 1). ``train.batch_size`` of a full-batch experiment
#: (batch at least the training set) becomes the miniature's training set, and no batch is
#: larger than it.
MINI: dict[str, int] = {
    "dataset.n_train": 40,
    "dataset.n_test": 24,
    "dataset.canary_pool": 24,
    "canaries.m": 8,
    "canaries.k": 4,
    "train.batch_size": 8,
    "train.max_physical_batch": 3,
    "train.steps": 2,
    "train.epochs": 1,
    "train.eval_examples": 16,
    "train.model_chunk": 4,
    "train.buffer_size": 16,
    "canaries.prefix_batches": 1,
    "selection.trials": 16,
}
#: Models a multi-run or LiDP job trains in the miniature (LiDP: evaluation and held-out
#: trials, :data:`LIDP_TRIALS` each).
MODELS_PER_SHARD = {"one_run": 1, "multi_run": 12, "lidp": 8}
#: The trial count the LiDP estimators read in the miniature (``trials``, ``n_trials``, ``n_ref``).
LIDP_TRIALS = 4


Kind = tuple[tuple[str, Any], ...]


def _model(block: dict[str, Any]) -> str:
    model = block.get("model") or {}
    name = str(model.get("name"))
    if name == "mlp":
        name += "-" + "-".join(str(h) for h in model.get("hidden") or [])
    return name


def setting_kind(block: dict[str, Any], target_epsilon: float | None) -> Kind:
    """The kind of the training job of one setting: ``block`` is the experiment with the
    setting's grid point applied (:func:`dpaudit.pipeline.setting_experiment`) of a validated
    config (defaults filled), ``target_epsilon`` None for a run without noise."""
    c, t = block["canaries"], block["train"]
    placement = "-"
    if c["type"] == "dirac":
        placement = "coordinate" if c.get("dirac_coordinate") is not None else c["dirac_placement"]
    placement += "" if c.get("insert", "coins") == "coins" else f", insert {c['insert']}"
    if c.get("neighbouring", "add_remove") != "add_remove":
        placement += f", {c['neighbouring']}"
    score = "-"
    if block["threat_model"] == "per_step_dot":
        score = f"{c['statistic']}, {c['adversary']}"
        score += ", prefix" if c.get("prefix_batches") else ""
    selection = block.get("selection")
    tuning = f"{selection['setup']}, {selection['statistic']}" if selection else "-"
    values = {
        "dataset": block["dataset"]["name"],
        "model": _model(block),
        "engine": t["engine"],
        "optimizer": t["optimizer"]
        if target_epsilon is not None
        else t["optimizer"] + ", no noise",
        "design": block["design"],
        "canary": c["type"],
        "placement": placement,
        "sampler": t["sampler"],
        "threat_model": block["threat_model"],
        "score": score,
        "tuning": tuning,
    }
    return tuple((f, values[f]) for f in KIND_FIELDS)


def training_settings(config: dict[str, Any]) -> Iterator[tuple[str, str, Kind]]:
    """(experiment, setting, kind) of every training setting of a validated config."""
    for name, block in (config.get("experiments") or {}).items():
        if block.get("kind") != "train" or (block.get("train") or {}).get("entry_point"):
            continue
        for setting, (_, target) in train_setting_specs(block).items():
            yield name, setting, setting_kind(setting_experiment(block, setting), target)


def job_kinds(config: dict[str, Any]) -> dict[Kind, list[tuple[str, str]]]:
    """Every distinct kind of training job of a validated config -> its (experiment, setting)
    pairs, in config order."""
    out: dict[Kind, list[tuple[str, str]]] = {}
    for name, setting, kind in training_settings(config):
        out.setdefault(kind, []).append((name, setting))
    return out


def describe_kind(kind: Kind) -> str:
    """One line: ``cifar10 / wrn / auto / sgd / one_run / dirac (random) / ...``."""
    v = dict(kind)
    return (
        f"{v['dataset']}, {v['model']}, engine {v['engine']}, {v['optimizer']}, {v['design']}, "
        f"{v['canary']} ({v['placement']}), sampler {v['sampler']}, {v['threat_model']} "
        f"({v['score']}), tuning {v['tuning']}"
    )


def kinds_table(config: dict[str, Any], shards: dict[str, int] | None = None) -> str:
    """The kinds of a validated config as a Markdown table: kind, settings, experiments."""
    rows = ["| kind | settings | experiments |", "| --- | --- | --- |"]
    for kind, jobs in job_kinds(config).items():
        exps = ", ".join(dict.fromkeys(e for e, _ in jobs))
        rows.append(f"| {describe_kind(kind)} | {len(jobs)} | {exps} |")
    return "\n".join(rows)


# ----------------------------------------------------------------------------- the overlay


def _nominal_records(block: dict[str, Any], n_train: int | None, m: int | None) -> float:
    """The records a batch is drawn from: the training set (the catalog's when ``n_train`` is
    None) plus the expected inserted canaries (half of a one-run design's m)."""
    if n_train is None:
        data = entry(block["dataset"]["name"])
        n_train = data.splits[0] if data.splits else int(data.rows or 0)
    inserted = (m or 0) / 2 if block.get("design") == "one_run" else 0
    return n_train + inserted


def _mini_value(key: str, value: Any, block: dict[str, Any]) -> Any:
    """The miniature's value of dotted ``key`` whose paper value is ``value`` in ``block``
    (the experiment with its grid point applied)."""
    if key not in MINI or value is None:
        return value
    if key == "train.batch_size":
        n_train, m = block["dataset"].get("n_train"), block["canaries"].get("m")
        mini_n = None if n_train is None else _mini_value("dataset.n_train", n_train, block)
        mini_m = _mini_value("canaries.m", m, block)
        records = int(_nominal_records(block, mini_n or MINI["dataset.n_train"], mini_m))
        if value >= _nominal_records(block, n_train, m):  # full batch stays full batch
            return records
        # never above the miniature's records (a batch larger than them is a preflight error)
        return min(value, MINI[key], records)
    if key == "canaries.m" and block.get("design") == "one_run":
        pool = block["dataset"].get("canary_pool")
        pool = _mini_value("dataset.canary_pool", pool, block) if pool else MINI[key]
        return min(value, MINI[key], pool)
    return min(value, MINI[key])


def _shrink_point(point: dict[str, Any], block: dict[str, Any]) -> dict[str, Any]:
    return {k: _mini_value(k, v, apply_point(block, point)) for k, v in point.items()}


def _kept_points(block: dict[str, Any]) -> tuple[dict[str, list] | None, list | None]:
    """The grid (key -> values) and points of the miniature of a train experiment: of the
    grid, every value of a key along which the kind changes and the first of any other key;
    of the points, the first of each kind."""
    target = float(block["train"]["target_epsilons"][0])
    points = train_points(block)
    kind_of = {n: setting_kind(apply_point(block, p), target) for n, p in points.items()}
    every = set(kind_of.values())
    mini_grid = None
    if block.get("grid"):
        mini_grid = {}
        for key, values in block["grid"].items():
            first = {kind_of[n] for n, p in points.items() if p[key] == values[0]}
            kept = values if first != every else values[:1]
            if key == "canaries.k":  # LiDP: K = 1 (the DP baseline) and K > 1 (Table 1)
                kept = values
            mini_grid[key] = list(dict.fromkeys(_mini_value(key, v, block) for v in kept))
    mini_points = None
    if block.get("points"):
        seen: set[Kind] = set()
        mini_points = []
        for point in block["points"]:
            kind = setting_kind(apply_point(block, point), target)
            if kind not in seen:
                seen.add(kind)
                mini_points.append(_shrink_point(point, block))
    return mini_grid, mini_points


def _target_epsilon(config: dict[str, Any], name: str, block: dict[str, Any]) -> float:
    """The target epsilon the miniature keeps: the one the config's ``where`` clauses about
    this experiment name most often (so its figures and reproduction checks find rows), else
    the largest."""
    counts: Counter[float] = Counter()
    for other, exp in config["experiments"].items():
        if other != name and name not in (exp.get("inputs") or []):
            continue
        clauses = [(exp.get("figure") or {}).get("where") or {}]
        clauses += [c.get("where") or {} for c in exp.get("reproduce") or []]
        clauses.append((exp.get("params") or {}).get("where") or {})
        for where in clauses:
            if "target_epsilon" in where:
                counts[float(where["target_epsilon"])] += 1
    targets = [float(e) for e in block["train"]["target_epsilons"]]
    for eps, _ in counts.most_common():
        if eps in targets:
            return eps
    return max(targets)


def _train_overlay(config: dict[str, Any], name: str, block: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"seeds": [0], "shards": 1}
    for part in ("dataset", "canaries", "train", "selection"):
        sub = block.get(part)
        if not sub:
            continue
        mini = {
            k: _mini_value(f"{part}.{k}", v, block)
            for k, v in sub.items()
            if f"{part}.{k}" in MINI and v is not None and f"{part}.{k}" != "train.epochs"
        }
        if mini:
            out[part] = mini
    train = out.setdefault("train", {})
    train["max_physical_batch"] = MINI["train.max_physical_batch"]
    train["target_epsilons"] = [_target_epsilon(config, name, block)]
    train["models_per_shard"] = MODELS_PER_SHARD[block["design"]]
    if block["train"].get("steps") is None:
        train["epochs"] = MINI["train.epochs"]
    dataset = out.setdefault("dataset", {})
    if block["dataset"].get("n_train") is None:
        dataset["n_train"] = MINI["dataset.n_train"]
    if block["dataset"]["name"] in ("location", "purchase") and block["dataset"].get("n_test"):
        dataset["n_test"] = MINI["dataset.n_test"]
    mini_grid, mini_points = _kept_points(block)
    if mini_grid is not None:
        out["grid"] = mini_grid
    if mini_points is not None:
        out["points"] = mini_points
    tradeoff = block.get("tradeoff")
    if tradeoff:
        runs = MODELS_PER_SHARD[block["design"]]
        out["tradeoff"] = {"runs": [runs // 2, runs]}
    return out


def mirror_datasets(config: dict[str, Any]) -> list[str]:
    """The data sets (catalog names) the training experiments of ``config`` read, in order."""
    names = [
        b["dataset"]["name"]
        for b in (config.get("experiments") or {}).values()
        if b.get("kind") == "train"
    ]
    return list(dict.fromkeys(names))


def miniature_overlay(
    config: dict[str, Any],
    mirror: str,
    checksums: dict[str, dict[str, str]],
    device: str = "cpu",
) -> dict[str, Any]:
    """The overlay that turns validated paper ``config`` into its miniature.

    ``mirror``: the ``data.mirror`` holding small files of every data set of
    :func:`mirror_datasets`; ``checksums``: data set -> its checksum keys (vision: file -> MD5
    under ``dataset.checksums``; tables: ``{"sha256": ...}``), as
    :func:`dpaudit.data.fixtures.make_mirror` returns them. ``device``: ``compute.device``.
    """
    experiments: dict[str, Any] = {}
    for name, block in config["experiments"].items():
        if block["kind"] == "train":
            over = _train_overlay(config, name, block)
            over.setdefault("dataset", {}).update(
                copy.deepcopy(checksums[block["dataset"]["name"]])
            )
            experiments[name] = over
        elif block["kind"] == "analysis":
            params = copy.deepcopy(block.get("params") or {})
            if (params.get("where") or {}).get("n_trials") is not None:
                params["where"]["n_trials"] = LIDP_TRIALS
            if params.get("n_ref") is not None:  # LiDP Table 1: K = 1 against K = 4
                params.update(n_ref=LIDP_TRIALS, lidp_k=MINI["canaries.k"])
            if params:
                experiments[name] = {"params": params}
    estimators = {
        name: {"trials": [LIDP_TRIALS]}
        for name, est in (config.get("estimators") or {}).items()
        if est.get("method") == "lidp" and est.get("trials")
    }
    overlay: dict[str, Any] = {
        "data": {"mirror": mirror},
        "compute": {"device": device},
        "experiments": experiments,
    }
    if estimators:
        overlay["estimators"] = estimators
    return overlay
