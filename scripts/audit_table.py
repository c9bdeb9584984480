"""Snakemake adapter: concatenate the per-setting audit rows into one tidy table (estimator by
estimator), with the display names of estimators, selection rules, threat models and designs
beside their ids, and each row's verdict (a valid lower bound above the claimed epsilon is
flagged)."""

from dpaudit.io import write_csv
from dpaudit.manifest import start_job
from dpaudit.plots.labels import add_label_columns
from dpaudit.tables import add_setting_columns, concat_tables, order_by_estimator
from dpaudit.verdict import add_verdicts

log = start_job(snakemake)
table = order_by_estimator(concat_tables(list(snakemake.input)), snakemake.params.estimators)
table = add_setting_columns(table, snakemake.params.settings)
table = add_verdicts(add_label_columns(table, dict(snakemake.params.labels)))
write_csv(snakemake.output[0], table)
log.info("%d rows from %d files", len(table), len(snakemake.input))
