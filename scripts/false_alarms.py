"""Snakemake adapter: the false alarms per check family over the seeds of an audit table, and
its verdict table with one row per implementation and seed (dpaudit.attach.false_alarms)."""

import pandas as pd

from dpaudit.attach.false_alarms import ALLOWED_RATE, false_alarm_table, per_seed_verdicts
from dpaudit.io import write_csv
from dpaudit.manifest import start_job

log = start_job(snakemake)
p = snakemake.params.verdict
by, estimator, source = list(p["by"]), p["estimator"], snakemake.input.table
table = pd.read_csv(source)
write_csv(snakemake.output.seeds, per_seed_verdicts(table, by, estimator, source=source))
alarms = false_alarm_table(table, by, estimator, source=source)
write_csv(snakemake.output.table, alarms)
log.info("at most %.4g of the seeds may flag a correct training per check family", ALLOWED_RATE)
for r in alarms.itertuples():
    log.info(
        "%s, %s: flagged in %d of %d seeds (%d seen; allowed %d): %s; largest bound %.4g",
        " ".join(str(getattr(r, c)) for c in by),
        r.family,
        r.flagged,
        r.seeds,
        r.seen,
        r.allowed,
        "within" if r.within else "EXCEEDS",
        r.largest_bound,
    )
