# Closed-form analyses: the papers' theory curves and tables.


rule analysis:
    output:
        table=report(
            "results/{experiment}/table.csv",
            caption="../report/analysis_table.rst",
            category="{experiment}",
            subcategory="Tables",
        ),
    log:
        "logs/{experiment}/analysis.log",
    wildcard_constraints:
        experiment=kind_pattern("analysis"),
    conda:
        "../envs/dpaudit.yaml"
    params:
        run=analysis_params,
    script:
        "../scripts/analysis.py"
