# Figures from the audit and analysis tables, the paper-named targets, the reproduction table.


rule figure_eps:
    input:
        table=paths.audit_table(),
    output:
        pdf=report(
            paths.figure(name=paths.EPS_FIGURE, ext="pdf"),
            caption="../report/eps_figure.rst",
            category="{experiment}",
            subcategory="Figures",
        ),
        png=report(
            paths.figure(name=paths.EPS_FIGURE, ext="png"),
            caption="../report/eps_figure.rst",
            category="{experiment}",
            subcategory="Figures",
        ),
    log:
        paths.log("{experiment}", "figure_eps"),
    wildcard_constraints:
        experiment=pipeline_targets.kind_pattern(config, "train"),
    conda:
        "../envs/dpaudit.yaml"
    resources:
        **JOB_RESOURCES,
    params:
        figure=per_job(pipeline_params.figure_params, "experiment"),
        caption=per_job(pipeline_params.figure_caption, "experiment", eps=True),
        code=library_code("plot_eps"),
    script:
        "../scripts/plot_eps.py"


rule figure:
    input:
        table=per_job(pipeline_targets.main_table, "experiment"),
    output:
        pdf=report(
            paths.figure(ext="pdf"),
            caption="../report/figure.rst",
            category="{experiment}",
            subcategory="Figures",
        ),
        png=report(
            paths.figure(ext="png"),
            caption="../report/figure.rst",
            category="{experiment}",
            subcategory="Figures",
        ),
    log:
        paths.log("{experiment}", "figure"),
    wildcard_constraints:
        experiment=pipeline_targets.line_figure_pattern(config),
    conda:
        "../envs/dpaudit.yaml"
    resources:
        **JOB_RESOURCES,
    params:
        figure=per_job(pipeline_params.figure_params, "experiment"),
        caption=per_job(pipeline_params.figure_caption, "experiment"),
        code=library_code("plot_figure"),
    script:
        "../scripts/plot_figure.py"


rule figure_kind:
    input:
        unpack(per_job(pipeline_targets.figure_kind_inputs, "kind", "experiment")),
    output:
        pdf=report(
            paths.figure(name="{kind}", ext="pdf"),
            caption="../report/figure.rst",
            category="{experiment}",
            subcategory="Figures",
        ),
        png=report(
            paths.figure(name="{kind}", ext="png"),
            caption="../report/figure.rst",
            category="{experiment}",
            subcategory="Figures",
        ),
    log:
        paths.log("{experiment}", "figure_{kind}"),
    benchmark:
        paths.benchmark("figure_{kind}", "{kind}")
    wildcard_constraints:
        kind=pipeline_figure_kinds.kind_pattern(),
        experiment=pipeline_targets.figure_kind_experiments(config),
    conda:
        "../envs/dpaudit.yaml"
    resources:
        **JOB_RESOURCES,
    params:
        figure=per_job(pipeline_figure_kinds.job_params, "kind", "experiment"),
        caption=per_job(pipeline_figure_kinds.job_caption, "kind", "experiment"),
        code=library_code("plot_kind"),
    script:
        "../scripts/plot_kind.py"


rule verdict_table:
    input:
        table=paths.audit_table(),
    output:
        table=report(
            paths.verdict_table(),
            caption="../report/verdict_table.rst",
            category="{experiment}",
            subcategory="Tables",
        ),
        pdf=report(
            paths.figure(name=paths.VERDICT_FIGURE, ext="pdf"),
            caption="../report/verdict_table.rst",
            category="{experiment}",
            subcategory="Figures",
        ),
        png=report(
            paths.figure(name=paths.VERDICT_FIGURE, ext="png"),
            caption="../report/verdict_table.rst",
            category="{experiment}",
            subcategory="Figures",
        ),
    log:
        paths.log("{experiment}", "verdict_table"),
    wildcard_constraints:
        experiment=pipeline_targets.block_pattern(config, "verdict"),
    conda:
        "../envs/dpaudit.yaml"
    resources:
        **JOB_RESOURCES,
    params:
        verdict=per_job(pipeline_params.verdict_params, "experiment"),
        code=library_code("verdict_table"),
    script:
        "../scripts/verdict_table.py"


