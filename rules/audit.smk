# Every estimator on every score file it applies to, then one tidy table per experiment. One
# audit job runs every estimator of the experiment on every seed of one setting: each score
# file is read once, however many estimators read it, and paper-scale grids (25 seeds x
# hundreds of settings, several estimators) stay at one audit job per setting.


rule audit:
    input:
        scores=per_job(pipeline_targets.setting_score_files, "experiment", "setting"),
    output:
        table=paths.setting_audit(),
    log:
        paths.log("{experiment}", "audit", paths.AUDIT_JOB),
    benchmark:
        paths.benchmark("audit", paths.AUDIT_JOB)
    conda:
        "../envs/dpaudit.yaml"
    resources:
        **JOB_RESOURCES,
    params:
        estimators=per_job(pipeline_params.audit_estimators, "experiment"),
        code=library_code("audit"),
    script:
        "../scripts/audit.py"


rule audit_table:
    input:
        per_job(pipeline_targets.audit_files, "experiment"),
    output:
        report(
            paths.audit_table(),
            caption="../report/audit_table.rst",
            category="{experiment}",
            subcategory="Tables",
        ),
    log:
        paths.log("{experiment}", "audit_table"),
    wildcard_constraints:
        experiment=pipeline_targets.kind_pattern(config, "train", "simulate"),
    conda:
        "../envs/dpaudit.yaml"
    resources:
        **JOB_RESOURCES,
    params:
        settings=per_job(pipeline_params.setting_table, "experiment"),
        labels=per_job(pipeline_params.estimator_labels, "experiment"),
        estimators=per_job(applicable_estimators, "experiment"),
        code=library_code("audit_table"),
    script:
        "../scripts/audit_table.py"


rule conformance_table:
    input:
        scores=per_job(pipeline_targets.score_files, "experiment"),
    output:
        report(
            paths.conformance_table(),
            caption="../report/conformance_table.rst",
            category="{experiment}",
            subcategory="Tables",
        ),
    log:
        paths.log("{experiment}", "conformance_table"),
    wildcard_constraints:
        experiment=pipeline_targets.entry_point_pattern(config),
    conda:
        "../envs/dpaudit.yaml"
    resources:
        **JOB_RESOURCES,
    params:
        settings=per_job(pipeline_params.setting_table, "experiment"),
        code=library_code("conformance_table"),
    script:
        "../scripts/conformance_table.py"
