"""The claims and references drawn beside the audits of a line figure: the claimed epsilon
(and further claims, such as the tuned mechanism's epsilon_U of Papernot and Steinke, Xiang, Wang,
Wang 2024, arXiv:2402.13087, App. A.1, Theorem 1), the known reference values, the no-noise
control rows, and y-limits that keep a far-away claim from squeezing the data
(:func:`dpaudit.plots.lines.draw_table` draws them)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from dpaudit.keys import CLAIMED_EPSILON
from dpaudit.plots.labels import symbols

#: Legend labels of known ``reference_<name>`` columns (others: the name with spaces).
REFERENCE_LABELS = {
    "shuffle_lower_bound": "shuffle lower bound (Chua et al.)",
    # Xiang, Wang, Wang (2024, arXiv:2402.13087), Section 5.1: the reduced Gaussian game
    "reduced_game_exact": "ceiling: reduced game, exact ε (Sec. 5.1)",
    "reduced_game_rdp": "upper bound ε_U-O: reduced game via RDP (Alg. 3)",
    # LiDP Table 1 (Pillutla et al. 2023, arXiv:2305.18447): a factor of 1 saves no trials
    "no_gain": "factor 1: no trials saved",
}


#: Further claims of the same rows drawn beside the main one (``claimed_epsilon_<name>``
#: columns) -> legend label. Only these: other such columns (the Opacus engine's epsilon of
#: every accountant for one run) restate the main claim and are not drawn.
CLAIM_LABELS = {
    # Xiang, Wang, Wang (2024, arXiv:2402.13087), App. A.1, Theorem 1: the tuned mechanism's
    # claim epsilon_U
    "papernot_steinke": "claim of the tuned mechanism ε_U (Papernot-Steinke)",
}


#: The main claim's label in a train table that carries the tuned mechanism's claim: there the
#: main claim is the budget of one training run (``dpaudit.training.tuning``).
BASE_CLAIM_LABEL = "claim of one training run ε_B"


#: A claim line more than this many times above the data's top is left off the y range (the
#: legend gives its value): drawn, it would squeeze the data into the bottom of the axes.
CLAIM_SPAN = 3.0


def claim_columns(table: pd.DataFrame) -> list[str]:
    """The ``claimed_epsilon_<name>`` columns of :data:`CLAIM_LABELS` with a finite value."""
    return [
        f"claimed_epsilon_{name}"
        for name in CLAIM_LABELS
        if f"claimed_epsilon_{name}" in table.columns
        and np.isfinite(pd.to_numeric(table[f"claimed_epsilon_{name}"], errors="coerce")).any()
    ]


def claim_label(column: str, base_is_budget: bool, given: str | None = None) -> str:
    """The legend label of a claim column (``claimed_epsilon``, or one of
    :data:`CLAIM_LABELS`); ``base_is_budget``: the main claim is one training run's epsilon_B;
    ``given``: the config's ``figure.claim_label`` of the main claim (which bound it is)."""
    if column == CLAIMED_EPSILON:
        if given:
            return symbols(given)
        return BASE_CLAIM_LABEL if base_is_budget else "claimed ε"
    return CLAIM_LABELS[column[len("claimed_epsilon_") :]]


def reference_label(column: str) -> str:
    name = column[len("reference_") :]
    return REFERENCE_LABELS.get(name, name.replace("_", " "))


def plot_claimed(
    ax: Any, table: pd.DataFrame, x: str, column: str, label: str, style: dict
) -> Any:
    """One claim (``column``) in ``style``: a line along ``x`` where it has one value per ``x``
    (x is the target epsilon, or a swept mechanism parameter; a lone point gets a marker), else
    one horizontal line per value. Returns the first artist drawn (None if none)."""
    values = pd.to_numeric(table[column], errors="coerce")
    finite = table[np.isfinite(values)].assign(_claim=values[np.isfinite(values)])
    if finite.empty:
        return None
    per_x = finite.groupby(x)["_claim"].nunique()
    if (per_x <= 1).all():
        claimed = finite.groupby(x)["_claim"].mean().sort_index()
        marker = {"marker": style.get("marker") or "_", "ms": 10} if len(claimed) == 1 else {}
        (line,) = ax.plot(claimed.index, claimed.to_numpy(), label=label, **{**style, **marker})
        return line
    first = None
    for i, value in enumerate(sorted(finite["_claim"].round(6).unique())):
        line = ax.axhline(
            value, label=label if i == 0 else None, **{**style, "ls": style.get("ls", ":")}
        )
        first = first or line
    return first


def controls(table: pd.DataFrame) -> pd.Series:
    """Rows of the no-noise control (claimed epsilon infinite)."""
    if CLAIMED_EPSILON not in table.columns:
        return pd.Series(False, index=table.index)
    return ~np.isfinite(pd.to_numeric(table[CLAIMED_EPSILON], errors="coerce").fillna(0.0))


def y_limits(ax: Any, lo: float, hi: float, claims: Sequence[tuple[Any, float, float]]) -> None:
    """y-limits that bracket the data (``lo``..``hi``, error bars and the paper's values
    included) and each claim (``artist, lowest, highest`` of its values) whose lowest value lies
    within :data:`CLAIM_SPAN` of the data's top, drawn whole (a claim that rises along x, e.g.
    with the target epsilon, is never cut off at the top of the axes); a claim wholly further
    above keeps its lines out of view and its legend entry says so, with its largest value to three
    significant digits (a calibrated 15.9989 reads 16)."""
    if not np.isfinite(hi):
        return
    top = hi
    for artist, lowest, highest in claims:
        if hi <= 0 or lowest <= CLAIM_SPAN * hi:
            top = max(top, highest)
        elif artist is not None:
            artist.set_label(f"{artist.get_label()} = {highest:.3g} (above the axis)")
    bottom = min(0.0, lo)
    pad = 0.08 * (top - bottom) if top > bottom else 1.0
    ax.set_ylim(bottom - (pad if bottom < 0 else 0.0), top + pad)
