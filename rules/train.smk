# DP-SGD training with canaries: one score file per (experiment, setting, seed, shard), for
# every engine (train.engine: opacus trains one model, the vectorised engines a shard of them).


rule train:
    input:
        dataset=per_job(pipeline_targets.train_dataset, "experiment", "setting"),
    output:
        scores=paths.score_file(shard="{shard}"),
    log:
        paths.log("{experiment}", "train", paths.SHARD_JOB),
    benchmark:
        paths.benchmark("train", paths.SHARD_JOB)
    wildcard_constraints:
        shard="[0-9]+",
    conda:
        "../envs/dpaudit.yaml"
    threads: config["compute"]["threads_per_training_job"]
    resources:
        **TRAIN_RESOURCES,
    params:
        run=per_job(pipeline_params.train_params, "experiment", "setting"),
        device=config["compute"]["device"],
        max_physical_batch=per_job(pipeline_params.max_physical_batch, "experiment"),
        code=train_code,
    script:
        "../scripts/train.py"
