"""Validation of the pipeline configuration against the schema shipped in the package.

The schema is ``dpaudit/schema.yaml`` (package data; ``config/schema.yaml`` is a link to it), so
the Snakefile and ``dpaudit audit --config`` check against the same file, editable install or
not. Validation runs in ``rules/common.smk`` before any job: a misspelled key, a wrong type, an
out-of-range value or a cross-key limit that a job would hit (an estimator that does not apply
to the experiment's design, more canaries than the pool holds, a target epsilon the accountant
cannot reach) stops the (dry) run with a message naming the key and what is allowed. Defaults
from the schema are filled in, so every rule sees a complete config.

The package holds validation only, one file per part:

* :mod:`~dpaudit.config.errors`: :class:`ConfigError` and the message of a schema violation;
* :mod:`~dpaudit.config.loading`: reading a config file, filling the defaults, running every
  check (:func:`validate_config`);
* :mod:`~dpaudit.config.structure`: the cross-key checks of the whole config (experiments,
  registries, grid points, verdicts, trade-off figures, paper targets);
* :mod:`~dpaudit.config.train_checks`: the checks of one train block (dataset, engine, run
  spec, model, reachable target epsilons, shuffling);
* :mod:`~dpaudit.config.estimator_checks`: the checks of the estimator blocks and of the
  estimators an experiment runs;
* :mod:`~dpaudit.config.guards`: what would otherwise merge silently, run away or fail late (the
  job count, setting names, mechanism parameters, published targets, mathtext);
* :mod:`~dpaudit.config.duplicate_keys`: a key given twice in a config file or in Snakemake's
  ``--config``.

A train experiment's run spec and schedule are built by :mod:`dpaudit.training.spec`, its grid
expanded by :mod:`dpaudit.pipeline.grid`.

The cross-key checks that build models, read the mechanism and analysis registries or run a
user's entry point import torch, SciPy or pandas inside their function: every Snakemake process
imports this package to fill in the defaults (tests/pipeline/test_workflow_imports.py).
"""

from __future__ import annotations

from dpaudit.config.errors import ConfigError
from dpaudit.config.loading import (
    default_estimator_config,
    load_config_file,
    validate_config,
)
from dpaudit.defaults import load_schema

__all__ = [
    "ConfigError",
    "default_estimator_config",
    "load_config_file",
    "load_schema",
    "validate_config",
]
