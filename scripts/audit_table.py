"""Snakemake adapter: concatenate the per-file audit rows into one tidy table."""

from dpaudit.io import write_csv
from dpaudit.joblog import job_log
from dpaudit.tables import add_setting_columns, add_verdicts, concat_tables

log = job_log(snakemake.log[0])
table = add_verdicts(
    add_setting_columns(concat_tables(list(snakemake.input)), snakemake.params.settings)
)
write_csv(snakemake.output[0], table)
log.info("%d rows from %d files", len(table), len(snakemake.input))
