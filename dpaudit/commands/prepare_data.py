"""Deterministic subset/variant of a data set as one .npz with x_train, y_train, x_test, y_test,
x_canary, y_canary and a JSON meta (see docs/data.md).
"""

from __future__ import annotations

import argparse
import json
import sys

from dpaudit.data.prepare import DATASETS

HELP = "fetch a data set (checksums verified, optional mirror) and write the prepared .npz"


def arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--name", required=True, choices=DATASETS)
    p.add_argument(
        "--params", default="{}", help="JSON object of preparation params (docs/data.md)"
    )
    p.add_argument("--root", required=True, help="download/cache folder for the raw files")
    p.add_argument(
        "--mirror",
        action="append",
        help="local directory or file:// / http(s):// base URL replacing the network "
        "(repeat to give several, tried in order)",
    )
    p.add_argument("--out", required=True, help="output .npz path")
    p.add_argument("--json", action="store_true", help="print the file's meta as JSON")


def run(args: argparse.Namespace) -> int:
    from dpaudit.commands import emit
    from dpaudit.data.download import DownloadError
    from dpaudit.data.prepare import load_prepared, prepare_dataset

    try:
        params = json.loads(args.params)
    except json.JSONDecodeError as exc:
        raise ValueError(f"--params is not valid JSON: {exc}") from exc
    if not isinstance(params, dict):
        raise ValueError(f"--params must be a JSON object, got {args.params!r}")
    mirror = None
    if args.mirror:
        mirror = args.mirror[0] if len(args.mirror) == 1 else args.mirror
    try:
        prepare_dataset(args.name, params, args.root, mirror, args.out)
    except DownloadError as exc:
        print(f"dpaudit prepare-data: error: {exc}", file=sys.stderr)
        return 3
    _, meta = load_prepared(args.out)
    emit(
        meta,
        args.json,
        f"{args.out}: {meta['dataset']} train {meta['n_train']}, test {meta['n_test']}, "
        f"canary pool {meta['n_canary']}, {meta['num_classes']} classes, "
        f"input {meta['input_shape']}",
    )
    return 0
