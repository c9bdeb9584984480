"""What each job reads from the config (its ``params:``), as plain functions of the validated
config. Every mapping is :func:`canonical` (keys sorted), so that Snakemake
reruns exactly the jobs whose parameters changed, whatever the order of keys in the config.
"""

from __future__ import annotations

from typing import Any

from dpaudit.defaults import SETTING_KEYS
from dpaudit.pipeline.settings import (
    applicable_estimators,
    data_variants,
    setting_columns,
    setting_experiment,
    simulate_settings,
    train_settings,
)
from dpaudit.pipeline.targets import reproduction_checks

Config = dict[str, Any]


def canonical(value: Any) -> Any:
    """``value`` with every mapping's keys sorted, recursively.

    Snakemake decides whether a job's parameters changed by comparing their representation,
    so the order of keys in a config file must not matter.
    """
    if isinstance(value, dict):
        return {k: canonical(value[k]) for k in sorted(value)}
    if isinstance(value, list | tuple):
        return [canonical(v) for v in value]
    return value


def pick_setting(experiment: str, setting: str, settings: dict[str, Any]) -> Any:
    """What defines ``setting`` in ``settings``; an unknown setting is an error naming the
    experiment and the allowed settings."""
    if setting not in settings:
        raise ValueError(
            f"experiment {experiment!r} has no setting {setting!r}; allowed: {sorted(settings)}"
        )
    return settings[setting]


def train_params(config: Config, experiment: str, setting: str) -> dict[str, Any]:
    """The run spec of one training job (:func:`dpaudit.training.job.train_job`): everything
    it reads from the config, so that Snakemake reruns exactly the settings whose parameters
    changed. The ``train`` keys that choose settings are not part of it; a grid point's values
    are (:func:`~dpaudit.pipeline.settings.setting_experiment`)."""
    target = pick_setting(experiment, setting, train_settings(config["experiments"][experiment]))
    exp = setting_experiment(config["experiments"][experiment], setting)
    train = {
        k: v for k, v in exp["train"].items() if k not in SETTING_KEYS and k != "max_physical_batch"
    }
    if train.get("entry_point"):  # Snakemake reruns the jobs when the user's module changes
        from dpaudit.attach.pipeline import source_hash

        train["entry_point_sha256"] = source_hash(train["entry_point"])
    spec = {
        "design": exp["design"],
        "threat_model": exp["threat_model"],
        "model": exp["model"],
        "canaries": exp["canaries"],
        "train": train,
        "target_epsilon": target,
    }
    if exp.get("selection") is not None:  # a tuning audit; other jobs keep their params
        spec["selection"] = exp["selection"]
    return canonical(spec)


def estimator_block(config: Config, name: str) -> dict[str, Any]:
    """The parameters an audit of estimator ``name`` runs with: the block of the validated
    ``config`` (``method`` plus every parameter, schema defaults filled in; not its display
    ``label``), keys sorted. The
    pipeline's audit rule (:func:`audit_estimators`) and ``dpaudit audit`` both take their
    estimators from here."""
    return canonical({k: v for k, v in config["estimators"][name].items() if k != "label"})


def audit_estimators(config: Config, experiment: str) -> list[list[Any]]:
    """The estimator blocks an audit job of ``experiment`` runs, as [name, block] pairs in the
    order of the audit table's rows (:func:`estimator_block` of each block that applies)."""
    names = applicable_estimators(config, experiment)
    return [[name, estimator_block(config, name)] for name in names]


def max_physical_batch(config: Config, experiment: str) -> int | None:
    """Examples per model in one pass of a training job: the experiment's
    ``train.max_physical_batch`` if set, else ``compute.max_physical_batch`` (None: the whole
    batch). A memory setting, not part of the run spec: chunking gives the unchunked DP-SGD
    step up to floating-point round-off (:mod:`dpaudit.training.vectorized`)."""
    own = config["experiments"][experiment].get("train", {}).get("max_physical_batch")
    return own if own is not None else config["compute"].get("max_physical_batch")


def simulate_params(config: Config, experiment: str, setting: str) -> dict[str, Any]:
    """The mechanism and its parameters of one setting of a simulate experiment."""
    exp = config["experiments"][experiment]
    params = pick_setting(experiment, setting, simulate_settings(exp))
    return canonical({"mechanism": exp["mechanism"], "params": params})


def dataset_params(config: Config, experiment: str, variant: str) -> dict[str, Any]:
    """The dataset block of one prepared dataset (``variant``, see
    :func:`~dpaudit.pipeline.settings.data_variant`) of a train experiment."""
    return canonical(
        pick_setting(experiment, variant, data_variants(config["experiments"][experiment]))
    )


def analysis_params(config: Config, experiment: str) -> dict[str, Any]:
    """The analysis and its parameters of an analysis experiment."""
    exp = config["experiments"][experiment]
    return canonical(
        {"analysis": exp["analysis"], "params": exp["params"], "inputs": exp.get("inputs") or []}
    )


def setting_table(config: Config, experiment: str) -> dict[str, Any]:
    """Setting -> its varying values, joined onto the audit table."""
    return canonical(setting_columns(config["experiments"][experiment]))


def estimator_labels(config: Config, experiment: str) -> dict[str, str]:
    """Estimator block -> its display name (``label:`` or the library's), of the blocks that
    run on an experiment (the audit table's ``estimator_label`` column)."""
    from dpaudit.plots.labels import estimator_label

    names = applicable_estimators(config, experiment)
    return canonical({n: estimator_label(config["estimators"][n]) for n in names})


