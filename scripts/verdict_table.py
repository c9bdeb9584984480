"""Snakemake adapter: the practitioner's verdict table of an audit table, and its figure."""

import pandas as pd

from dpaudit.io import write_csv
from dpaudit.manifest import start_job
from dpaudit.plots.verdict import plot_verdicts, with_implementation
from dpaudit.verdict import verdict_table

log = start_job(snakemake)
p = snakemake.params.verdict
table = pd.read_csv(snakemake.input.table)
verdicts = verdict_table(table, list(p["by"]), p["estimator"], source=snakemake.input.table)
verdicts = with_implementation(verdicts, list(p["by"]), dict(p["labels"]))
write_csv(snakemake.output.table, verdicts)
plot_verdicts(verdicts, [snakemake.output.pdf, snakemake.output.png], p["title"])
if len(verdicts):
    log.info("all flags at once: %.4g family-wise confidence", verdicts["familywise_confidence"][0])
for r in verdicts.itertuples():
    log.info(
        "%s (claimed %.4g): %.4g at %.4g joint confidence: %s",
        r.implementation,
        r.claimed_epsilon,
        r.epsilon_lower_bound,
        r.joint_confidence,
        r.verdict,
    )
    if "conformance_departs" in verdicts and isinstance(r.conformance_departs, str):
        log.info(
            "  conformance: departs at %s; measured epsilon %.4g; unseen: %s",
            r.conformance_departs,
            r.measured_epsilon,
            r.conformance_unseen,
        )
