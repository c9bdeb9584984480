"""Idealised mechanisms by name: each returns a :class:`dpaudit.scores.ScoreFile`.

A mechanism is a function ``f(**params, seed=..., experiment=..., setting=...) -> ScoreFile``.
The table below maps names to ``module:function`` (imported lazily, so a mechanism's
dependencies load only when it runs). Add one line to add a mechanism.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import Any

from dpaudit.scores import ScoreFile, validate

MECHANISMS: dict[str, str] = {
    "lidp_gaussian": "dpaudit.mechanisms.lidp_gaussian:score_file",
    "one_run_gaussian": "dpaudit.mechanisms.one_run_ideal:gaussian_score_file",
    "one_run_rr": "dpaudit.mechanisms.one_run_ideal:randomized_response_score_file",
    "bgm": "dpaudit.mechanisms.batched_gaussian:bgm_score_file",
    "bgm_calibrated": "dpaudit.mechanisms.bgm_calibrated:bgm_calibrated_score_file",
    "selection_reduced_game": "dpaudit.analyses.selection:reduced_game_score_file",
}

#: The score-file design each mechanism writes (decides which estimators apply).
DESIGNS: dict[str, str] = {
    "lidp_gaussian": "lidp",
    "one_run_gaussian": "one_run",
    "one_run_rr": "one_run",
    "bgm": "multi_run",
    "bgm_calibrated": "multi_run",
    "selection_reduced_game": "multi_run",
}


def get(name: str) -> Callable[..., ScoreFile]:
    try:
        target = MECHANISMS[name]
    except KeyError:
        raise ValueError(f"unknown mechanism {name!r}; allowed: {sorted(MECHANISMS)}") from None
    module, func = target.split(":")
    return getattr(importlib.import_module(module), func)


#: Parameters every mechanism accepts (handled here, not by the mechanism).
COMMON_PARAMS = {
    "score_dtype": "on-disk dtype of the scores, float64 (default) or float32 (half the disk "
    "for large grids; see dpaudit.scores)",
}


def simulate(
    name: str, params: dict[str, Any], *, seed: int, experiment: str, setting: str
) -> ScoreFile:
    """Run mechanism ``name`` with ``params``; the score file carries experiment and setting."""
    params = dict(params)
    score_dtype = params.pop("score_dtype", None)
    sf = get(name)(**params, seed=seed, experiment=experiment, setting=setting)
    if score_dtype is not None:
        sf.meta["score_dtype"] = score_dtype
        validate(sf)
    return sf


def accepted_params(name: str) -> set[str] | None:
    """The parameter names mechanism ``name`` accepts (``None``: any, it takes ``**kwargs``)."""
    sig = inspect.signature(get(name))
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in sig.parameters.values()):
        return None
    return (set(sig.parameters) - {"seed", "experiment", "setting"}) | set(COMMON_PARAMS)
