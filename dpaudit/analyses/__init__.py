"""Closed-form analyses (theory curves and tables of the papers) by name.

An analysis is a function ``f(**params) -> pandas.DataFrame`` returning a tidy table; the
``analysis`` rule writes it to CSV and the figure rule plots the columns the experiment's
``figure`` block names. The table maps names to ``module:function``; add one line to add one.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import pandas as pd

ANALYSES: dict[str, str] = {
    "one_run_correct_guesses": "dpaudit.analyses.one_run_theory:correct_guesses_curve",
    "one_run_ideal_epsilon": "dpaudit.analyses.one_run_theory:ideal_epsilon_curve",
    "one_run_randomized_response": "dpaudit.analyses.one_run_theory:randomized_response_curve",
    "one_run_gaussian_guesses": "dpaudit.analyses.one_run_theory:gaussian_guesses_curve",
    "one_run_gaussian_delta": "dpaudit.analyses.one_run_theory:gaussian_delta_curve",
    "one_run_max_attainable": "dpaudit.analyses.one_run_theory:max_attainable_table",
    "lidp_gaussian_correlations": "dpaudit.analyses.lidp_gaussian:correlation_curve",
    "lidp_gaussian_bias_variance": "dpaudit.analyses.lidp_gaussian:bias_variance_curve",
    "shuffle_fig3_references": "dpaudit.analyses.shuffling:fig3_reference_lines",
    "shuffle_calibrated_references": "dpaudit.analyses.shuffling:calibrated_reference_lines",
    "selection_example1": "dpaudit.analyses.selection:example1_curve",
    "selection_example1_law": "dpaudit.analyses.selection:example1_output_law",
    "selection_table3_epsilon_u": "dpaudit.analyses.selection:table3_epsilon_u",
    "selection_table4": "dpaudit.analyses.selection:table4",
    "selection_fig6_bounds": "dpaudit.analyses.selection:fig6_bounds",
    "tight_one_run_vs_n": "dpaudit.analyses.tight_one_run:versus_n",
    "tight_one_run_vs_r": "dpaudit.analyses.tight_one_run:versus_r",
    "tight_one_run_vs_delta": "dpaudit.analyses.tight_one_run:versus_delta",
    "tight_one_run_p_values": "dpaudit.analyses.tight_one_run:p_values",
}


def get(name: str) -> Callable[..., pd.DataFrame]:
    try:
        target = ANALYSES[name]
    except KeyError:
        raise ValueError(f"unknown analysis {name!r}; allowed: {sorted(ANALYSES)}") from None
    module, func = target.split(":")
    return getattr(importlib.import_module(module), func)


def run(name: str, params: dict[str, Any]) -> pd.DataFrame:
    return get(name)(**params)
