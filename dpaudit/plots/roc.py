"""ROC curves of the membership test, one per setting, on log-log axes.

The membership-inference literature draws the ROC curve on log-log axes so that the low-FPR
region, where a strong attack differs from a weak one, is visible (Carlini et al. 2022,
"Membership inference attacks from first principles", arXiv:2112.03570, Sec. III, Fig. 1). The
curve of a setting pools the IN and OUT scores of all its score files (seeds, shards, trials):
the rule "score >= t means IN" at every distinct score t, as in
:mod:`dpaudit.estimators.attack_metrics.metrics` (whose AUROC the legend reports).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dpaudit.estimators.attack_metrics.metrics import roc_counts, sort_scores
from dpaudit.plots import pyplot
from dpaudit.plots.style import CLAIMED, PALETTE, legend, save, styled, title
from dpaudit.scores import ScoreFile

#: At most this many points of a curve are drawn (log-spaced in FPR; the staircase's corners).
MAX_POINTS = 2000


@dataclass(frozen=True)
class RocCurve:
    """One curve: its label, claimed epsilon, the (FPR, TPR) points and the AUROC."""

    label: str
    claimed_epsilon: float
    fpr: np.ndarray
    tpr: np.ndarray
    auroc: float
    n_in: int
    n_out: int


def roc_points(score: np.ndarray, member: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(FPR, TPR) at every distinct threshold, from (0, 0) to (1, 1), FPR non-decreasing."""
    s = sort_scores(score, member)
    tp, fp = roc_counts(s, np.ones((1, s.is_in.size)))
    return fp[0] / fp[0, -1], tp[0] / tp[0, -1]


def auroc_of(fpr: np.ndarray, tpr: np.ndarray) -> float:
    """Area under the ROC polyline (trapezoids; ties count 1/2)."""
    return float(np.sum(np.diff(fpr) * (tpr[1:] + tpr[:-1]) / 2))


def thin(fpr: np.ndarray, tpr: np.ndarray, points: int = MAX_POINTS) -> tuple[np.ndarray, ...]:
    """At most about ``points`` of the curve's points: for each of log-spaced FPR levels, the
    highest point at or below it (the curve's upper envelope there), plus both ends."""
    if fpr.size <= points:
        return fpr, tpr
    positive = fpr[fpr > 0]
    levels = np.geomspace(positive.min(), 1.0, points)
    idx = np.searchsorted(fpr, levels * (1 + 1e-12), side="right") - 1
    idx = np.unique(np.r_[0, idx, fpr.size - 1])
    return fpr[idx], tpr[idx]


def _claimed(files: Sequence[ScoreFile]) -> float:
    values = {sf.claimed_epsilon for sf in files}
    return values.pop() if len(values) == 1 else float("nan")


def _eps_text(eps: float) -> str:
    if math.isnan(eps):
        return "claimed ε varies"
    return "no noise: no guarantee" if math.isinf(eps) else f"claimed ε {eps:.3g}"


def curves_of(files_by_setting: Mapping[str, Sequence[ScoreFile]]) -> list[RocCurve]:
    """One pooled curve per setting, every one labelled alike by the setting's name and its
    claimed epsilon ("eps1 (claimed ε 0.993)": the name says the target, the claim what the
    accountant gives at the calibrated noise), ordered by claimed epsilon. A setting none of
    whose canaries was IN, the no-canary control ``canaries.insert: none``, has no ROC curve and
    is left out; one whose canaries are all IN is an error naming it."""
    claimed = {name: _claimed(files) for name, files in files_by_setting.items()}
    curves = []
    for name, files in files_by_setting.items():
        if not files:
            raise ValueError(f"setting {name!r}: no score files")
        score = np.concatenate([sf.score.ravel() for sf in files])
        member = np.concatenate([sf.membership.ravel() for sf in files])
        if not member.any():
            continue
        try:
            fpr, tpr = roc_points(score, member)
        except ValueError as exc:
            raise ValueError(f"setting {name!r} ({files[0].source}): {exc}") from exc
        eps = claimed[name]
        label = f"{name} ({_eps_text(eps)})"
        n_in = int(member.sum())
        curves.append(RocCurve(label, eps, fpr, tpr, auroc_of(fpr, tpr), n_in, member.size - n_in))
    return sorted(curves, key=lambda c: (math.isnan(c.claimed_epsilon), c.claimed_epsilon))


def draw_roc(curves: Sequence[RocCurve], heading: str = "") -> Any:
    """The log-log ROC figure of ``curves`` (returns the matplotlib figure): a line per curve
    (legend: label and AUROC), the chance diagonal TPR = FPR in the claimed-line grey. Points
    with FPR or TPR 0 lie off the log axes; the axes start at the smallest positive FPR."""
    plt = pyplot()

    with styled():
        figure, ax = plt.subplots()
        low = 1.0
        for i, c in enumerate(curves):
            fpr, tpr = thin(c.fpr, c.tpr)
            keep = (fpr > 0) & (tpr > 0)
            if keep.any():
                low = min(low, float(fpr[keep].min()), float(tpr[keep].min()))
            ax.plot(
                fpr[keep],
                tpr[keep],
                color=PALETTE[i % len(PALETTE)],
                label=f"{c.label}, AUROC {c.auroc:.3f}",
            )
        low = max(min(low, 0.1), 1e-7)
        ax.plot([low, 1], [low, 1], **{**CLAIMED, "ls": "--"}, label="chance (TPR = FPR)")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(low, 1.0)
        ax.set_ylim(low, 1.05)
        ax.set_xlabel("false positive rate")
        ax.set_ylabel("true positive rate")
        title(ax, heading)
        legend(figure, ax)
    return figure


def plot_roc(
    files_by_setting: Mapping[str, Sequence[ScoreFile]],
    outputs: Sequence[str | Path],
    heading: str = "",
) -> list[RocCurve]:
    """Draw the ROC figure of the settings' score files to ``outputs``; returns the curves."""
    curves = curves_of(files_by_setting)
    save(draw_roc(curves, heading), outputs)
    return curves
