"""Snakemake adapter: the HTML report of every result, made with ``snakemake --report``."""

from pathlib import Path

from dpaudit.manifest import start_job
from dpaudit.report import make_report, tail

log = start_job(snakemake)
snakefile = Path(snakemake.scriptdir).parent / "Snakefile"
output = make_report(snakemake.output[0], snakemake.params.targets, snakefile,
                     snakemake.params.config)
log.info("snakemake --report said:\n%s", tail(output))
log.info("report written to %s", snakemake.output[0])
