"""Snakemake adapter: plot a simulation's audit table or an analysis table."""

import pandas as pd

from dpaudit.pipeline import script_logging
from dpaudit.plots.lines import plot_table

log = script_logging(snakemake.log[0])
table = pd.read_csv(snakemake.input.table)
plot_table(table, dict(snakemake.params.figure), [snakemake.output.pdf, snakemake.output.png])
log.info("plotted %d rows", len(table))
