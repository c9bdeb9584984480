"""Snakemake adapter: figure of empirical vs claimed epsilon."""

import pandas as pd

from dpaudit.manifest import start_job
from dpaudit.plots.eps import plot_empirical_vs_claimed

log = start_job(snakemake)
table = pd.read_csv(snakemake.input.table)
plot_empirical_vs_claimed(
    table, [snakemake.output.pdf, snakemake.output.png], dict(snakemake.params.figure)
)
log.info("plotted %d rows", len(table))
