"""Snakemake adapter: the HTML report of every result, made with ``snakemake --report``."""

from pathlib import Path

from dpaudit.joblog import job_log
from dpaudit.report import make_report, tail

log = job_log(snakemake.log[0])
snakefile = Path(snakemake.scriptdir).parent / "Snakefile"
output = make_report(snakemake.output[0], snakemake.params.targets, snakefile,
                     snakemake.params.config)
log.info("snakemake --report said:\n%s", tail(output))
log.info("report written to %s", snakemake.output[0])
