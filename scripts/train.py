"""Snakemake adapter: one training job (any engine) -> its score file (dpaudit.training.job)."""

import os

import torch

from dpaudit.attach.pipeline import train_entry_point
from dpaudit.data.prepare import load_prepared
from dpaudit.manifest import start_job
from dpaudit.training.device import training_device
from dpaudit.training.job import train_job

log = start_job(snakemake)
torch.set_num_threads(snakemake.threads)
run = snakemake.params.run
wc = snakemake.wildcards
log.info("experiment=%s setting=%s seed=%s shard=%s run=%s", wc.experiment, wc.setting,
         wc.seed, wc.shard, run)
# on a cluster: only the GPUs the scheduler allocated (CUDA_VISIBLE_DEVICES), else the CPU
device = training_device(snakemake.params.device, snakemake.resources.gpu)
log.info("device %s (CUDA_VISIBLE_DEVICES=%s)", device, os.environ.get("CUDA_VISIBLE_DEVICES"))
log.info("max_physical_batch %s", snakemake.params.max_physical_batch)
# train.entry_point: the user's own training function trains (dpaudit.attach.pipeline)
trainer = train_entry_point if run["train"].get("entry_point") else train_job
sf = trainer(
    load_prepared(snakemake.input.dataset)[0],
    experiment=wc.experiment,
    setting=wc.setting,
    seed=int(wc.seed),
    shard=int(wc.shard),
    run_spec=run,
    out=snakemake.output.scores,
    device=device,
    max_physical_batch=snakemake.params.max_physical_batch,
)
log.info("claimed epsilon %s, test accuracy %.4f; %d trial(s) x %d canaries",
         sf.meta["claimed_epsilon"], sf.meta.get("test_accuracy", float("nan")), sf.n_trials,
         sf.n_canaries)
