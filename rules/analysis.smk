# Closed-form analyses: the papers' theory curves and tables.


rule analysis:
    input:
        unpack(analysis_inputs),
    output:
        table=report(
            paths.analysis_table(),
            caption="../report/analysis_table.rst",
            category="{experiment}",
            subcategory="Tables",
        ),
    log:
        paths.log("{experiment}", "analysis"),
    wildcard_constraints:
        experiment=kind_pattern("analysis"),
    conda:
        "../envs/dpaudit.yaml"
    resources:
        **JOB_RESOURCES,
    params:
        run=analysis_params,
        code=library_code("analysis"),
    script:
        "../scripts/analysis.py"
