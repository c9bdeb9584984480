"""Snakemake adapter: run one idealised mechanism and write its score file."""

from dpaudit import scores
from dpaudit.manifest import start_job
from dpaudit.mechanisms.registry import simulate

log = start_job(snakemake)
run = snakemake.params.run
log.info("mechanism %s with %s", run["mechanism"], run["params"])
sf = simulate(
    run["mechanism"],
    run["params"],
    seed=int(snakemake.wildcards.seed),
    experiment=snakemake.wildcards.experiment,
    setting=snakemake.wildcards.setting,
)
scores.write(snakemake.output.scores, sf)
log.info("wrote %d trial(s) x %d canaries", sf.n_trials, sf.n_canaries)
