"""Snakemake adapter: plot a simulation's audit table or an analysis table."""

import pandas as pd

from dpaudit.joblog import job_log
from dpaudit.plots.lines import plot_table

log = job_log(snakemake.log[0])
table = pd.read_csv(snakemake.input.table)
plot_table(table, dict(snakemake.params.figure), [snakemake.output.pdf, snakemake.output.png])
log.info("plotted %d rows", len(table))
