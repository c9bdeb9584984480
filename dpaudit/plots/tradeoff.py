"""Empirical trade-off curves of a multi-run audit against the curves its claim implies.

Annamalai, Balle, Hayes, De Cristofaro (2024, "To Shuffle or not to Shuffle: Auditing DP-SGD
with Shuffling", arXiv:2411.10614, §6.3.1, Figs. 4-5) compare the FPR-FNR curve of the
thresholded likelihood-ratio score over all thresholds (raw, and with Clopper-Pearson upper
bounds on both rates) with two curves of the claim: the trade-off function of
(epsilon, delta)-DP at the claimed epsilon, and the trade-off curve of DP-SGD with Poisson
sampling (the PLD of the accounted mechanism). A point of the bounded empirical curve below a
claim's curve is a violation of that claim at that threshold.

The empirical curve of a setting pools the runs of its score files in file order (seeds, then
shards); with ``runs`` the first n of them give one curve each, nested subsets as the paper's
10^3 and 10^4 models. The rule "score > threshold means IN" at every distinct score, as the
multi-run estimator (:func:`dpaudit.estimators.multi_run.definition.sweep`, the paper's Algorithm
5); each rate is bounded at ``rate_level(confidence)``, so each point holds at ``confidence`` (the
curve is pointwise, not simultaneous over thresholds: reading its best point is the paper's
same-data reading, not a valid bound).
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dpaudit.accounting.dpsgd import dpsgd_tradeoff, eps_delta_tradeoff
from dpaudit.estimators.multi_run.definition import cp_upper, epsilon_from_rates, rate_level, sweep
from dpaudit.keys import CLAIMED_EPSILON
from dpaudit.plots import pyplot
from dpaudit.plots.labels import wrap_label
from dpaudit.plots.style import (
    CLAIMED,
    PALETTE,
    REFERENCE,
    UNCORRECTED,
    legend,
    save,
    styled,
)
from dpaudit.scores import ScoreFile

#: At most this many points of an empirical curve are kept (evenly spaced thresholds).
MAX_POINTS = 4000
#: FPR grid of the claim curves.
CLAIM_GRID = np.linspace(0.0, 1.0, 1001)
#: The right panel zooms on FPR <= ZOOM (the paper's Figs. 4-5, right).
ZOOM = 0.2

EMPIRICAL = "empirical"
EPS_DELTA = "eps_delta"
POISSON_PLD = "poisson_pld"


def pooled_runs(files: Sequence[ScoreFile]) -> tuple[np.ndarray, np.ndarray]:
    """The runs of a setting's score files, in file order: (score, membership), 1-D."""
    if not files:
        raise ValueError("no score files")
    bad = [sf.source for sf in files if sf.meta.get("design") != "multi_run"]
    if bad:
        raise ValueError(f"a trade-off curve needs multi_run score files; not: {bad}")
    return (
        np.concatenate([sf.score.ravel() for sf in files]),
        np.concatenate([sf.membership.ravel() for sf in files]),
    )


def empirical_curve(
    score: np.ndarray, membership: np.ndarray, confidence: float, delta: float
) -> pd.DataFrame:
    """FPR and FNR (raw and Clopper-Pearson upper bounds, each rate at
    ``rate_level(confidence)``) at every threshold, with Eq. 1's epsilon of the bounded point;
    at most :data:`MAX_POINTS` rows (evenly spaced thresholds, both ends and the best kept)."""
    sw = sweep(score, membership)
    level = rate_level(confidence)
    a_up = cp_upper(sw.false_pos, sw.n_nonmembers, level)
    b_up = cp_upper(sw.false_neg, sw.n_members, level)
    eps = epsilon_from_rates(a_up, b_up, delta)
    keep = np.unique(
        np.r_[np.linspace(0, sw.threshold.size - 1, MAX_POINTS).astype(int), np.argmax(eps)]
    )
    return pd.DataFrame(
        {
            "threshold": sw.threshold[keep],
            "fpr": sw.false_pos[keep] / sw.n_nonmembers,
            "fnr": sw.false_neg[keep] / sw.n_members,
            "fpr_upper": a_up[keep],
            "fnr_upper": b_up[keep],
            "epsilon_at_threshold": eps[keep],
            "n_members": sw.n_members,
            "n_nonmembers": sw.n_nonmembers,
        }
    )


