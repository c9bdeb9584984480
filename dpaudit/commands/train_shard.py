"""``dpaudit train-shard``: train one shard of DP-SGD models with canaries, write its score file.

The run is described by a JSON or YAML file with the keys of :func:`dpaudit.training.shard.
run_shard` (``design``, ``threat_model``, ``model``, ``canaries``, ``train``,
``target_epsilon``) and a prepared data set (``dpaudit prepare-data``) or ``synthetic``; keys
left out take the config schema's defaults, as in the pipeline.
A checkpoint beside the output lets a killed job resume (logged on stderr); one of another run
or an unreadable one is discarded with a warning; it is removed once the score file is
written. Per-step observations (``per_step_dot``) go to ``<output>.observations.npz``.
"""

from __future__ import annotations

import argparse
import json
import logging
import zipfile
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "train-shard",
        help="train a shard of DP-SGD models with canaries and write its score file",
        description="Vectorised DP-SGD (many small models at once) with canaries; writes one "
        "score file with one row per trained model. See docs/training.md.",
    )
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
    p.add_argument("--no-progress", action="store_true", help="no tqdm progress bar")
    p.set_defaults(func=run)


def read_run_spec(path: str) -> dict:
    """The run file's mapping; a YAML error, a non-mapping, an unknown key or a block
    (``model``, ``canaries``, ``train``) that is not a mapping raises ``ValueError`` naming the
    file and key."""
    from dpaudit.io import read_yaml

    spec = read_yaml(path)  # a syntax error names the file, the line and the column
    if not isinstance(spec, dict):
        raise ValueError(f"{path}: expected a mapping of run parameters")
    allowed = {"design", "threat_model", "model", "canaries", "train", "target_epsilon"}
    unknown = sorted(set(spec) - allowed)
    if unknown:
        raise ValueError(f"{path}: unknown key(s) {unknown}; allowed: {sorted(allowed)}")
    for block in ("model", "canaries", "train"):
        if block in spec and not isinstance(spec[block], dict):
            raise ValueError(f"{path}: '{block}' must be a mapping, got {spec[block]!r}")
    return spec


def run(args: argparse.Namespace) -> int:
    import numpy as np
    import torch

    from dpaudit import scores
    from dpaudit.defaults import fill_defaults, train_experiment_defaults
    from dpaudit.io import atomic_path
    from dpaudit.training.shard import run_shard, score_summary

    torch.set_num_threads(args.threads)
    if not logging.getLogger().handlers:  # say on stderr when a checkpoint is resumed or dropped
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    spec = read_run_spec(args.run)
    if args.data == "synthetic":
        from dpaudit.data.synthetic import make_synthetic

        data = make_synthetic()
    else:
        from dpaudit.data.prepare import load_prepared

        try:
            data = load_prepared(args.data)[0]
        except zipfile.BadZipFile as exc:
            raise ValueError(f"{args.data}: not a readable prepared data set ({exc})") from exc
    defaults = train_experiment_defaults()  # the schema's, as the pipeline fills them
    out = Path(args.out)
    ckpt = out.with_name(out.name + ".ckpt")
    result = run_shard(
        data,
        experiment=args.experiment,
        setting=args.setting,
        seed=args.seed,
        shard=args.shard,
        design=spec.get("design", defaults["design"]),
        threat_model=spec.get("threat_model", defaults["threat_model"]),
        model=fill_defaults("model", spec.get("model") or {}),
        canaries=spec.get("canaries") or {},  # run_shard fills the schema's defaults
        train=spec.get("train") or {},
        target_epsilon=spec.get("target_epsilon"),
        checkpoint=ckpt,
        progress=not args.no_progress,
    )
    scores.write(out, result.score_file)
    if result.observations:
        obs = out.with_name(out.name.removesuffix(".npz") + ".observations.npz")
        with atomic_path(obs) as tmp, open(tmp, "wb") as fh:
            np.savez(fh, **result.observations)
    if ckpt.exists():
        ckpt.unlink()
    meta = result.score_file.meta
    print(
        json.dumps(
            {
                "out": str(out),
                "trials": result.score_file.n_trials,
                "canaries": result.score_file.n_canaries,
                "claimed_epsilon": meta["claimed_epsilon"],
                "sampler": meta["sampler"],
                "test_accuracy": meta["test_accuracy"],
                **score_summary(result.score_file),
            }
        )
    )
    return 0
