# Config validation, helpers and input functions shared by every rule file.

import sys
from pathlib import Path

from dpaudit.config import ConfigError, estimator_block, load_schema, validate_config
from dpaudit.pipeline import (
    applicable_estimators,
    canonical,
    experiment_settings,
    setting_columns,
    simulate_settings,
    train_settings,
)
from dpaudit.report import FULL_REPORT, ReportError, make_report, targeted_report_path

try:
    # the package's schema (dpaudit/schema.yaml), the one `dpaudit audit --config` uses
    validate_config(config, load_schema())
except ConfigError as err:
    raise ValueError(str(err)) from None


EXPERIMENTS = config["experiments"]
REPORT = FULL_REPORT
SCORE_KINDS = ("train", "simulate")


wildcard_constraints:
    experiment="[A-Za-z][A-Za-z0-9_]*",
    setting="[A-Za-z0-9_.]+",
    seed="[0-9]+",
    estimator="[A-Za-z][A-Za-z0-9_]*",
    paper="[a-z0-9_]+",
    figure="[A-Za-z0-9_]+",


def experiments_of(*kinds):
    return [name for name, exp in EXPERIMENTS.items() if exp["kind"] in kinds]


def kind_pattern(*kinds):
    """A wildcard pattern matching exactly the experiments of these kinds (rules that write
    the same paths for different kinds are told apart by it)."""
    names = experiments_of(*kinds)
    return "|".join(names) if names else "(?!)"


def seed_score_files(experiment, setting, seed):
    """The score files of one (setting, seed): one per shard (train; an Opacus-trained
    experiment has one shard), or one (simulate)."""
    exp = EXPERIMENTS[experiment]
    stem = f"results/{experiment}/scores/{setting}/seed{seed}"
    if exp["kind"] == "train":
        return [f"{stem}.shard{shard}.npz" for shard in range(exp["shards"])]
    return [f"{stem}.npz"]


def score_files(experiment):
    """Every score file of an experiment."""
    exp = EXPERIMENTS[experiment]
    return [
        path
        for setting in experiment_settings(exp)
        for seed in exp["seeds"]
        for path in seed_score_files(experiment, setting, seed)
    ]


def audit_scores(wildcards):
    """The score files one audit job reads: every seed (and shard) of one setting."""
    return [path for paths in audit_seed_files(wildcards) for path in paths]


def audit_seed_files(wildcards):
    """The score files of one setting grouped by seed (one list per seed, in config order)."""
    exp = EXPERIMENTS[wildcards.experiment]
    return [
        seed_score_files(wildcards.experiment, wildcards.setting, seed)
        for seed in exp["seeds"]
    ]


def audit_files(wildcards):
    """Per-(estimator, setting) audit tables of an experiment (one row block per seed)."""
    exp = EXPERIMENTS[wildcards.experiment]
    return [
        f"results/{wildcards.experiment}/audit/{name}/{setting}.csv"
        for name in applicable_estimators(config, wildcards.experiment)
        for setting in experiment_settings(exp)
    ]


def _setting(wildcards, settings):
    if wildcards.setting not in settings:
        raise ValueError(
            f"experiment {wildcards.experiment!r} has no setting {wildcards.setting!r}; "
            f"allowed: {sorted(settings)}"
        )
    return settings[wildcards.setting]


def train_params(wildcards):
    """The run spec of a training job (dpaudit.training.job.train_job): all it reads
    from the config, so Snakemake reruns the settings whose parameters changed."""
    exp = EXPERIMENTS[wildcards.experiment]
    target = _setting(wildcards, train_settings(exp))
    train = {
        k: v
        for k, v in exp["train"].items()
        if k not in ("target_epsilons", "nonprivate")
    }
    return canonical(
        {
            "design": exp["design"],
            "threat_model": exp["threat_model"],
            "model": exp["model"],
            "canaries": exp["canaries"],
            "train": train,
            "target_epsilon": target,
        }
    )


def simulate_params(wildcards):
    exp = EXPERIMENTS[wildcards.experiment]
    params = _setting(wildcards, simulate_settings(exp))
    return canonical({"mechanism": exp["mechanism"], "params": params})


