# Closed-form analyses: the papers' theory curves and tables.


rule analysis:
    input:
        unpack(per_job(pipeline_targets.analysis_inputs, "experiment")),
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
        experiment=pipeline_targets.kind_pattern(config, "analysis"),
    conda:
        "../envs/dpaudit.yaml"
    resources:
        **JOB_RESOURCES,
    params:
        run=per_job(pipeline_params.analysis_params, "experiment"),
        code=library_code("analysis"),
    script:
        "../scripts/analysis.py"
