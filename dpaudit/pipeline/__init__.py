"""What the Snakemake rules call, kept in the library (not in the .smk files) so that it is
unit-tested and usable elsewhere.

:mod:`~dpaudit.pipeline.settings` turns experiments into settings (the grid model),
:mod:`~dpaudit.pipeline.grid` expands a train experiment's grid into its points' blocks,
:mod:`~dpaudit.pipeline.paths` declares every output path once, :mod:`~dpaudit.pipeline.targets`
lists the files and :mod:`~dpaudit.pipeline.params` the parameters of the jobs a config asks
for (what a config may ask for is bounded by :mod:`dpaudit.config.guards`),
:mod:`~dpaudit.pipeline.codehash` hashes the code a job runs and
:mod:`~dpaudit.pipeline.resources` / :mod:`~dpaudit.pipeline.cluster` say what a job asks a
cluster for.
"""
