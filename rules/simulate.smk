# Idealised mechanisms: score files in the same contract as training, no training needed.


rule simulate:
    output:
        scores="results/{experiment}/scores/{setting}/seed{seed}.npz",
    log:
        "logs/{experiment}/simulate/{setting}/seed{seed}.log",
    benchmark:
        "results/{experiment}/benchmarks/simulate/{setting}/seed{seed}.tsv"
    wildcard_constraints:
        experiment=kind_pattern("simulate"),
    conda:
        "../envs/dpaudit.yaml"
    params:
        run=simulate_params,
    script:
        "../scripts/simulate.py"
