"""DP-SGD with canaries, one job: a shard of models trained at once by the vectorised engine, or
one model with Opacus (train.engine: opacus); writes one score file with one row per trained
model. See docs/training.md.
"""

from __future__ import annotations

import argparse
import json
import logging
import zipfile

from dpaudit.keys import CLAIMED_EPSILON

ALIASES = ["train"]
HELP = "train a shard of DP-SGD models with canaries and write its score file"


def arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--run",
        required=True,
        help="JSON/YAML file: design, threat_model, model, "
        "canaries, train, target_epsilon (null: no noise)",
    )
    p.add_argument(
        "--data", required=True, help="prepared data set (.npz from prepare-data) or 'synthetic'"
    )
    p.add_argument("--out", required=True, help="score file to write (.npz)")
    p.add_argument("--experiment", default="cli")
    p.add_argument("--setting", default="default")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--shard", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    p.add_argument("--device", default="cpu", help="cpu (default), cuda or auto")
    p.add_argument(
        "--max-physical-batch",
        type=int,
        default=None,
        help="examples per model through the model at once (compute.max_physical_batch); "
        "larger batches are processed in chunks, with the noise added once per step "
        "(default: the whole batch)",
    )
    p.add_argument("--no-progress", action="store_true", help="no tqdm progress bar")


def read_run_spec(path: str) -> dict:
    """The run file's mapping; a YAML error, a non-mapping, an unknown key or a block
    (``model``, ``canaries``, ``train``) that is not a mapping raises ``ValueError`` naming the
    file and key."""
    from dpaudit.config.duplicate_keys import check_duplicate_keys
    from dpaudit.io import read_yaml
    from dpaudit.training.job import RUN_SPEC_KEYS

    spec = read_yaml(path)  # a syntax error names the file, the line and the column
    check_duplicate_keys(path)  # a key given twice names the file and both lines
    if not isinstance(spec, dict):
        raise ValueError(f"{path}: expected a mapping of run parameters")
    allowed = set(RUN_SPEC_KEYS)
    unknown = sorted(set(spec) - allowed)
    if unknown:
        raise ValueError(f"{path}: unknown key(s) {unknown}; allowed: {sorted(allowed)}")
    for block in ("model", "canaries", "train"):
        if block in spec and not isinstance(spec[block], dict):
            raise ValueError(f"{path}: '{block}' must be a mapping, got {spec[block]!r}")
    return spec


def run(args: argparse.Namespace) -> int:
    import torch

    from dpaudit.training.job import train_job
    from dpaudit.training.shard import score_summary

    torch.set_num_threads(args.threads)
    if not logging.getLogger().handlers:  # say on stderr when a checkpoint is resumed or dropped
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    spec = read_run_spec(args.run)
    sf = train_job(
        _read_data(args.data),
        experiment=args.experiment,
        setting=args.setting,
        seed=args.seed,
        shard=args.shard,
        run_spec=spec,
        out=args.out,
        device=args.device,
        max_physical_batch=args.max_physical_batch,
        progress=not args.no_progress,
        observations=True,
    )
    print(
        json.dumps(
            {
                "out": str(args.out),
                "trials": sf.n_trials,
                "canaries": sf.n_canaries,
                CLAIMED_EPSILON: sf.meta[CLAIMED_EPSILON],
                "sampler": sf.meta["sampler"],
                "test_accuracy": sf.meta["test_accuracy"],
                **score_summary(sf),
            }
        )
    )
    return 0


def _read_data(name: str) -> dict:
    """The prepared data set at ``name``, or the synthetic one for ``synthetic``."""
    if name == "synthetic":
        from dpaudit.data.synthetic import make_synthetic

        return make_synthetic()
    from dpaudit.data.prepare import load_prepared

    try:
        return load_prepared(name)[0]
    except zipfile.BadZipFile as exc:
        raise ValueError(f"{name}: not a readable prepared data set ({exc})") from exc
