# Config validation, wildcard constraints and the input and params functions of the rules. The
# logic behind them lives in the library: dpaudit.pipeline.settings (settings),
# dpaudit.pipeline.paths (every path, declared once), dpaudit.pipeline.targets (which files) and
# dpaudit.pipeline.params (which parameters). The rules call those functions through per_job
# (the config and the job's wildcards); only functions with logic of their own are named here.

import os
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError

from dpaudit.config import ConfigError, load_schema, validate_config
from dpaudit.config.duplicate_keys import (
    check_duplicate_config_args,
    check_duplicate_keys,
)
from dpaudit.config.errors import GuardError
from dpaudit.config.guards import SETTING_PATTERN
from dpaudit.pipeline import paths
from dpaudit.pipeline.params import canonical
from dpaudit.pipeline.settings import applicable_estimators
from dpaudit.pipeline import cluster as pipeline_cluster
from dpaudit.pipeline import figure_kinds as pipeline_figure_kinds
from dpaudit.pipeline import params as pipeline_params
from dpaudit.pipeline import preflight as pipeline_preflight
from dpaudit.pipeline import resources as pipeline_resources
from dpaudit.pipeline import targets as pipeline_targets
from dpaudit.pipeline.codehash import ENTRY_POINT_MODULE, code_hash
from dpaudit.report import (
    FULL_REPORT,
    ReportError,
    make_report,
    targeted_report_path,
    use_one_node_per_rule,
)

try:
    # Snakemake's YAML loader keeps the last of two equal keys: re-read every config file it
    # read (the Snakefile's and each --configfile) with one that names both lines
    for path in dict.fromkeys(workflow.configfiles):
        check_duplicate_keys(path)
    # and its --config KEY=VALUE arguments as given (a key set twice, or twice in one value)
    check_duplicate_config_args(workflow.config_settings.config_args)
except GuardError as err:
    raise ValueError(str(err)) from None

try:
    # the package's schema (dpaudit/schema.yaml), the one `dpaudit audit --config` uses. The
    # cross-key checks run in the main process only: a cluster job's own Snakemake process
    # (one per job: profiles/slurm, docs/cluster.md) gets a config checked before submission
    # and would spend several CPU-seconds redoing them
    validate_config(config, load_schema(), cross_checks=workflow.is_main_process)
except ConfigError as err:
    raise ValueError(str(err)) from None


# the report's workflow graph: each rule once (Snakemake draws a rule once per depth of its jobs)
use_one_node_per_rule()

EXPERIMENTS = config["experiments"]
REPORT = FULL_REPORT
# what the jobs ask a cluster scheduler for (compute block; profiles/slurm, docs/cluster.md)
TRAIN_RESOURCES = pipeline_resources.training_resources(config)
JOB_RESOURCES = pipeline_resources.job_resources(config)


def preflight():
    """Before any job (the Snakefile's onstart; a dry run skips it, so the paper configs still
    dry-run as shipped): stop, naming the config key, on what a run can know in advance: a
    placeholder checksum, a pass that cannot fit compute.gpu_mem_mb, a cluster training job
    without a GPU that would outlast its runtime on a CPU (dpaudit.pipeline.preflight); then
    the SLURM checks."""
    try:
        pipeline_preflight.check_config(config)
    except pipeline_preflight.PreflightError as err:
        raise WorkflowError(str(err)) from None
    slurm_preflight()


def slurm_preflight():
    """Before the SLURM executor submits anything (the Snakefile's onstart): stop with the
    cause when the profile's status command cannot read job states or a job's request fits no
    node of its partition, instead of waiting forever (dpaudit.pipeline.cluster)."""
    plugin = workflow.executor_plugin
    if plugin is None or plugin.name in ("local", "dryrun", "touch"):
        return
    # training jobs that would outlast their runtime on a CPU must ask for a GPU
    train_gpus = {
        job.wildcards.experiment: pipeline_cluster.job_request(job).gpus
        for job in workflow.dag.needrun_jobs()
        if job.rule.name == "train"
    }
    problems = pipeline_preflight.gpu_resource_problems(config, train_gpus)
    if problems:
        lines = "\n".join(f"  - {p}" for p in problems)
        raise WorkflowError(f"preflight: this cluster run cannot succeed:\n{lines}")
    if plugin.name != "slurm":
        return
    requests = [
        pipeline_cluster.job_request(job)
        for job in workflow.dag.needrun_jobs()
        if not job.is_local
    ]
    status_command = getattr(workflow.executor_settings, "status_command", None)
    problems = pipeline_cluster.preflight_problems(requests, status_command)
    if problems:
        lines = "\n".join(f"  - {p}" for p in problems)
        raise WorkflowError(
            f"this SLURM cluster cannot run the workflow as configured:\n{lines}"
        )


wildcard_constraints:
    experiment="[A-Za-z][A-Za-z0-9_]*",
    setting=SETTING_PATTERN,
    seed="[0-9]+",
    paper="[a-z0-9_]+",
    figure="[A-Za-z0-9_]+",
    variant=SETTING_PATTERN,


def library_code(script):
    """The ``code`` param of the jobs of scripts/<script>.py, a hash of the dpaudit modules
    (and package data) the script can import, so that a library edit reruns the jobs it can
    affect (dpaudit.pipeline.codehash; Snakemake's params trigger)."""
    return code_hash(Path(workflow.basedir) / "scripts" / f"{script}.py")


def train_code(wildcards):
    """The ``code`` param of a training job: :func:`library_code` of scripts/train.py, without
    the own-training audit's modules unless the job runs a ``train.entry_point``."""
    run = pipeline_params.train_params(config, wildcards.experiment, wildcards.setting)
    exclude = () if run["train"].get("entry_point") else (ENTRY_POINT_MODULE,)
    return code_hash(Path(workflow.basedir) / "scripts" / "train.py", exclude=exclude)


def per_job(function, *names, **kwargs):
    """An input or params function of a rule: ``function(config, *values, **kwargs)`` with the
    values of the job's wildcards ``names`` (the library's functions take the validated
    config, then the wildcards they need)."""
    return lambda wildcards: function(
        config, *(getattr(wildcards, name) for name in names), **kwargs
    )


# the config file(s) of this run as the reproduction table names them: the --configfile ones
# where given (the Snakefile's default is only what they extend), else the default
CONFIG_LABEL = pipeline_params.config_label(
    [str(p) for p in (workflow.overwrite_configfiles or workflow.configfiles)],
    os.getcwd(),
)


def report_targeted_run():
    """After a successful run of other targets than the full one, write their report to its
    own file (never over the full report, which the ``report`` rule writes)."""
    if any(job.rule.name == "report" for job in workflow.dag.jobs):
        return  # the report job ran or was up to date, so results/report.html is current
    targets = pipeline_targets.run_targets(workflow.dag)
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
