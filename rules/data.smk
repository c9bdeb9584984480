# Datasets: generated or downloaded, then prepared into one standard .npz per experiment (one
# per value of the dataset keys a train experiment's grid varies).


rule prepare_dataset:
    output:
        paths.dataset(),
    log:
        paths.log("{experiment}", "prepare_dataset", "{variant}"),
    conda:
        "../envs/dpaudit.yaml"
    resources:
        **JOB_RESOURCES,
    params:
        dataset=per_job(pipeline_params.dataset_params, "experiment", "variant"),
        root=config["data"]["root"],
        mirror=config["data"]["mirror"],
        code=library_code("prepare_dataset"),
    script:
        "../scripts/prepare_dataset.py"
