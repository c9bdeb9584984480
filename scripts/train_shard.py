"""Snakemake adapter: train one shard of models with the vectorised engine, write its scores."""

from pathlib import Path

import torch

from dpaudit import scores
from dpaudit.data.prepare import load_prepared
from dpaudit.joblog import job_log
from dpaudit.training.shard import run_shard

log = job_log(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
run = snakemake.params.run
wc = snakemake.wildcards
out = Path(snakemake.output.scores)
ckpt = out.with_name(out.name + ".ckpt")  # a killed job resumes from here
log.info("experiment=%s setting=%s seed=%s shard=%s run=%s", wc.experiment, wc.setting,
         wc.seed, wc.shard, run)
res = run_shard(
    load_prepared(snakemake.input.dataset)[0],
    experiment=wc.experiment,
    setting=wc.setting,
    seed=int(wc.seed),
    shard=int(wc.shard),
    design=run["design"],
    threat_model=run["threat_model"],
    model=run["model"],
    canaries=run["canaries"],
    train=run["train"],
    target_epsilon=run["target_epsilon"],
    checkpoint=ckpt,
    device=snakemake.params.device,
)
scores.write(out, res.score_file)
ckpt.unlink(missing_ok=True)
log.info("claimed epsilon %s; %d trial(s) x %d canaries", res.score_file.meta["claimed_epsilon"],
         res.score_file.n_trials, res.score_file.n_canaries)
