"""Idealised mechanisms by name: each returns a :class:`dpaudit.scores.ScoreFile`.

A mechanism is a function ``f(**params, seed=..., experiment=..., setting=...) -> ScoreFile``.
:data:`MECHANISMS` maps each name to the function and the score-file design it writes (which
decides the estimators that apply); add one entry to add a mechanism. The table holds the
functions themselves, so the import-direction test sees every dependency.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dpaudit.keys import SCORE_DTYPE
from dpaudit.mechanisms.batched_gaussian import bgm_score_file
from dpaudit.mechanisms.bgm_calibrated import bgm_calibrated_score_file
from dpaudit.mechanisms.lidp_gaussian import score_file as lidp_gaussian_score_file
from dpaudit.mechanisms.one_run_ideal import (
    gaussian_score_file,
    randomized_response_score_file,
)
from dpaudit.mechanisms.selection_game import reduced_game_score_file
from dpaudit.scores import DESIGNS as SCORE_DESIGNS
from dpaudit.scores import ScoreFile, validate


@dataclass(frozen=True)
class Mechanism:
    """A registered mechanism: the function and the design of the score files it writes."""

    run: Callable[..., ScoreFile]
    design: str

    def __post_init__(self) -> None:
        if self.design not in SCORE_DESIGNS:
            raise ValueError(f"design {self.design!r}; allowed: {list(SCORE_DESIGNS)}")


MECHANISMS: dict[str, Mechanism] = {
    "lidp_gaussian": Mechanism(lidp_gaussian_score_file, "lidp"),
    "one_run_gaussian": Mechanism(gaussian_score_file, "one_run"),
    "one_run_rr": Mechanism(randomized_response_score_file, "one_run"),
    "bgm": Mechanism(bgm_score_file, "multi_run"),
    "bgm_calibrated": Mechanism(bgm_calibrated_score_file, "multi_run"),
    "selection_reduced_game": Mechanism(reduced_game_score_file, "multi_run"),
}

#: The score-file design each mechanism writes (derived from :data:`MECHANISMS`).
MECHANISM_DESIGNS: dict[str, str] = {name: m.design for name, m in MECHANISMS.items()}


def get(name: str) -> Callable[..., ScoreFile]:
    """The function of mechanism ``name`` (a clear error naming the allowed ones otherwise)."""
    try:
        return MECHANISMS[name].run
    except KeyError:
        raise ValueError(f"unknown mechanism {name!r}; allowed: {sorted(MECHANISMS)}") from None


#: Parameters every mechanism accepts (handled here, not by the mechanism).
COMMON_PARAMS = {
    SCORE_DTYPE: "on-disk dtype of the scores, float64 (default) or float32 (half the disk "
    "for large grids; see dpaudit.scores)",
}


def simulate(
    name: str, params: dict[str, Any], *, seed: int, experiment: str, setting: str
) -> ScoreFile:
    """Run mechanism ``name`` with ``params``; the score file carries experiment and setting."""
    params = dict(params)
    score_dtype = params.pop(SCORE_DTYPE, None)
    sf = get(name)(**params, seed=seed, experiment=experiment, setting=setting)
    if score_dtype is not None:
        sf.meta[SCORE_DTYPE] = score_dtype
        validate(sf)
    return sf


def accepted_params(name: str) -> set[str] | None:
    """The parameter names mechanism ``name`` accepts (``None``: any, it takes ``**kwargs``)."""
    sig = inspect.signature(get(name))
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in sig.parameters.values()):
        return None
    return (set(sig.parameters) - {"seed", "experiment", "setting"}) | set(COMMON_PARAMS)