rule false_alarms:
    input:
        table=paths.audit_table(),
    output:
        table=report(
            paths.false_alarm_table(),
            caption="../report/false_alarms.rst",
            category="{experiment}",
            subcategory="Tables",
        ),
        seeds=paths.per_seed_verdict_table(),
    log:
        paths.log("{experiment}", "false_alarms"),
    wildcard_constraints:
        experiment=pipeline_targets.block_pattern(config, "verdict"),
    conda:
        "../envs/dpaudit.yaml"
    resources:
        **JOB_RESOURCES,
    params:
        verdict=per_job(pipeline_params.verdict_params, "experiment"),
        code=library_code("false_alarms"),
    script:
        "../scripts/false_alarms.py"


rule figure_tradeoff:
    input:
        scores=per_job(pipeline_targets.tradeoff_score_files, "experiment"),
    output:
        table=paths.tradeoff_table(),
        pdf=report(
            paths.figure(name=paths.TRADEOFF_FIGURE, ext="pdf"),
            caption="../report/tradeoff_figure.rst",
            category="{experiment}",
            subcategory="Figures",
        ),
        png=report(
            paths.figure(name=paths.TRADEOFF_FIGURE, ext="png"),
            caption="../report/tradeoff_figure.rst",
            category="{experiment}",
            subcategory="Figures",
        ),
    log:
        paths.log("{experiment}", "figure_tradeoff"),
    benchmark:
        paths.benchmark("figure_tradeoff", "tradeoff")
    wildcard_constraints:
        experiment=pipeline_targets.block_pattern(config, "tradeoff"),
    conda:
        "../envs/dpaudit.yaml"
    resources:
        **JOB_RESOURCES,
    params:
        tradeoff=per_job(pipeline_params.tradeoff_params, "experiment"),
        code=library_code("plot_tradeoff"),
    script:
        "../scripts/plot_tradeoff.py"


rule paper_target:
    input:
        unpack(per_job(pipeline_targets.paper_target_inputs, "paper", "figure")),
    output:
        pdf=paths.paper_target(ext="pdf"),
        png=paths.paper_target(ext="png"),
        table=paths.paper_target(ext="csv"),
    log:
        paths.log("paper", "{paper}", "{figure}"),
    wildcard_constraints:
        paper=pipeline_targets.target_pattern(config, 0),
        figure=pipeline_targets.target_pattern(config, 1),
    conda:
        "../envs/dpaudit.yaml"
    resources:
        **JOB_RESOURCES,
    params:
        code=library_code("paper_target"),
    script:
        "../scripts/paper_target.py"


rule reproduction_part:
    input:
        per_job(pipeline_targets.main_table, "experiment"),
    output:
        paths.reproduction_part(),
    log:
        paths.log("{experiment}", "reproduction"),
    wildcard_constraints:
        experiment=pipeline_targets.reproduced_pattern(config),
    conda:
        "../envs/dpaudit.yaml"
    resources:
        **JOB_RESOURCES,
    params:
        check=per_job(
            pipeline_params.reproduction_part_params, "experiment", label=CONFIG_LABEL
        ),
        code=library_code("reproduction_part"),
    script:
        "../scripts/reproduction_part.py"


rule reproduction:
    input:
        per_job(pipeline_targets.reproduction_inputs),
    output:
        md=report(
            paths.reproduction("md"),
            caption="../report/reproduction.rst",
            category="Reproduction",
        ),
        csv=paths.reproduction("csv"),
    log:
        paths.log("reproduction"),
    conda:
        "../envs/dpaudit.yaml"
    resources:
        **JOB_RESOURCES,
    params:
        parts=paths.REPRODUCTION_PARTS,
        code=library_code("reproduction"),
    script:
        "../scripts/reproduction.py"