def estimator_params(wildcards):
    # the same function gives `dpaudit audit` its estimator blocks
    return estimator_block(config, wildcards.estimator)


def dataset_params(wildcards):
    return canonical(EXPERIMENTS[wildcards.experiment]["dataset"])


def analysis_params(wildcards):
    exp = EXPERIMENTS[wildcards.experiment]
    return canonical({"analysis": exp["analysis"], "params": exp["params"]})


def setting_table(wildcards):
    return canonical(setting_columns(EXPERIMENTS[wildcards.experiment]))


def figure_params(wildcards):
    exp = EXPERIMENTS[wildcards.experiment]
    return canonical(
        {"kind": exp["kind"], "title": exp.get("description", ""), **exp["figure"]}
    )


def main_table(experiment):
    kind = EXPERIMENTS[experiment]["kind"]
    return f"results/{experiment}/{'table' if kind == 'analysis' else 'audit'}.csv"


def figure_stem(experiment):
    if EXPERIMENTS[experiment]["kind"] == "train":
        return f"results/{experiment}/figures/eps_empirical_vs_claimed"
    return f"results/{experiment}/figures/figure"


def experiment_table(wildcards):
    return main_table(wildcards.experiment)


def experiment_description(wildcards):
    return EXPERIMENTS[wildcards.experiment].get("description", "")


PAPER_TARGETS = {
    exp["paper_target"]: name
    for name, exp in EXPERIMENTS.items()
    if exp.get("paper_target")
}


def target_pattern(part):
    """Wildcard pattern for the paper (part 0) or figure (part 1) of published targets."""
    names = sorted({key.split("/")[part] for key in PAPER_TARGETS})
    return "|".join(names) if names else "(?!)"


def paper_target_inputs(wildcards):
    key = f"{wildcards.paper}/{wildcards.figure}"
    if key not in PAPER_TARGETS:
        raise ValueError(
            f"no experiment publishes {key!r}; allowed: {sorted(PAPER_TARGETS)}"
        )
    name = PAPER_TARGETS[key]
    stem = figure_stem(name)
    return {"pdf": f"{stem}.pdf", "png": f"{stem}.png", "table": main_table(name)}


def reproduction_inputs(wildcards):
    return [
        main_table(name) for name, exp in EXPERIMENTS.items() if exp.get("reproduce")
    ]


def reproduction_params(wildcards):
    return canonical(
        {
            name: {"table": main_table(name), "checks": exp["reproduce"]}
            for name, exp in EXPERIMENTS.items()
            if exp.get("reproduce")
        }
    )


def all_targets():
    targets = []
    for name in EXPERIMENTS:
        if EXPERIMENTS[name]["kind"] in SCORE_KINDS:
            targets += score_files(name)
        stem = figure_stem(name)
        targets += [main_table(name), f"{stem}.pdf", f"{stem}.png"]
    for key in PAPER_TARGETS:
        targets += [f"results/{key}.{ext}" for ext in ("pdf", "png", "csv")]
    if any(exp.get("reproduce") for exp in EXPERIMENTS.values()):
        targets += ["results/reproduction.md", "results/reproduction.csv"]
    return targets


def run_targets():
    """The targets of this run (files and rule names; the default target ``all`` if none)."""
    dag = workflow.dag
    targets = sorted(str(f) for f in getattr(dag, "targetfiles", None) or [])
    rules = getattr(dag, "targetrules", None) or []
    targets += sorted(getattr(r, "name", str(r)) for r in rules)  # Rule objects
    return targets or ["all"]


def report_targeted_run():
    """After a successful run of other targets than the full one, write their report to its
    own file (never over the full report, which the ``report`` rule writes)."""
    if any(job.rule.name == "report" for job in workflow.dag.jobs):
        return  # the report job ran or was up to date, so results/report.html is current
    targets = run_targets()
    path = targeted_report_path(targets)
    try:
        make_report(path, targets, workflow.main_snakefile, config)
    except ReportError as err:
        print(f"dpaudit: {err}", file=sys.stderr)
    else:
        print(
            f"dpaudit: report of {targets} written to {path} "
            f"(the full run's report is {REPORT})"
        )
