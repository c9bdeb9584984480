# Datasets: generated or downloaded, then prepared into one standard .npz per experiment.


rule prepare_dataset:
    output:
        "resources/datasets/{experiment}.npz",
    log:
        "logs/{experiment}/prepare_dataset.log",
    conda:
        "../envs/dpaudit.yaml"
    params:
        dataset=dataset_params,
        root=config["data"]["root"],
        mirror=config["data"]["mirror"],
    script:
        "../scripts/prepare_dataset.py"
