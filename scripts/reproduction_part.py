"""Snakemake adapter: one experiment's reproduction checks, with the config file that ran them."""

from dpaudit.io import write_csv
from dpaudit.manifest import start_job
from dpaudit.reproduction import check_all

log = start_job(snakemake)
p = snakemake.params.check
table = check_all({snakemake.wildcards.experiment: {"table": p["table"], "checks": p["checks"]}})
table.insert(0, "config", p["config"])
write_csv(snakemake.output[0], table)
log.info("%d checks, %d within tolerance", len(table), int(table["agrees"].eq(True).sum()))
