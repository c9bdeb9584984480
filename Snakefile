# dpaudit: empirical privacy auditing of DP machine learning.
# Run everything: snakemake --cores all (its last job writes results/report.html)
# Rules live in rules/*.smk; config validation in rules/common.smk, the logic behind the
# rules in dpaudit.pipeline (settings, paths, targets, params); docs/architecture.md maps it.


configfile: "config/config.yaml"


report: "report/workflow.rst"


include: "rules/common.smk"
include: "rules/data.smk"
include: "rules/train.smk"
include: "rules/simulate.smk"
include: "rules/analysis.smk"
include: "rules/audit.smk"
include: "rules/figures.smk"


onstart:
    # a run stops here, naming the cause, if it could never finish (rules/common.smk)
    preflight()


onsuccess:
    report_targeted_run()


rule all:
    default_target: True
    input:
        pipeline_targets.all_targets(config),
        REPORT,


rule all_results:
    """Every result of the config, without the report (the report's own target)."""
    input:
        pipeline_targets.all_targets(config),


rule report:
    """The Snakemake report of every result (snakemake --report all_results): rewritten when it
    is missing, a result changed, or the config changed, even if nothing else has to run.
    """
    input:
        pipeline_targets.all_targets(config),
    output:
        REPORT,
    log:
        paths.log("report"),
    localrule: True
    conda:
        "envs/dpaudit.yaml"
    params:
        targets=["all_results"],
        config=canonical(config),
        code=library_code("report"),
    script:
        "scripts/report.py"
