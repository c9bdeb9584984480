# Figures from the audit and analysis tables, the paper-named targets, the reproduction table.


rule figure_eps:
    input:
        table="results/{experiment}/audit.csv",
    output:
        pdf=report(
            "results/{experiment}/figures/eps_empirical_vs_claimed.pdf",
            caption="../report/eps_figure.rst",
            category="{experiment}",
            subcategory="Figures",
        ),
        png=report(
            "results/{experiment}/figures/eps_empirical_vs_claimed.png",
            caption="../report/eps_figure.rst",
            category="{experiment}",
            subcategory="Figures",
        ),
    log:
        "logs/{experiment}/figure_eps.log",
    wildcard_constraints:
        experiment=kind_pattern("train"),
    conda:
        "../envs/dpaudit.yaml"
    params:
        title=experiment_description,
    script:
        "../scripts/plot_eps.py"


rule figure:
    input:
        table=experiment_table,
    output:
        pdf=report(
            "results/{experiment}/figures/figure.pdf",
            caption="../report/figure.rst",
            category="{experiment}",
            subcategory="Figures",
        ),
        png=report(
            "results/{experiment}/figures/figure.png",
            caption="../report/figure.rst",
            category="{experiment}",
            subcategory="Figures",
        ),
    log:
        "logs/{experiment}/figure.log",
    wildcard_constraints:
        experiment=kind_pattern("simulate", "analysis"),
    conda:
        "../envs/dpaudit.yaml"
    params:
        figure=figure_params,
    script:
        "../scripts/plot_figure.py"


rule paper_target:
    input:
        unpack(paper_target_inputs),
    output:
        pdf="results/{paper}/{figure}.pdf",
        png="results/{paper}/{figure}.png",
        table="results/{paper}/{figure}.csv",
    log:
        "logs/paper/{paper}/{figure}.log",
    wildcard_constraints:
        paper=target_pattern(0),
        figure=target_pattern(1),
    conda:
        "../envs/dpaudit.yaml"
    script:
        "../scripts/paper_target.py"


rule reproduction:
    input:
        reproduction_inputs,
    output:
        md=report(
            "results/reproduction.md",
            caption="../report/reproduction.rst",
            category="Reproduction",
        ),
        csv="results/reproduction.csv",
    log:
        "logs/reproduction.log",
    conda:
        "../envs/dpaudit.yaml"
    params:
        checks=reproduction_params,
    script:
        "../scripts/reproduction.py"