def figure_params(config: Config, experiment: str) -> dict[str, Any]:
    """The figure block of an experiment, with its kind, a title that fits (``figure.title``,
    else :func:`~dpaudit.plots.labels.short_title` of the description), the display name of
    each estimator block it runs (``estimator_labels``), the values the paper prints for its
    points (``marks``: the ``reproduce`` rows with a printed ``paper`` value) and, for an
    analysis of several experiments (``inputs``), each one's display name in
    ``labels.experiment`` (:func:`~dpaudit.plots.labels.experiment_label`; the config's own
    ``figure.labels.experiment`` first)."""
    from dpaudit.plots.labels import estimator_label, experiment_label, short_title

    exp = config["experiments"][experiment]
    block = {k: v for k, v in exp["figure"].items() if k != "caption"}
    title = block.pop("title", None)
    # an analysis gathering experiments names each by its data, model and canaries (the
    # config's figure.labels.experiment first), never by its key
    given = (block.get("labels") or {}).get("experiment") or {}
    derived = {
        name: experiment_label(config["experiments"][name])
        for name in exp.get("inputs") or []
        if name in config["experiments"]
    }
    derived = {k: v for k, v in derived.items() if v}
    if derived:
        block["labels"] = {
            **(block.get("labels") or {}),
            "experiment": {**derived, **given},
        }
    names = applicable_estimators(config, experiment) if exp["kind"] != "analysis" else []
    # a value the paper prints for its own setup (not_comparable) is drawn too, labelled so
    marks = [
        {k: row.get(k) for k in ("paper", "where", "column", "quantity", "source")}
        for row in exp.get("reproduce", [])
        if row.get("paper") is not None
        and row.get("source", "printed") in ("printed", "not_comparable")
    ]
    return canonical(
        {
            "kind": exp["kind"],
            **block,
            "title": short_title(exp.get("description", "")) if title is None else title,
            "estimator_labels": {n: estimator_label(config["estimators"][n]) for n in names},
            "marks": marks,
        }
    )


def figure_caption(config: Config, experiment: str, eps: bool = False) -> str:
    """The report's caption of an experiment's figure (:func:`dpaudit.plots.captions.caption`);
    ``eps``: of its empirical-vs-claimed figure (a train experiment with ``figure.x`` has both)."""
    from dpaudit.plots.captions import caption

    exp = config["experiments"][experiment]
    if eps:
        exp = {**exp, "figure": {k: v for k, v in exp["figure"].items() if k != "x"}}
    return caption(exp, experiment)


def description(config: Config, experiment: str) -> str:
    """An experiment's description ("" if it has none)."""
    return config["experiments"][experiment].get("description", "")


def reproduction_part_params(config: Config, experiment: str, label: str) -> dict[str, Any]:
    """One experiment's table and ``reproduce`` checks, and ``label``, the config file(s) that
    ran it (:func:`config_label`), for its reproduction job."""
    return canonical({**reproduction_checks(config)[experiment], "config": label})


def config_label(configfiles: list[str], workdir: str) -> str:
    """The config file(s) of a run, as the reproduction table names them: each path relative
    to ``workdir`` when it lies inside it, else its file name; the files given with
    ``--configfile`` replace the Snakefile's default where they are given."""
    import os

    names = []
    for path in dict.fromkeys(configfiles):
        rel = os.path.relpath(os.path.abspath(path), os.path.abspath(workdir))
        names.append(os.path.basename(path) if rel.startswith("..") else rel)
    return ", ".join(names)


def verdict_params(config: Config, experiment: str) -> dict[str, Any]:
    """The verdict table's columns (``verdict.by``), estimator block (``verdict.estimator``),
    the display names of ``figure.labels`` and the figure's title (``verdict.title``, else the
    short title of the description)."""
    from dpaudit.plots.labels import short_title

    exp = config["experiments"][experiment]
    block = exp["verdict"]
    title = block.get("title")
    return canonical(
        {
            "by": list(block["by"]),
            "estimator": block.get("estimator"),
            "labels": exp["figure"].get("labels") or {},
            "title": short_title(exp.get("description", "")) if title is None else title,
        }
    )


def tradeoff_params(config: Config, experiment: str) -> dict[str, Any]:
    """The trade-off figure's run counts (``tradeoff.runs``, null: all), confidence, title, and
    a display name per setting (its varying values, through ``figure.labels``)."""
    from dpaudit.pipeline.targets import tradeoff_settings
    from dpaudit.plots.labels import short_title, value_label

    exp = config["experiments"][experiment]
    block = exp["tradeoff"]
    columns = setting_columns(exp)
    overrides = exp["figure"].get("labels") or {}
    settings = tradeoff_settings(config, experiment)
    keys = list(dict.fromkeys(k for s in settings for k in columns.get(s, {})))
    varying = [k for k in keys if len({repr(columns[s].get(k)) for s in settings}) > 1]
    named = varying or [k for k in keys if k != "target_epsilon"]
    # no grid: the sampler and adversary the experiment trains with
    plain = ", ".join(
        value_label(k, v, overrides)
        for k, v in (
            ("sampler", (exp.get("train") or {}).get("sampler")),
            ("adversary", (exp.get("canaries") or {}).get("adversary")),
        )
        if v
    )
    labels = {
        s: ", ".join(t for k in named if (t := value_label(k, columns[s].get(k), overrides)))
        or plain
        or "all runs"
        for s in settings
    }
    title = block.get("title")
    return canonical(
        {
            "runs": block.get("runs"),
            "confidence": block["confidence"],
            "labels": labels,
            "title": short_title(exp.get("description", "")) if title is None else title,
        }
    )
