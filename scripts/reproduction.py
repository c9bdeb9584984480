"""Snakemake adapter: the reproduction table of every experiment's checks found under results/
(this config's, the rule's inputs, first; then those other configs wrote), one section per
config file."""

from glob import glob

from dpaudit.io import atomic_path, write_csv
from dpaudit.manifest import start_job
from dpaudit.reproduction import merge_parts, to_markdown

log = start_job(snakemake)
table = merge_parts(list(snakemake.input), sorted(glob(snakemake.params.parts)))
write_csv(snakemake.output.csv, table)
with atomic_path(snakemake.output.md) as tmp:
    tmp.write_text(to_markdown(table))
log.info(
    "%d checks from %d config(s), %d within tolerance",
    len(table),
    table["config"].nunique(),
    int(table["agrees"].eq(True).sum()),
)
