"""Snakemake adapter: run one estimator on the score files of one (setting, seed)."""

from dpaudit import scores
from dpaudit.audit import run_estimator
from dpaudit.io import write_csv
from dpaudit.pipeline import script_logging

log = script_logging(snakemake.log[0])
files = [scores.read(path) for path in snakemake.input.scores]
sf = files[0] if len(files) == 1 else scores.concat(files)  # shards of one setting and seed
table = run_estimator(sf, snakemake.wildcards.estimator, snakemake.params.estimator)
write_csv(snakemake.output.table, table)
log.info("%d row(s); max epsilon %s", len(table), table["epsilon"].max() if len(table) else None)
