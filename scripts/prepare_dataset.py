"""Snakemake adapter: build the experiment's dataset file (resources/datasets/*.npz)."""

from dpaudit.data.prepare import prepare_dataset
from dpaudit.pipeline import script_logging

log = script_logging(snakemake.log[0])
params = dict(snakemake.params.dataset)
name = params.pop("name")
log.info("preparing dataset %s with %s", name, params)
prepare_dataset(
    name,
    params,
    root=None,
    mirror=None,
    out=snakemake.output[0],
)
log.info("wrote %s", snakemake.output[0])
