"""Figure kinds: the figures of an experiment that one rule (``figure_kind``, rules/figures.smk)
and one adapter (scripts/plot_kind.py) draw, from the entries of :data:`FIGURE_KINDS`.

A figure kind is a figure of every experiment of some kinds (train, simulate), drawn from its
score files or its audit table. Its entry holds what the pipeline needs: which experiments get
it, what it reads, its ``params:``, its caption in the report and the function that draws it.
The rest follows from its name: its files ``results/<experiment>/figures/<kind>.{pdf,png}``
(:func:`dpaudit.pipeline.paths.figure`), its log ``logs/<experiment>/figure_<kind>.log``, its
benchmark ``results/<experiment>/benchmarks/figure_<kind>/<kind>.tsv``, the wildcard
constraints of the rule and the default target (:func:`dpaudit.pipeline.targets.all_targets`).

Adding a kind: its drawing in ``dpaudit/plots/<kind>.py`` and its entry here. The figures of
rules of their own are not kinds: the line figure of a table and the claimed-vs-empirical
epsilon figure (published under a paper name, ``paper_target``), the verdict and trade-off
figures (which write a table too and have a config block of their own).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Config = dict[str, Any]

#: What a kind reads: every score file of the experiment (the job's input ``scores``), or its
#: audit table (the job's input ``table``).
SCORES = "scores"
TABLE = "table"


@dataclass(frozen=True)
class FigureKind:
    """One figure kind.

    ``experiments``: the experiment kinds that get it; ``reads``: :data:`SCORES` or
    :data:`TABLE`; ``params``: its ``params.figure``, from the validated config and the
    experiment's name (a mapping of plain values); ``caption``: its caption in the report
    (reStructuredText, ``{experiment}`` replaced by the experiment's name); ``draw``:
    ``draw(inputs, outputs, params, log)`` with the job's named inputs, its ``[pdf, png]``,
    its ``params.figure`` and its logger (the library's drawing is imported inside, so that
    the Snakefile does not import matplotlib)."""

    experiments: tuple[str, ...]
    reads: str
    params: Callable[[Config, str], dict[str, Any]]
    caption: str
    draw: Callable[[Any, Sequence[str], Mapping[str, Any], logging.Logger], None]


def figure_title(config: Config, experiment: str) -> dict[str, Any]:
    """``{"title": ...}``: ``figure.title``, else the short title of the description
    (:func:`dpaudit.plots.labels.short_title`)."""
    from dpaudit.plots.labels import short_title

    exp = config["experiments"][experiment]
    title = (exp.get("figure") or {}).get("title")
    return {"title": short_title(exp.get("description", "")) if title is None else title}


def scores_by_setting(paths: Sequence[str]) -> dict[str, list[Any]]:
    """The score files at ``paths``, read and checked against their paths
    (:func:`dpaudit.pipeline.paths.read_score_file`), grouped by setting in the order given."""
    from dpaudit.pipeline.paths import parse_score_file, read_score_file

    by_setting: dict[str, list[Any]] = {}
    for path in paths:
        by_setting.setdefault(parse_score_file(path)["setting"], []).append(read_score_file(path))
    return by_setting


def draw_roc(
    inputs: Any, outputs: Sequence[str], params: Mapping[str, Any], log: logging.Logger
) -> None:
    """The ROC curves (log-log) of an experiment's score files, a curve per setting
    (:func:`dpaudit.plots.roc.plot_roc`)."""
    from dpaudit.plots.roc import plot_roc

    curves = plot_roc(scores_by_setting(inputs.scores), list(outputs), params["title"])
    for c in curves:
        log.info("%s: %d IN, %d OUT, AUROC %.4f", c.label, c.n_in, c.n_out, c.auroc)


ROC_CAPTION = """\
ROC curves of the membership test of experiment **{experiment}**, on
log-log axes: one curve per setting (labelled by its claimed epsilon), pooling the IN and OUT
scores of all its seeds and trials, with the rule "score >= threshold means IN"; the legend
gives each curve's AUROC. The dashed grey diagonal is chance (TPR = FPR). Look for: curves far
above the diagonal at low false positive rates (strong evidence of membership leakage), and
curves ordered by the claimed epsilon (more privacy, closer to chance). The audit table's
``attack_metrics`` rows give the same AUROC and the TPR at fixed FPRs with bootstrap intervals.
"""

#: Every figure kind, by name (the name of its files, :func:`dpaudit.pipeline.paths.figure`).
FIGURE_KINDS: dict[str, FigureKind] = {
    "roc": FigureKind(
        experiments=("train", "simulate"),
        reads=SCORES,
        params=figure_title,
        caption=ROC_CAPTION,
        draw=draw_roc,
    ),
}


def figure_kind(kind: str) -> FigureKind:
    """The entry of ``kind`` (an unknown name is an error naming the known ones)."""
    try:
        return FIGURE_KINDS[kind]
    except KeyError:
        raise ValueError(
            f"unknown figure kind {kind!r}: the kinds are {sorted(FIGURE_KINDS)} "
            "(dpaudit/pipeline/figure_kinds.py)"
        ) from None


def kinds_of(config: Config, experiment: str) -> list[str]:
    """The figure kinds an experiment gets, in the order of :data:`FIGURE_KINDS`."""
    exp_kind = config["experiments"][experiment]["kind"]
    return [name for name, k in FIGURE_KINDS.items() if exp_kind in k.experiments]


def kind_pattern() -> str:
    """A wildcard pattern matching exactly the names of the figure kinds."""
    return "|".join(FIGURE_KINDS)


def job_params(config: Config, kind: str, experiment: str) -> dict[str, Any]:
    """The ``params.figure`` of the job drawing ``kind`` for ``experiment``."""
    return figure_kind(kind).params(config, experiment)


def job_caption(config: Config, kind: str, experiment: str) -> str:
    """The report's caption of ``kind`` for ``experiment``."""
    return figure_kind(kind).caption.format(experiment=experiment)


def draw(
    kind: str,
    inputs: Any,
    outputs: Sequence[str],
    params: Mapping[str, Any],
    log: logging.Logger,
) -> None:
    """Draw ``kind`` to ``outputs`` (the adapter's one call)."""
    figure_kind(kind).draw(inputs, outputs, params, log)
