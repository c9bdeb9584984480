"""A train experiment's grid expanded into the blocks of its grid points
(:mod:`dpaudit.pipeline.grid`, issue 38: grid expansion beside the settings model, the config
check reading it)."""

from __future__ import annotations

import pytest

from dpaudit.pipeline.grid import GridError, grid_points


def _train(**over) -> dict:
    block = {"kind": "train", "canaries": {"m": 10}, "train": {"steps": 5, "lr": 0.1}}
    block.update(over)
    return block


def test_no_grid_is_one_unnamed_point_and_other_kinds_are_not_expanded():
    block = _train()
    assert grid_points("e", block) == [("", block)]
    sim = {"kind": "simulate", "grid": {"sigma": [1.0, 2.0]}}
    assert grid_points("e", sim) == [("", sim)]


def test_grid_and_points_set_their_keys_on_copies_of_the_block():
    block = _train(grid={"canaries.m": [10, 20]}, points=[{"train.steps": 5}, {"train.steps": 7}])
    points = grid_points("e", block)
    assert [name for name, _ in points] == ["steps5_m10", "steps5_m20", "steps7_m10", "steps7_m20"]
    name, effective = points[3]
    assert effective["canaries"] == {"m": 20} and effective["train"] == {"steps": 7, "lr": 0.1}
    assert "grid" not in effective and "points" not in effective
    assert block["canaries"] == {"m": 10} and block["train"]["steps"] == 5  # not changed


@pytest.mark.parametrize(
    "grid, key, says",
    [
        ({"train.target_epsilons": [[1.0]]}, "grid.train.target_epsilons", "settings"),
        ({"canaries.m": [1], "dataset.m": [2]}, "grid.canaries.m", "another grid key"),
        ({"dataset.seed": [1, 2]}, "grid.dataset.seed", "taken by the table"),
    ],
)
def test_a_grid_that_cannot_become_table_columns_is_an_error_naming_the_key(grid, key, says):
    with pytest.raises(GridError, match=f"config key experiments.e.{key}: .*{says}"):
        grid_points("e", _train(grid=grid))


def test_two_points_of_one_name_are_an_error_naming_the_grid():
    block = _train(points=[{"train.lr": 0.1}, {"train.lr": 0.1}])
    with pytest.raises(GridError, match="config key experiments.e.grid: grid points .* both named"):
        grid_points("e", block)
