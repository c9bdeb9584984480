"""Snakemake adapter: collect every paper number the config reproduces into one table."""

from dpaudit.io import atomic_path, write_csv
from dpaudit.joblog import job_log
from dpaudit.reproduction import check_all, to_markdown

log = job_log(snakemake.log[0])
table = check_all(snakemake.params.checks)
write_csv(snakemake.output.csv, table)
with atomic_path(snakemake.output.md) as tmp:
    tmp.write_text(to_markdown(table))
log.info("%d checks, %d within tolerance", len(table), int(table["agrees"].eq(True).sum()))
