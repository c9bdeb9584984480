"""Snakemake adapter: run one estimator on the score files of every seed of one setting."""

from dpaudit.audit import audit_seed_groups
from dpaudit.joblog import job_log
from dpaudit.pipeline.paths import group_by_seed
from dpaudit.tables import write_audit_csv

log = job_log(snakemake.log[0])
# one list per seed (the file, or its shards), from the paths
table = audit_seed_groups(
    group_by_seed(snakemake.input.scores),
    snakemake.wildcards.estimator,
    snakemake.params.estimator,
)
for seed, rows in table.groupby("seed", sort=False):
    log.info("seed %s: %d row(s); max epsilon %s", seed, len(rows), rows["epsilon"].max())
write_audit_csv(snakemake.output.table, table)
if table.empty:
    log.info("no rows: the estimator skips this setting by design (e.g. LiDP below_order: skip)")
