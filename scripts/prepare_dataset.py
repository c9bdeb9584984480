"""Snakemake adapter: build the experiment's dataset file (resources/datasets/*.npz)."""

from dpaudit.data.prepare import prepare_dataset
from dpaudit.manifest import start_job

log = start_job(snakemake)
# null means "the dataset's own default": such keys are not passed on
params = {k: v for k, v in snakemake.params.dataset.items() if v is not None}
name = params.pop("name")
log.info("preparing dataset %s with %s", name, params)
prepare_dataset(
    name,
    params,
    root=snakemake.params.root,
    mirror=snakemake.params.mirror,
    out=snakemake.output[0],
)
log.info("wrote %s", snakemake.output[0])
