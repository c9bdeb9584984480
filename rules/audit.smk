# Every estimator on every score file it applies to, then one tidy table per experiment.


rule audit:
    input:
        scores=audit_scores,
    output:
        table="results/{experiment}/audit/{estimator}/{setting}/seed{seed}.csv",
    log:
        "logs/{experiment}/audit/{estimator}/{setting}/seed{seed}.log",
    benchmark:
        "results/{experiment}/benchmarks/audit/{estimator}/{setting}/seed{seed}.tsv"
    conda:
        "../envs/dpaudit.yaml"
    params:
        estimator=estimator_params,
    script:
        "../scripts/audit.py"


rule audit_table:
    input:
        audit_files,
    output:
        report(
            "results/{experiment}/audit.csv",
            caption="../report/audit_table.rst",
            category="{experiment}",
            subcategory="Tables",
        ),
    log:
        "logs/{experiment}/audit_table.log",
    wildcard_constraints:
        experiment=kind_pattern("train", "simulate"),
    conda:
        "../envs/dpaudit.yaml"
    params:
        settings=setting_table,
    script:
        "../scripts/audit_table.py"
