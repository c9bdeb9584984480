"""The files a config asks for, and the files each job reads: plain functions of the validated
config behind the input functions and wildcard constraints of ``rules/*.smk``.

Paths come from :mod:`dpaudit.pipeline.paths`; settings from :mod:`dpaudit.pipeline`.
"""

from __future__ import annotations

from typing import Any

from dpaudit.pipeline import applicable_estimators, data_variant, experiment_settings, paths

Config = dict[str, Any]

#: Experiment kinds whose jobs write score files.
SCORE_KINDS = ("train", "simulate")

#: A regular expression that matches no wildcard value (for a kind the config does not use).
NO_MATCH = "(?!)"


def experiments_of(config: Config, *kinds: str) -> list[str]:
    """The names of the experiments of these kinds, in config order."""
    return [name for name, exp in config["experiments"].items() if exp["kind"] in kinds]


def has_line_figure(experiment: dict[str, Any]) -> bool:
    """Whether an experiment gets the line figure of its table (``figure`` rule): simulate and
    analysis experiments always, train experiments when their ``figure.x`` names a column."""
    if experiment["kind"] != "train":
        return True
    return bool((experiment.get("figure") or {}).get("x"))


def line_figure_pattern(config: Config) -> str:
    """A wildcard pattern matching exactly the experiments that get the line figure."""
    names = [n for n, exp in config["experiments"].items() if has_line_figure(exp)]
    return "|".join(names) or NO_MATCH


def kind_pattern(config: Config, *kinds: str) -> str:
    """A wildcard pattern matching exactly the experiments of these kinds (rules that write
    the same paths for different kinds are told apart by it)."""
    return "|".join(experiments_of(config, *kinds)) or NO_MATCH


def seed_score_files(config: Config, experiment: str, setting: str, seed: int) -> list[str]:
    """The score files of one (setting, seed): one per shard (train; an experiment trained by
    the Opacus engine has one shard), or one (simulate)."""
    exp = config["experiments"][experiment]
    if exp["kind"] == "train":
        return [
            paths.score_file(experiment, setting, seed, shard) for shard in range(exp["shards"])
        ]
    return [paths.score_file(experiment, setting, seed)]


def setting_score_files(config: Config, experiment: str, setting: str) -> list[str]:
    """The score files of one setting, seed by seed in config order (an audit job's input)."""
    seeds = config["experiments"][experiment]["seeds"]
    return [path for seed in seeds for path in seed_score_files(config, experiment, setting, seed)]


def score_files(config: Config, experiment: str) -> list[str]:
    """Every score file of an experiment."""
    settings = experiment_settings(config["experiments"][experiment])
    return [path for s in settings for path in setting_score_files(config, experiment, s)]


def audit_files(config: Config, experiment: str) -> list[str]:
    """The per-(estimator, setting) audit tables of an experiment (one row block per seed)."""
    settings = experiment_settings(config["experiments"][experiment])
    return [
        paths.setting_audit(experiment, name, setting)
        for name in applicable_estimators(config, experiment)
        for setting in settings
    ]


def analysis_inputs(config: Config, experiment: str) -> dict[str, str]:
    """Experiment -> audit table, of the experiments an analysis reads (its ``inputs``)."""
    inputs = config["experiments"][experiment].get("inputs") or []
    return {name: paths.audit_table(name) for name in inputs}


def train_dataset(config: Config, experiment: str, setting: str) -> str:
    """The prepared dataset one training job of ``setting`` reads."""
    return paths.dataset(experiment, data_variant(config["experiments"][experiment], setting))


def main_table(config: Config, experiment: str) -> str:
    """An experiment's table: the audit table, or an analysis's table."""
    if config["experiments"][experiment]["kind"] == "analysis":
        return paths.analysis_table(experiment)
    return paths.audit_table(experiment)


