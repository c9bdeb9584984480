"""Snakemake adapter: ROC curves (log-log) of an experiment's score files, a curve per setting."""

from dpaudit.manifest import start_job
from dpaudit.pipeline.paths import parse_score_file, read_score_file
from dpaudit.plots.roc import plot_roc

log = start_job(snakemake)
by_setting = {}
for path in snakemake.input.scores:
    by_setting.setdefault(parse_score_file(path)["setting"], []).append(read_score_file(path))
curves = plot_roc(
    by_setting, [snakemake.output.pdf, snakemake.output.png], snakemake.params.figure["title"]
)
for c in curves:
    log.info("%s: %d IN, %d OUT, AUROC %.4f", c.label, c.n_in, c.n_out, c.auroc)
