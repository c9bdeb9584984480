"""Snakemake adapter: compute one closed-form analysis table."""

from dpaudit.analyses import run
from dpaudit.io import write_csv
from dpaudit.joblog import job_log

log = job_log(snakemake.log[0])
spec = snakemake.params.run
table = run(spec["analysis"], spec["params"])
write_csv(snakemake.output.table, table)
log.info("analysis %s: %d rows", spec["analysis"], len(table))
