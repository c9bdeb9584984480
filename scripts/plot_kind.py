"""Snakemake adapter: a figure kind of an experiment (dpaudit.pipeline.figure_kinds)."""

from dpaudit.manifest import start_job
from dpaudit.pipeline.figure_kinds import draw

log = start_job(snakemake)
draw(
    snakemake.wildcards.kind,
    snakemake.input,
    [snakemake.output.pdf, snakemake.output.png],
    dict(snakemake.params.figure),
    log,
)
