# DP-SGD training with canaries: one score file per (experiment, setting, seed).


rule train:
    input:
        dataset="resources/datasets/{experiment}.npz",
    output:
        scores="results/{experiment}/scores/{setting}/seed{seed}.npz",
    log:
        "logs/{experiment}/train/{setting}/seed{seed}.log",
    benchmark:
        "results/{experiment}/benchmarks/train/{setting}/seed{seed}.tsv"
    wildcard_constraints:
        experiment=trainer_pattern("opacus"),
    conda:
        "../envs/dpaudit.yaml"
    threads: config["compute"]["threads_per_training_job"]
    resources:
        gpu=config["compute"]["gpus_per_training_job"],
    params:
        run=train_params,
        device=config["compute"]["device"],
    script:
        "../scripts/train.py"


rule train_shard:
    input:
        dataset="resources/datasets/{experiment}.npz",
    output:
        scores="results/{experiment}/scores/{setting}/seed{seed}.shard{shard}.npz",
    log:
        "logs/{experiment}/train/{setting}/seed{seed}.shard{shard}.log",
    benchmark:
        "results/{experiment}/benchmarks/train/{setting}/seed{seed}.shard{shard}.tsv"
    wildcard_constraints:
        experiment=trainer_pattern("vectorized"),
        shard="[0-9]+",
    conda:
        "../envs/dpaudit.yaml"
    threads: config["compute"]["threads_per_training_job"]
    resources:
        gpu=config["compute"]["gpus_per_training_job"],
    params:
        run=train_params,
        device=config["compute"]["device"],
    script:
        "../scripts/train_shard.py"
