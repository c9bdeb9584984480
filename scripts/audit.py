"""Snakemake adapter: run one estimator on the score files of every seed of one setting."""

from dpaudit.audit import audit_seed_groups
from dpaudit.io import write_csv
from dpaudit.joblog import job_log
from dpaudit.pipeline.paths import group_by_seed
from dpaudit.tables import with_row_count

log = job_log(snakemake.log[0])
# one list per seed (the file, or its shards), from the paths; every seed gives at least one row
table = audit_seed_groups(
    group_by_seed(snakemake.input.scores),
    snakemake.wildcards.estimator,
    snakemake.params.estimator,
)
for seed, rows in table.groupby("seed", sort=False):
    log.info("seed %s: %d row(s); max epsilon %s", seed, len(rows), rows["epsilon"].max())
write_csv(snakemake.output.table, with_row_count(table))
