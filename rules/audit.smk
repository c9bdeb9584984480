# Every estimator on every score file it applies to, then one tidy table per experiment. One
# audit job runs one estimator on every seed of one setting (a seed's rows are independent of
# the other seeds'), which keeps paper-scale grids (25 seeds x hundreds of settings) to a
# manageable number of jobs.


rule audit:
    input:
        scores=audit_scores,
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
        estimator=estimator_params,
    script:
        "../scripts/audit.py"


rule audit_table:
    input:
        audit_files,
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
        experiment=kind_pattern("train", "simulate"),
    conda:
        "../envs/dpaudit.yaml"
    resources:
        **JOB_RESOURCES,
    params:
        settings=setting_table,
        labels=estimator_labels,
    script:
        "../scripts/audit_table.py"