def _one_value(files: Sequence[ScoreFile], key: str) -> Any:
    """The meta value ``key`` that every score file of a setting shares."""
    values = {repr(sf.meta.get(key)) for sf in files}
    if len(values) != 1:
        raise ValueError(f"the score files of one setting differ in {key!r}: {sorted(values)}")
    return files[0].meta.get(key)


def tradeoff_table(
    files_by_setting: Mapping[str, Sequence[ScoreFile]],
    labels: Mapping[str, str],
    runs: Sequence[int] | None,
    confidence: float,
) -> pd.DataFrame:
    """The tidy table of the figure: for each setting and run count, its empirical curve
    (``curve`` = ``empirical``); for each distinct claim, the (epsilon, delta)-DP curve
    (``eps_delta``) and the Poisson DP-SGD PLD curve (``poisson_pld``, when the score files
    carry noise_multiplier, sample_rate and steps). ``below_eps_delta`` and ``below_poisson``
    mark bounded empirical points strictly below a claim curve (violations)."""
    parts, claims = [], {}
    for setting, files in files_by_setting.items():
        score, member = pooled_runs(files)
        delta = float(_one_value(files, "delta"))
        claimed = _one_value(files, CLAIMED_EPSILON)
        claim = (
            None if claimed is None else float(claimed),
            delta,
            _one_value(files, "noise_multiplier"),
            _one_value(files, "sample_rate"),
            _one_value(files, "steps"),
        )
        claims.setdefault(claim, None)
        counts = sorted(set(runs)) if runs else [score.size]
        for n in counts:
            if n > score.size:
                raise ValueError(
                    f"setting {setting!r}: {n} runs asked for, its score files hold {score.size}"
                )
            curve = empirical_curve(score[:n], member[:n], confidence, delta)
            curve.insert(0, "runs", int(n))
            curve.insert(0, "label", labels.get(setting, setting))
            curve.insert(0, "setting", setting)
            curve.insert(0, "curve", EMPIRICAL)
            curve[CLAIMED_EPSILON] = claim[0]
            curve["delta"] = delta
            curve["confidence"] = confidence
            if claim[0] is not None and math.isfinite(claim[0]):
                f = eps_delta_tradeoff(curve["fpr_upper"].to_numpy(), claim[0], delta)
                curve["below_eps_delta"] = curve["fnr_upper"].to_numpy() < f - 1e-12
            if None not in claim[2:]:
                f = dpsgd_tradeoff(curve["fpr_upper"].to_numpy(), *map(float, claim[2:4]), claim[4])
                curve["below_poisson"] = curve["fnr_upper"].to_numpy() < f - 1e-12
            parts.append(curve)
    for claimed, delta, sigma, q, steps in claims:
        if claimed is None or not math.isfinite(claimed):
            continue
        base = {"fpr": CLAIM_GRID, CLAIMED_EPSILON: claimed, "delta": delta}
        parts.append(
            pd.DataFrame(
                {"curve": EPS_DELTA, **base, "fnr": eps_delta_tradeoff(CLAIM_GRID, claimed, delta)}
            )
        )
        if None not in (sigma, q, steps):
            fnr = dpsgd_tradeoff(CLAIM_GRID, float(sigma), float(q), int(steps))
            parts.append(
                pd.DataFrame(
                    {
                        "curve": POISSON_PLD,
                        **base,
                        "fnr": fnr,
                        "noise_multiplier": sigma,
                        "sample_rate": q,
                        "steps": steps,
                    }
                )
            )
    table = pd.concat(parts, ignore_index=True)
    table["runs"] = table["runs"].astype("Int64")
    return table