def figure_name(config: Config, experiment: str) -> str:
    """The name of an experiment's (published) figure: the line figure of its table, or, for a
    train experiment without ``figure.x``, claimed vs empirical epsilon."""
    if has_line_figure(config["experiments"][experiment]):
        return paths.FIGURE
    return paths.EPS_FIGURE


def figure_files(config: Config, experiment: str) -> dict[str, str]:
    """An experiment's figure, by extension (``pdf``, ``png``)."""
    name = figure_name(config, experiment)
    return {ext: paths.figure(experiment, name, ext) for ext in ("pdf", "png")}


def roc_figure_files(config: Config, experiment: str) -> list[str]:
    """The ROC figure of an experiment with score files (train, simulate); none otherwise."""
    if config["experiments"][experiment]["kind"] not in SCORE_KINDS:
        return []
    return [paths.figure(experiment, paths.ROC_FIGURE, ext) for ext in ("pdf", "png")]


def paper_targets(config: Config) -> dict[str, str]:
    """``paper/figure`` -> the experiment published under that name."""
    return {
        exp["paper_target"]: name
        for name, exp in config["experiments"].items()
        if exp.get("paper_target")
    }


def target_pattern(config: Config, part: int) -> str:
    """Wildcard pattern for the paper (part 0) or figure (part 1) of published targets."""
    names = sorted({key.split("/")[part] for key in paper_targets(config)})
    return "|".join(names) or NO_MATCH


def paper_target_inputs(config: Config, paper: str, figure: str) -> dict[str, str]:
    """The figure and table that ``paper/figure`` publishes (an unknown name is an error)."""
    key = f"{paper}/{figure}"
    published = paper_targets(config)
    if key not in published:
        raise ValueError(f"no experiment publishes {key!r}; allowed: {sorted(published)}")
    name = published[key]
    return {**figure_files(config, name), "table": main_table(config, name)}


def paper_target_files(key: str) -> list[str]:
    """The files that publish ``paper/figure``: its figure and its table."""
    paper, figure = key.split("/")
    return [paths.paper_target(paper, figure, ext) for ext in ("pdf", "png", "csv")]


def reproduced(config: Config) -> list[str]:
    """The experiments with ``reproduce`` checks, in config order."""
    return [name for name, exp in config["experiments"].items() if exp.get("reproduce")]


def reproduction_inputs(config: Config) -> list[str]:
    """The tables the reproduction checks read."""
    return [main_table(config, name) for name in reproduced(config)]


def reproduction_checks(config: Config) -> dict[str, dict[str, Any]]:
    """Experiment -> its table and its ``reproduce`` checks."""
    experiments = config["experiments"]
    return {
        name: {"table": main_table(config, name), "checks": experiments[name]["reproduce"]}
        for name in reproduced(config)
    }


def all_targets(config: Config) -> list[str]:
    """Every result of the config: score files, tables, figures, paper targets, reproduction."""
    targets = []
    for name, exp in config["experiments"].items():
        if exp["kind"] in SCORE_KINDS:
            targets += score_files(config, name)
        figures = figure_files(config, name)
        targets += [main_table(config, name), figures["pdf"], figures["png"]]
        if exp["kind"] == "train" and figure_name(config, name) != paths.EPS_FIGURE:
            targets += [paths.figure(name, paths.EPS_FIGURE, ext) for ext in ("pdf", "png")]
        targets += roc_figure_files(config, name)
    for key in paper_targets(config):
        targets += paper_target_files(key)
    if reproduced(config):
        targets += [paths.reproduction("md"), paths.reproduction("csv")]
    return targets


def run_targets(dag: Any) -> list[str]:
    """The targets of a Snakemake run (files, then rule names; the default target ``all`` if
    none), from its DAG (``workflow.dag``)."""
    targets = sorted(str(f) for f in getattr(dag, "targetfiles", None) or [])
    rules = getattr(dag, "targetrules", None) or []
    targets += sorted(getattr(r, "name", str(r)) for r in rules)  # Rule objects
    return targets or ["all"]
