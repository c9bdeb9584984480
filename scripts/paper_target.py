"""Snakemake adapter: publish an experiment's figure and table under its paper-figure name."""

from dpaudit.io import copy_atomic
from dpaudit.joblog import job_log

log = job_log(snakemake.log[0])
for key in ("pdf", "png", "table"):
    copy_atomic(snakemake.input[key], snakemake.output[key])
    log.info("%s -> %s", snakemake.input[key], snakemake.output[key])
