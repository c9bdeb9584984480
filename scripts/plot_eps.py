"""Snakemake adapter: figure of empirical vs claimed epsilon."""

import pandas as pd

from dpaudit.pipeline import script_logging
from dpaudit.plots.eps import plot_empirical_vs_claimed

log = script_logging(snakemake.log[0])
table = pd.read_csv(snakemake.input.table)
plot_empirical_vs_claimed(
    table, [snakemake.output.pdf, snakemake.output.png], title=snakemake.params.title
)
log.info("plotted %d rows", len(table))
