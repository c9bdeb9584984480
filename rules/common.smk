# Config validation, helpers and input functions shared by every rule file.

import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from dpaudit.config import ConfigError, load_schema, validate_config
from dpaudit.pipeline import applicable_estimators, canonical, train_settings

try:
    validate_config(
        config, load_schema(Path(workflow.basedir) / "config" / "schema.yaml")
    )
except ConfigError as err:
    raise ValueError(str(err)) from None


EXPERIMENTS = config["experiments"]
REPORT = "results/report.html"


wildcard_constraints:
    experiment="[A-Za-z][A-Za-z0-9_]*",
    setting="[A-Za-z0-9_.]+",
    seed="[0-9]+",
    estimator="[A-Za-z][A-Za-z0-9_]*",


def experiment_config(wildcards):
    return EXPERIMENTS[wildcards.experiment]


def score_files(experiment):
    """Every score file of an experiment: one per (setting, seed)."""
    exp = EXPERIMENTS[experiment]
    return [
        f"results/{experiment}/scores/{setting}/seed{seed}.npz"
        for setting in train_settings(exp)
        for seed in exp["seeds"]
    ]


def audit_files(wildcards):
    """Per-(estimator, score file) audit tables of an experiment."""
    exp = EXPERIMENTS[wildcards.experiment]
    return [
        f"results/{wildcards.experiment}/audit/{name}/{setting}/seed{seed}.csv"
        for name in applicable_estimators(config, wildcards.experiment)
        for setting in train_settings(exp)
        for seed in exp["seeds"]
    ]


def train_params(wildcards):
    """Everything a training job reads from the config, so that Snakemake reruns exactly the
    settings whose parameters changed."""
    exp = EXPERIMENTS[wildcards.experiment]
    settings = train_settings(exp)
    if wildcards.setting not in settings:
        raise ValueError(
            f"experiment {wildcards.experiment!r} has no setting {wildcards.setting!r}; "
            f"allowed: {sorted(settings)}"
        )
    train = {
        k: v
        for k, v in exp["train"].items()
        if k not in ("target_epsilons", "nonprivate")
    }
    return canonical(
        {
            "model": exp["model"],
            "canaries": exp["canaries"],
            "train": train,
            "target_epsilon": settings[wildcards.setting],
        }
    )


def estimator_params(wildcards):
    return canonical(config["estimators"][wildcards.estimator])


def dataset_params(wildcards):
    return canonical(EXPERIMENTS[wildcards.experiment]["dataset"])


def all_targets():
    targets = []
    for name in EXPERIMENTS:
        targets += score_files(name)
        targets += [
            f"results/{name}/audit.csv",
            f"results/{name}/figures/eps_empirical_vs_claimed.pdf",
            f"results/{name}/figures/eps_empirical_vs_claimed.png",
        ]
    return targets


def experiment_description(wildcards):
    return EXPERIMENTS[wildcards.experiment].get("description", "")


def write_report(path):
    """After a successful run, write the Snakemake HTML report (the figures and tables marked
    with report()) for exactly this run's config."""
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as fh:
        yaml.safe_dump(config, fh)
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "--snakefile",
        workflow.main_snakefile,
        "--configfile",
        fh.name,
        "--report",
        path,
        "--nolock",
        "--quiet",
        "all",
    ]
    done = subprocess.run(cmd, capture_output=True, text=True)
    Path(fh.name).unlink()
    if done.returncode != 0:
        print(f"dpaudit: writing the report failed:\n{done.stderr}", file=sys.stderr)
    else:
        print(f"dpaudit: report written to {path}")
