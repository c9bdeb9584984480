"""Closed-form analyses (theory curves and tables of the papers) by name.

An analysis is a function ``f(**params) -> pandas.DataFrame`` returning a tidy table; the
``analysis`` rule writes it to CSV and the figure rule plots the columns the experiment's
``figure`` block names. :data:`ANALYSES` maps each name to the function; add one entry to add
one. The table holds the functions themselves, so the import-direction test sees every
dependency.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd

from dpaudit.analyses import (
    fdp_abstention_ideal,
    lidp_gaussian,
    lidp_sample_complexity,
    one_run_theory,
    selection,
    shuffling,
    tight_one_run,
)

ANALYSES: dict[str, Callable[..., pd.DataFrame]] = {
    "one_run_correct_guesses": one_run_theory.correct_guesses_curve,
    "one_run_ideal_epsilon": one_run_theory.ideal_epsilon_curve,
    "one_run_randomized_response": one_run_theory.randomized_response_curve,
    "one_run_gaussian_guesses": one_run_theory.gaussian_guesses_curve,
    "one_run_gaussian_delta": one_run_theory.gaussian_delta_curve,
    "one_run_max_attainable": one_run_theory.max_attainable_table,
    "lidp_gaussian_correlations": lidp_gaussian.correlation_curve,
    "lidp_gaussian_bias_variance": lidp_gaussian.bias_variance_curve,
    "lidp_table1": lidp_sample_complexity.table1,
    "audit_rows": lidp_sample_complexity.audit_rows,
    "shuffle_fig3_references": shuffling.fig3_reference_lines,
    "shuffle_calibrated_references": shuffling.calibrated_reference_lines,
    "selection_example1": selection.example1_curve,
    "selection_example1_law": selection.example1_output_law,
    "selection_table3_epsilon_u": selection.table3_epsilon_u,
    "selection_table4": selection.table4,
    "selection_fig6_bounds": selection.fig6_bounds,
    "tight_one_run_vs_n": tight_one_run.versus_n,
    "tight_one_run_vs_r": tight_one_run.versus_r,
    "tight_one_run_vs_delta": tight_one_run.versus_delta,
    "tight_one_run_p_values": tight_one_run.p_values,
    "fdp_abstention_table1": fdp_abstention_ideal.table1,
    "fdp_abstention_reconstruction": fdp_abstention_ideal.reconstruction_curve,
    "fdp_abstention_vs_m": fdp_abstention_ideal.versus_m,
    "fdp_abstention_vs_guesses": fdp_abstention_ideal.versus_guesses,
    "fdp_abstention_vs_delta_confidence": fdp_abstention_ideal.versus_delta_confidence,
}


def get(name: str) -> Callable[..., pd.DataFrame]:
    """The function of analysis ``name`` (a clear error naming the allowed ones otherwise)."""
    try:
        return ANALYSES[name]
    except KeyError:
        raise ValueError(f"unknown analysis {name!r}; allowed: {sorted(ANALYSES)}") from None


#: Analyses that read other experiments' audit tables (the experiment's ``inputs``).
READS_TABLES = frozenset({"lidp_table1", "audit_rows"})


def run(
    name: str, params: dict[str, Any], tables: dict[str, pd.DataFrame] | None = None
) -> pd.DataFrame:
    """Run analysis ``name`` with keyword parameters ``params`` (and ``tables``, experiment ->
    audit table, for the analyses of :data:`READS_TABLES`)."""
    if name in READS_TABLES:
        return get(name)(tables=tables or {}, **params)
    if tables:
        raise ValueError(f"analysis {name!r} reads no tables; got inputs {sorted(tables)}")
    return get(name)(**params)
