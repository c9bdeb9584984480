"""Snakemake adapter: run every estimator of an experiment on the score files of every seed of
one setting (each file read once)."""

from dpaudit.audit import audit_setting
from dpaudit.manifest import start_job
from dpaudit.pipeline.paths import group_by_seed, parse_score_file
from dpaudit.tables import write_audit_csv

log = start_job(snakemake)
# one list per seed (the file, or its shards), from the paths; [name, block] pairs in order
estimators = {name: block for name, block in snakemake.params.estimators}
# each file's metadata must name the run of its path (experiment, setting, seed, shard)
expected = {str(path): parse_score_file(path) for path in snakemake.input.scores}
table = audit_setting(group_by_seed(snakemake.input.scores), estimators, expected)
for (name, seed), rows in table.groupby(["estimator", "seed"], sort=False):
    log.info("%s, seed %s: %d row(s); max epsilon %s", name, seed, len(rows), rows["epsilon"].max())
for name in estimators.keys() - set(table["estimator"]):
    log.info("%s: no rows (skips this setting by design, e.g. LiDP below_order: skip)", name)
write_audit_csv(snakemake.output.table, table)
