"""Snakemake adapter: compute one analysis table (closed form, or from audit tables)."""

import pandas as pd

from dpaudit.analyses import run
from dpaudit.io import write_csv
from dpaudit.manifest import start_job

log = start_job(snakemake)
spec = snakemake.params.run
tables = {name: pd.read_csv(snakemake.input[name]) for name in spec["inputs"]}
table = run(spec["analysis"], spec["params"], tables)
write_csv(snakemake.output.table, table)
log.info("analysis %s: %d rows from %d input tables", spec["analysis"], len(table), len(tables))
