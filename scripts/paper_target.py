"""Snakemake adapter: publish an experiment's figure and table under its paper-figure name."""

from dpaudit.io import copy_atomic
from dpaudit.manifest import start_job

log = start_job(snakemake)
for key in ("pdf", "png", "table"):
    copy_atomic(snakemake.input[key], snakemake.output[key])
    log.info("%s -> %s", snakemake.input[key], snakemake.output[key])
