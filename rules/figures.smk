# Figures from the audit tables.


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
    conda:
        "../envs/dpaudit.yaml"
    params:
        title=experiment_description,
    script:
        "../scripts/plot_eps.py"
