# DP-SGD training with canaries: one score file per (experiment, setting, seed, shard), for
# every engine (train.engine: opacus trains one model, the vectorised engines a shard of them).


rule train:
    input:
        dataset="resources/datasets/{experiment}.npz",
    output:
        scores="results/{experiment}/scores/{setting}/seed{seed}.shard{shard}.npz",
    log:
        "logs/{experiment}/train/{setting}/seed{seed}.shard{shard}.log",
    benchmark:
        "results/{experiment}/benchmarks/train/{setting}/seed{seed}.shard{shard}.tsv"
    wildcard_constraints:
        experiment=kind_pattern("train"),
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
        "../scripts/train.py"
