"""The files a config asks for, and the files each job reads: plain functions of the validated
config behind the input functions and wildcard constraints of ``rules/*.smk``.

Paths come from :mod:`dpaudit.pipeline.paths`; settings from :mod:`dpaudit.pipeline.settings`.
"""

from __future__ import annotations

from typing import Any

from dpaudit.pipeline import figure_kinds, paths
from dpaudit.pipeline.settings import data_variant, experiment_settings, setting_columns

Config = dict[str, Any]

#: Experiment kinds whose jobs write score files.
SCORE_KINDS = ("train", "simulate")

#: A regular expression that matches no wildcard value (for a kind the config does not use).
NO_MATCH = "(?!)"

#: What a paper target publishes: an experiment's figure and main table (``paper_target``), its
#: verdict figure and table (``verdict.target``) or its trade-off figure and table
#: (``tradeoff.target``).
PRODUCTS = ("figure", "verdict", "tradeoff")


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
    """The per-setting audit tables of an experiment (a row block per estimator and seed)."""
    settings = experiment_settings(config["experiments"][experiment])
    return [paths.setting_audit(experiment, setting) for setting in settings]


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


def figure_kind_files(config: Config, experiment: str) -> list[str]:
    """The figures of the figure kinds an experiment gets (:mod:`dpaudit.pipeline.figure_kinds`;
    the ROC curves of an experiment with score files), pdf then png of each."""
    return [
        paths.figure(experiment, kind, ext)
        for kind in figure_kinds.kinds_of(config, experiment)
        for ext in ("pdf", "png")
    ]


def figure_kind_experiments(config: Config) -> str:
    """A wildcard pattern matching exactly the experiments that get a figure kind."""
    names = [n for n in config["experiments"] if figure_kinds.kinds_of(config, n)]
    return "|".join(names) or NO_MATCH


def figure_kind_inputs(config: Config, kind: str, experiment: str) -> dict[str, Any]:
    """What the job drawing figure kind ``kind`` of ``experiment`` reads: its score files
    (``scores``) or its audit table (``table``). An experiment that does not get ``kind`` is an
    error naming both."""
    if kind not in figure_kinds.kinds_of(config, experiment):
        exp_kind = config["experiments"][experiment]["kind"]
        raise ValueError(
            f"experiments.{experiment}: a {exp_kind} experiment has no figure {kind!r} "
            f"(figure kinds of its kind: {figure_kinds.kinds_of(config, experiment)})"
        )
    if figure_kinds.figure_kind(kind).reads == figure_kinds.SCORES:
        return {"scores": score_files(config, experiment)}
    return {"table": paths.audit_table(experiment)}


def experiments_with(config: Config, block: str) -> list[str]:
    """The train experiments that set ``block`` (``verdict`` or ``tradeoff``), in config order."""
    return [
        name
        for name, exp in config["experiments"].items()
        if exp["kind"] == "train" and exp.get(block)
    ]


def entry_point_experiments(config: Config) -> list[str]:
    """The train experiments trained by ``train.entry_point`` (in the train block, a grid or
    points), in config order: their score files carry the auditor's conformance report."""
    out = []
    for name, exp in config["experiments"].items():
        if exp["kind"] != "train":
            continue
        points = exp.get("points") or []
        if (
            (exp.get("train") or {}).get("entry_point")
            or (exp.get("grid") or {}).get("train.entry_point")
            or any(p.get("train.entry_point") for p in points)
        ):
            out.append(name)
    return out


def entry_point_pattern(config: Config) -> str:
    """A wildcard pattern matching exactly the experiments of :func:`entry_point_experiments`."""
    return "|".join(entry_point_experiments(config)) or NO_MATCH


def block_pattern(config: Config, block: str) -> str:
    """A wildcard pattern matching exactly the experiments of :func:`experiments_with`."""
    return "|".join(experiments_with(config, block)) or NO_MATCH


