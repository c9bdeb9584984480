# Idealised mechanisms: score files in the same contract as training, no training needed.


rule simulate:
    output:
        scores=paths.score_file(),
    log:
        paths.log("{experiment}", "simulate", paths.SEED_JOB),
    benchmark:
        paths.benchmark("simulate", paths.SEED_JOB)
    conda:
        "../envs/dpaudit.yaml"
    resources:
        **JOB_RESOURCES,
    params:
        run=simulate_params,
        code=library_code("simulate"),
    script:
        "../scripts/simulate.py"
