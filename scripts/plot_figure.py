"""Snakemake adapter: plot a simulation's audit table or an analysis table."""

import pandas as pd

from dpaudit.manifest import start_job
from dpaudit.plots.lines import plot_table

log = start_job(snakemake)
table = pd.read_csv(snakemake.input.table)
plot_table(table, dict(snakemake.params.figure), [snakemake.output.pdf, snakemake.output.png])
log.info("plotted %d rows", len(table))
