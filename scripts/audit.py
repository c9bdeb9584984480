"""Snakemake adapter: run one estimator on the score files of every seed of one setting."""

from dpaudit import scores
from dpaudit.audit import run_estimator
from dpaudit.io import write_csv
from dpaudit.joblog import job_log
from dpaudit.tables import concat_frames

log = job_log(snakemake.log[0])
tables = []
for paths in snakemake.params.seed_files:  # one list per seed: the file, or its shards
    files = [scores.read(path) for path in paths]
    sf = files[0] if len(files) == 1 else scores.concat(files)
    table = run_estimator(sf, snakemake.wildcards.estimator, snakemake.params.estimator)
    log.info("%s: %d row(s); max epsilon %s", paths[0], len(table),
             table["epsilon"].max() if len(table) else None)
    tables.append(table)
write_csv(snakemake.output.table, concat_frames(tables))
