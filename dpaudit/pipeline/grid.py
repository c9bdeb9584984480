"""A train experiment's grid expanded into the experiment blocks of its grid points.

:func:`grid_points` is what the config check (:mod:`dpaudit.config`) runs its train-block
checks on: one block per grid point of a train experiment's ``grid`` / ``points`` (the
experiment's own block, unnamed, without them), each with the point's values set
(:func:`dpaudit.pipeline.settings.apply_point`). A grid that cannot become audit-table columns
(a key that varies the settings themselves, two keys with the same last part, a column the table
already has, two points of one name) is a :class:`GridError` naming the key.
"""

from __future__ import annotations

from typing import Any

from dpaudit.defaults import SETTING_KEYS
from dpaudit.pipeline.settings import apply_point, train_points


class GridError(ValueError):
    """A train experiment's grid cannot be expanded (``dpaudit.config`` turns it into its
    ``ConfigError``); the message names the config key."""


def grid_points(exp: str, block: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(grid point name, the experiment block with its values set) of each point of train
    experiment ``exp``'s ``grid`` / ``points`` (one unnamed point, the block itself, without
    them, and for an experiment of another kind)."""
    from dpaudit.audit import RESERVED_COLUMNS  # pandas

    if block.get("kind") != "train":
        return [("", block)]
    varied = list(block.get("grid") or {})
    for point in block.get("points") or []:
        varied += [k for k in point if k not in varied]
    for key in varied:
        if key.partition(".")[2] in SETTING_KEYS and key.startswith("train."):
            raise GridError(
                f"config key experiments.{exp}.grid.{key}: the target epsilons are the settings "
                "of every grid point already; allowed: keys of dataset, model, canaries, train "
                f"other than {['train.' + k for k in SETTING_KEYS]}"
            )
    columns = [k.rsplit(".", 1)[-1] for k in varied]
    for key, column in zip(varied, columns, strict=True):
        if columns.count(column) > 1 or column in RESERVED_COLUMNS:
            taken = "another grid key" if columns.count(column) > 1 else "the table"
            raise GridError(
                f"config key experiments.{exp}.grid.{key}: its audit-table column {column!r} "
                f"(the key's last part) is taken by {taken}; "
                f"allowed: grid keys with distinct last parts, none of {sorted(RESERVED_COLUMNS)}"
            )
    try:
        points = train_points(block)
    except ValueError as err:
        raise GridError(f"config key experiments.{exp}.grid: {err}") from None
    return [(name, apply_point(block, point)) for name, point in points.items()]
