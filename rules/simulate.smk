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
        run=per_job(pipeline_params.simulate_params, "experiment", "setting"),
        code=library_code("simulate"),
    script:
        "../scripts/simulate.py"
