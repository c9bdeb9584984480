"""The practitioner's verdict figure: per implementation, its valid lower bound against its claim.

One row per row of :func:`dpaudit.verdict.verdict_table` (the verdict rules and their words are
:mod:`dpaudit.verdict`'s; this module only draws): a dot at the largest valid epsilon
lower bound that assumes no trade-off family the score files do not declare (filled and orange
when it exceeds the claimed epsilon, i.e. the implementation is flagged; hollow and blue
otherwise: not flagged, no evidence at these runs), a grey tick at the claimed epsilon, and a
black cross at the known theoretical lower bound on the implementation's epsilon where there is
one (the table's ``shuffle_lower_bound``, Chua et al. 2024). The title states the table's
family-wise confidence (``familywise_confidence``: every flag of the table at once). It is the
bar chart of Annamalai, Balle, Hayes, De Cristofaro (2024, arXiv:2411.10614, §7, Figs. 8-9)
read as a verdict: which data loaders deliver the epsilon they report.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dpaudit.keys import CLAIMED_EPSILON, EPSILON_LOWER_BOUND
from dpaudit.plots import pyplot
from dpaudit.plots.labels import confidence_text, value_label
from dpaudit.plots.style import CLAIMED, PALETTE, REFERENCE, legend, save, styled, title
from dpaudit.verdict import FLAGGED_LEGEND, NO_VERDICT_MARK, NOT_FLAGGED_LEGEND

FLAGGED_COLOR = PALETTE[1]
NOT_FLAGGED_COLOR = PALETTE[0]


def with_implementation(
    verdicts: pd.DataFrame,
    by: Sequence[str],
    labels: Mapping[str, Mapping[str, str]] | None = None,
) -> pd.DataFrame:
    """The verdict table with an ``implementation`` column after its ``by`` columns: the
    display names of each row's ``by`` values (:func:`dpaudit.plots.labels.value_label`, with
    the config's ``figure.labels``), e.g. "partial shuffle, buffer size = 50"."""
    names = [
        ", ".join(t for c in by if (t := value_label(c, row[c], labels)))
        for _, row in verdicts.iterrows()
    ]
    out = verdicts.copy()
    out.insert(len(by), "implementation", names)
    return out


def row_labels(verdicts: pd.DataFrame) -> list[str]:
    """The y-axis label of each row: the implementation, with the claim where several differ,
    and "(no verdict)" where no row may decide one (the table's ``verdict`` says why)."""
    several = verdicts[CLAIMED_EPSILON].nunique() > 1
    return [
        (
            f"{r.implementation} (claimed ε = {r.claimed_epsilon:.3g})"
            if several
            else r.implementation
        )
        + ("" if np.isfinite(r.epsilon_lower_bound) else f" {NO_VERDICT_MARK}")
        for r in verdicts.itertuples()
    ]


def draw_verdicts(verdicts: pd.DataFrame, heading: str = "") -> Any:
    """The verdict figure of a verdict table with its ``implementation`` column
    (:func:`with_implementation`); returns the matplotlib figure."""
    plt = pyplot()

    if verdicts.empty:
        raise ValueError("the verdict table has no rows: no valid bound to draw")
    with styled():
        height = max(2.0, 0.9 + 0.32 * len(verdicts))
        figure, ax = plt.subplots(figsize=(6.4, height))
        y = list(range(len(verdicts)))[::-1]
        bound = verdicts[EPSILON_LOWER_BOUND].to_numpy(dtype=float)
        flagged = verdicts["flagged"].astype(bool).to_numpy()
        has_bound = np.isfinite(bound)  # a row with no usable bound says why in its verdict
        claimed = verdicts[CLAIMED_EPSILON].to_numpy()
        ax.plot(claimed, y, ls="none", marker="|", ms=14, mew=1.5, color=CLAIMED["color"])
        ax.plot(
            [], [], ls="none", marker="|", ms=7, mew=1.5, color=CLAIMED["color"], label="claimed ε"
        )
        for mask, color, face, text in (
            (flagged, FLAGGED_COLOR, FLAGGED_COLOR, FLAGGED_LEGEND),
            (~flagged & has_bound, NOT_FLAGGED_COLOR, "none", NOT_FLAGGED_LEGEND),
        ):
            if mask.any():
                ax.scatter(
                    bound[mask],
                    [v for v, m in zip(y, mask, strict=True) if m],
                    s=36,
                    facecolors=face,
                    edgecolors=color,
                    zorder=3,
                    label=text,
                )
        known = (
            verdicts["shuffle_lower_bound"].to_numpy(dtype=float)
            if "shuffle_lower_bound" in verdicts
            else np.full(len(verdicts), np.nan)
        )
        if np.isfinite(known).any():
            ax.plot(
                known, y, ls="none", marker="x", ms=7, color=REFERENCE["color"],
                label="theoretical lower bound on the true ε (Chua et al.)",
            )  # fmt: skip
        ax.set_yticks(y)
        ax.set_yticklabels(row_labels(verdicts))
        joint = sorted(set(verdicts["joint_confidence"].dropna().round(6))) or [1.0]
        at_least = "" if len(joint) == 1 else "at least "
        ax.set_xlabel(
            f"ε lower bound ({at_least}{confidence_text(joint[0])} confidence per implementation)"
        )
        top = float(np.nanmax(np.concatenate([bound, claimed, known])))
        ax.set_xlim(-0.03 * top, 1.08 * top)
        ax.set_ylim(-0.6, len(verdicts) - 0.4)
        if "familywise_confidence" in verdicts:
            every = confidence_text(float(verdicts["familywise_confidence"].iloc[0]))
            family = f"all flags at once: {every} confidence"
            # one parenthesis, not two in a row, when the heading ends with its own
            if heading.rstrip().endswith(")"):
                heading = f"{heading.rstrip()[:-1]}; {family})"
            else:
                heading = f"{heading} ({family})".strip()
        title(ax, heading, width=45)
        legend(figure, ax)
    return figure


def plot_verdicts(verdicts: pd.DataFrame, outputs: Sequence[str | Path], heading: str = "") -> None:
    """Draw the verdict figure to ``outputs`` (pdf, png)."""
    save(draw_verdicts(verdicts, heading), outputs)
