"""Snakemake adapter: figure of empirical vs claimed epsilon."""

import pandas as pd

from dpaudit.joblog import job_log
from dpaudit.plots.eps import plot_empirical_vs_claimed

log = job_log(snakemake.log[0])
table = pd.read_csv(snakemake.input.table)
plot_empirical_vs_claimed(
    table, [snakemake.output.pdf, snakemake.output.png], dict(snakemake.params.figure)
)
log.info("plotted %d rows", len(table))