#: The legend's words for the two empirical curves of a setting. The bounded curve is a
#: Clopper-Pearson bound at each threshold (at ``rate_level`` per rate): a valid bound per
#: point, not "uncorrected"; what it is not is simultaneous over the thresholds, and the legend
#: says so. The raw curve is the rates themselves, no bound at all.
RAW_TEXT = "raw rates (no confidence bound)"


def _confidence_text(confidence: float) -> str:
    """The bounded curve's label: its Clopper-Pearson level per rate, pointwise."""
    return (
        f"Clopper-Pearson upper bounds, {100 * rate_level(confidence):g}% per rate "
        "(pointwise, not simultaneous over thresholds)"
    )


def draw_tradeoff(table: pd.DataFrame, heading: str = "") -> Any:
    """Two panels (all FPRs; FPR <= :data:`ZOOM`): per empirical curve its raw FPR-FNR
    staircase (thin, dashed) and its Clopper-Pearson bounded curve (solid), the band between
    them shaded; the claim curves in black (PLD of Poisson DP-SGD) and grey ((epsilon,
    delta)-DP). Returns the matplotlib figure."""
    plt = pyplot()

    with styled():
        figure, axes = plt.subplots(1, 2, figsize=(8.0, 4.8))
        emp = table[table["curve"] == EMPIRICAL]
        keys = list(dict.fromkeys(zip(emp["setting"], emp["runs"], strict=True)))
        for ax in axes:
            for i, (setting, n) in enumerate(keys):
                c = emp[(emp["setting"] == setting) & (emp["runs"] == n)]
                color = PALETTE[i % len(PALETTE)]
                name = f"{c['label'].iloc[0]}, {int(n):,} runs"
                conf = _confidence_text(float(c["confidence"].iloc[0]))
                for fpr, fnr, style, label in (
                    ("fpr", "fnr", {"lw": 0.8, **UNCORRECTED}, f"{name}: {RAW_TEXT}"),
                    ("fpr_upper", "fnr_upper", {"lw": 1.4}, wrap_label(f"{name}: {conf}", 90)),
                ):
                    ax.step(c[fpr], c[fnr], where="post", color=color, **style, label=label)
                ax.fill_between(
                    c["fpr_upper"],
                    c["fnr_upper"],
                    np.interp(c["fpr_upper"], c["fpr"][::-1], c["fnr"][::-1]),
                    step="post",
                    color=color,
                    alpha=0.12,
                    lw=0,
                )
            for curve, style, text in (
                (POISSON_PLD, REFERENCE, "claim: DP-SGD (Poisson) PLD, ε = {eps:.3g}"),
                (EPS_DELTA, {**CLAIMED, "ls": "-."}, "claim: (ε, δ)-DP, ε = {eps:.3g}"),
            ):
                for eps, c in table[table["curve"] == curve].groupby(CLAIMED_EPSILON):
                    ax.plot(c["fpr"], c["fnr"], **style, label=text.format(eps=eps))
            ax.set_xlabel("false positive rate")
            ax.set_ylabel("false negative rate")
        axes[0].set_xlim(0, 1)
        axes[0].set_ylim(0, 1.02)
        axes[1].set_xlim(0, ZOOM)
        axes[1].set_ylim(0, 1.02)
        axes[1].set_title(f"zoom: FPR ≤ {ZOOM:g}", fontsize="small")
        if heading:
            figure.suptitle("\n".join(textwrap.wrap(heading, 100)))
        # below the panels: beside them it would squeeze the two panels (one column where the
        # labels are long, the figure made taller to hold it)
        legend(figure, axes[0], below=True)
    return figure


def plot_tradeoff(
    files_by_setting: Mapping[str, Sequence[ScoreFile]],
    labels: Mapping[str, str],
    runs: Sequence[int] | None,
    confidence: float,
    outputs: Sequence[str | Path],
    heading: str = "",
) -> pd.DataFrame:
    """Draw the trade-off figure to ``outputs`` (pdf, png); returns its table."""
    table = tradeoff_table(files_by_setting, labels, runs, confidence)
    save(draw_tradeoff(table, heading), outputs)
    return table
