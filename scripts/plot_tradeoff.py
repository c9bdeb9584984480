"""Snakemake adapter: the empirical trade-off curves of an experiment's settings against the
trade-off curves of their claim (Annamalai et al. 2024, Figs. 4-5)."""

from dpaudit.io import write_csv
from dpaudit.manifest import start_job
from dpaudit.pipeline.paths import parse_score_file, read_score_file
from dpaudit.plots.tradeoff import EMPIRICAL, plot_tradeoff

log = start_job(snakemake)
p = snakemake.params.tradeoff
by_setting = {}
for path in snakemake.input.scores:
    by_setting.setdefault(parse_score_file(path)["setting"], []).append(read_score_file(path))
table = plot_tradeoff(
    by_setting,
    dict(p["labels"]),
    p["runs"],
    p["confidence"],
    [snakemake.output.pdf, snakemake.output.png],
    p["title"],
)
write_csv(snakemake.output.table, table)
emp = table[table["curve"] == EMPIRICAL]
for (label, runs), c in emp.groupby(["label", "runs"], sort=False):
    below = {k: int(c[k].sum()) for k in ("below_eps_delta", "below_poisson") if k in c}
    log.info(
        "%s, %d runs: best same-data epsilon %.4g; bounded points below the claim curves %s",
        label,
        runs,
        c["epsilon_at_threshold"].max(),
        below,
    )
