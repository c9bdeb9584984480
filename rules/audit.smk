# Every estimator on every score file it applies to, then one tidy table per experiment. One
# audit job runs one estimator on every seed of one setting (a seed's rows are independent of
# the other seeds'), which keeps paper-scale grids (25 seeds x hundreds of settings) to a
# manageable number of jobs.


rule audit:
    input:
        scores=audit_scores,
    output:
        table="results/{experiment}/audit/{estimator}/{setting}.csv",
    log:
        "logs/{experiment}/audit/{estimator}/{setting}.log",
    benchmark:
        "results/{experiment}/benchmarks/audit/{estimator}/{setting}.tsv"
    conda:
        "../envs/dpaudit.yaml"
    params:
        estimator=estimator_params,
        seed_files=audit_seed_files,
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
