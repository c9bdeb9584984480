"""The report's caption of each figure: what it shows, which paper figure it reproduces, and
what to look for. Made from the experiment block (its description, ``paper_target``,
``figure`` and kind), so that every figure, including ones added later, gets one."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from dpaudit.plots.labels import column_label

#: ``paper_target`` paper part -> the paper, as the references cite it.
PAPERS = {
    "one_run": "Steinke, Nasr and Jagielski (2023, arXiv:2305.08846)",
    "lidp": "Pillutla et al. (2023, arXiv:2305.18447)",
    "shuffling": "Annamalai et al. (auditing DP-SGD with shuffling)",
    "selection": "Xiang, Wang and Wang (auditing private hyper-parameter selection)",
    "tight_one_run": "Xiang et al. (2025, tight one-run auditing via f-DP)",
}

#: Description prefixes of experiments without a paper_target -> their paper (longest first).
_DESCRIPTION_PAPERS = (
    ("tight one run", "tight_one_run"),
    ("one run", "one_run"),
    ("lidp", "lidp"),
    ("shuffling", "shuffling"),
    ("selection", "selection"),
)

_FIGURE = re.compile(r"\b(Fig(?:ure)?s?\.?\s*\d+[a-z]?|Table\s*\d+|Example\s*\d+)")

_LOOK_FOR = {
    "eps": (
        "Look for: valid bounds (solid) at or below the grey line y = x, as the claim allows; "
        "a valid bound above it would reveal a bug in the privacy analysis or the "
        "implementation. The closer to the line, the tighter the audit. Dashed, lighter lines "
        "are uncorrected (the best of a grid, not a valid bound); the narrow right panel is the "
        "no-noise control, which should reach the largest bound."
    ),
    "audit": (
        "Look for: valid bounds (solid) below the claimed epsilon (grey) and close to it, or "
        "to the reference lines (black); dashed, lighter lines are uncorrected, not valid "
        "bounds; dotted lines are the no-noise control. Hollow stars are the values the paper "
        "prints: ours should lie on them, within the sampling error; hollow grey diamonds are "
        "values the paper prints for its own data and model, which a reduced config only "
        "stands in for (shown, not judged)."
    ),
    "analysis": (
        "Look for: the shape of the paper's curves; hollow stars are the values the paper "
        "prints, which our curves should pass through."
    ),
}


def paper_figure(experiment: Mapping[str, Any]) -> str:
    """Which paper figure the experiment reproduces ("" if none is named): the paper of its
    ``paper_target`` and the figure its description names."""
    target = experiment.get("paper_target") or ""
    paper = PAPERS.get(target.split("/")[0], target.split("/")[0]) if target else ""
    lowered = experiment.get("description", "").lower()
    for prefix, key in _DESCRIPTION_PAPERS:
        if not paper and lowered.startswith(prefix):
            paper = PAPERS[key]
    found = _FIGURE.findall(experiment.get("description", ""))
    figure = ", ".join(dict.fromkeys(found))
    if paper and figure:
        return f"{figure} of {paper}"
    return paper or figure


def _one_x(experiment: Mapping[str, Any]) -> bool:
    """Whether a train experiment's figure has one x value (its x is the target epsilon and it
    trains at one): :func:`dpaudit.plots.lines.draw_table` draws it as a dot chart."""
    fig = experiment.get("figure") or {}
    targets = (experiment.get("train") or {}).get("target_epsilons") or []
    return experiment["kind"] == "train" and fig.get("x") == "target_epsilon" and len(targets) == 1


def caption(experiment: Mapping[str, Any], name: str) -> str:
    """The caption (plain text, valid reStructuredText) of experiment ``name``'s figure."""
    kind = experiment["kind"]
    fig = experiment.get("figure") or {}
    description = experiment.get("description", "").strip()
    if kind == "analysis" and fig.get("categories"):
        shows = (
            "A categorical chart, one group per combination of "
            + ", ".join(column_label(c) for c in fig["categories"])
            + ": ours as filled markers (bars ±1 standard error), side by side, never joined; "
            "the paper's printed values as hollow markers of the same colour beside them."
        )
        look = "Look for: ours against the reference lines and beside the paper's values."
    elif kind == "analysis" and experiment.get("inputs"):
        shows = (
            "Computed from the audit tables of the experiments it gathers: the mean over "
            "seeds, bars one standard error."
        )
        look = _LOOK_FOR["analysis"]
    elif kind == "analysis":
        shows = "The closed-form curves of the paper's figure, computed by dpaudit."
        look = _LOOK_FOR["analysis"]
    elif kind == "train" and not fig.get("x"):
        shows = (
            "Empirical epsilon lower bound of each estimator and selection rule (mean over "
            "seeds; bars from the smallest to the largest seed) against the epsilon the "
            "accountant claims for each DP-SGD setting."
        )
        look = _LOOK_FOR["eps"]
    elif _one_x(experiment):
        x = column_label(fig["x"])
        shows = (
            f"Empirical epsilon lower bound at the one {x} of the experiment, as a dot chart: "
            "one row per setting, one marker per estimator and selection rule (mean over "
            "models and seeds, bars one standard error), the claims and references as "
            "vertical lines with their values."
        )
        look = _LOOK_FOR["audit"]
    else:
        x = column_label(fig.get("x") or "setting")
        shows = (
            f"Empirical epsilon lower bound (mean over seeds, bars one standard error) "
            f"against {x}, one line per estimator and selection rule."
        )
        look = _LOOK_FOR["audit"]
    parts = [f"**{description or name}**", shows]
    source = paper_figure(experiment)
    parts.append(f"Paper: {source}." if source else "Paper: none (an audit of dpaudit's own).")
    parts.append(look)
    if fig.get("caption"):
        parts.append(str(fig["caption"]).strip())
    return " ".join(p.replace("\n", " ") for p in parts)
