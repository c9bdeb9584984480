"""Snakemake adapter: the conformance table of an experiment trained by ``train.entry_point``
(each DP-SGD stage's checks, measured beside the claim, per score file), with the setting
columns; shown in the report beside the audit table's bounds."""

from dpaudit.attach.conformance import conformance_table
from dpaudit.io import write_csv
from dpaudit.manifest import start_job
from dpaudit.pipeline.paths import read_score_file
from dpaudit.tables import add_setting_columns

log = start_job(snakemake)
table = conformance_table([read_score_file(path) for path in snakemake.input.scores])
table = add_setting_columns(table, snakemake.params.settings)
write_csv(snakemake.output[0], table)
for (setting, seed), rows in table.groupby(["setting", "seed"], sort=False):
    departs = sorted(set(rows.loc[rows["status"] == "departs", "stage"]))
    unseen = list(rows.loc[rows["status"] == "unseen", "stage"])
    log.info("%s seed %s: departs at %s; unseen: %s", setting, seed, departs or "none", unseen)
log.info("%d rows from %d score files", len(table), len(snakemake.input.scores))
