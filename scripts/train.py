"""Snakemake adapter: train one model of one setting and write its score file."""

import torch

from dpaudit import scores
from dpaudit.data.prepare import load_prepared
from dpaudit.joblog import job_log
from dpaudit.training.one_run import run_setting

log = job_log(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
run = snakemake.params.run
log.info(
    "experiment=%s setting=%s seed=%s run=%s",
    snakemake.wildcards.experiment,
    snakemake.wildcards.setting,
    snakemake.wildcards.seed,
    run,
)
sf = run_setting(
    load_prepared(snakemake.input.dataset)[0],
    experiment=snakemake.wildcards.experiment,
    setting=snakemake.wildcards.setting,
    seed=int(snakemake.wildcards.seed),
    model=run["model"],
    canaries=run["canaries"],
    train=run["train"],
    target_epsilon=run["target_epsilon"],
    device=snakemake.params.device,
)
scores.write(snakemake.output.scores, sf)
log.info(
    "claimed epsilon %s, test accuracy %.4f", sf.meta["claimed_epsilon"], sf.meta["test_accuracy"]
)