def matches(values: dict[str, Any], where: dict[str, Any]) -> bool:
    """Whether a setting's ``values`` have every ``where`` value (a value or a list of them)."""
    for key, want in where.items():
        allowed = want if isinstance(want, list) else [want]
        if key not in values or values[key] not in allowed:
            return False
    return True


def tradeoff_settings(config: Config, experiment: str) -> list[str]:
    """The settings of an experiment's trade-off figure: those whose setting columns (grid
    values and target_epsilon) match ``tradeoff.where``, in setting order."""
    exp = config["experiments"][experiment]
    where = (exp.get("tradeoff") or {}).get("where") or {}
    columns = setting_columns(exp)
    return [s for s in experiment_settings(exp) if matches(columns.get(s, {}), where)]


def tradeoff_score_files(config: Config, experiment: str) -> list[str]:
    """The score files the trade-off figure reads."""
    return [
        path
        for s in tradeoff_settings(config, experiment)
        for path in setting_score_files(config, experiment, s)
    ]


def product_files(experiment: str, product: str) -> dict[str, str]:
    """The figure (pdf, png) and table of a verdict or trade-off product of an experiment."""
    name, table = {
        "verdict": (paths.VERDICT_FIGURE, paths.verdict_table(experiment)),
        "tradeoff": (paths.TRADEOFF_FIGURE, paths.tradeoff_table(experiment)),
    }[product]
    return {
        "pdf": paths.figure(experiment, name, "pdf"),
        "png": paths.figure(experiment, name, "png"),
        "table": table,
    }


def published(config: Config) -> dict[str, tuple[str, str]]:
    """``paper/figure`` -> (experiment, product) of every paper target (:data:`PRODUCTS`)."""
    out: dict[str, tuple[str, str]] = {}
    for name, exp in config["experiments"].items():
        if exp.get("paper_target"):
            out[exp["paper_target"]] = (name, "figure")
        for product in PRODUCTS[1:]:
            target = (exp.get(product) or {}).get("target")
            if target:
                out[target] = (name, product)
    return out


def paper_targets(config: Config) -> dict[str, str]:
    """``paper/figure`` -> the experiment published under that name."""
    return {key: name for key, (name, _) in published(config).items()}


def target_pattern(config: Config, part: int) -> str:
    """Wildcard pattern for the paper (part 0) or figure (part 1) of published targets."""
    names = sorted({key.split("/")[part] for key in paper_targets(config)})
    return "|".join(names) or NO_MATCH


def paper_target_inputs(config: Config, paper: str, figure: str) -> dict[str, str]:
    """The figure and table that ``paper/figure`` publishes (an unknown name is an error)."""
    key = f"{paper}/{figure}"
    targets = published(config)
    if key not in targets:
        raise ValueError(f"no experiment publishes {key!r}; allowed: {sorted(targets)}")
    name, product = targets[key]
    if product != "figure":
        return product_files(name, product)
    return {**figure_files(config, name), "table": main_table(config, name)}


def paper_target_files(key: str) -> list[str]:
    """The files that publish ``paper/figure``: its figure and its table."""
    paper, figure = key.split("/")
    return [paths.paper_target(paper, figure, ext) for ext in ("pdf", "png", "csv")]


def reproduced(config: Config) -> list[str]:
    """The experiments with ``reproduce`` checks, in config order."""
    return [name for name, exp in config["experiments"].items() if exp.get("reproduce")]


def reproduction_inputs(config: Config) -> list[str]:
    """The per-experiment reproduction checks of the config (:func:`paths.reproduction_part`)
    that the merged reproduction table reads (with those of other configs found on disk)."""
    return [paths.reproduction_part(name) for name in reproduced(config)]


def reproduced_pattern(config: Config) -> str:
    """A wildcard pattern matching exactly the experiments of :func:`reproduced`."""
    return "|".join(reproduced(config)) or NO_MATCH


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
        targets += figure_kind_files(config, name)
        for product in PRODUCTS[1:]:
            if exp["kind"] == "train" and exp.get(product):
                targets += list(product_files(name, product).values())
    targets += [paths.conformance_table(name) for name in entry_point_experiments(config)]
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
