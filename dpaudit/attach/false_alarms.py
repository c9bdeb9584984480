"""The false alarms of the own-training audit on correct trainings, per check family.

Issue 37 asks that a correct DP-SGD script be flagged in at most 1 of 20 seeds per check family.
The families are the conformance report's stages (:data:`dpaudit.attach.conformance.STAGES`,
each at its stated error probability ``alpha``) and the certified lower bound of the verdict
(:func:`dpaudit.verdict.verdict_table`, flagged when the largest valid family-free bound of one
training exceeds its claim). :func:`per_seed_verdicts` is the verdict table with one row per
implementation and seed (its conformance columns those of that seed's training);
:func:`false_alarm_table` counts, per implementation and family, the seeds that flag it, against
:data:`ALLOWED_RATE`. Only runs of correct trainings make these counts false alarms: a table of
buggy trainings counts the seeds that catch the bug.
"""

from __future__ import annotations

import math

import pandas as pd

from dpaudit.attach.conformance import STAGES
from dpaudit.keys import (
    CLAIMED_EPSILON,
    CONFORMANCE_ALPHA,
    CONFORMANCE_DEPARTS,
    CONFORMANCE_UNSEEN,
    EPSILON_LOWER_BOUND,
    MEASURED_EPSILON,
)
from dpaudit.verdict import verdict_table

#: The family of the certified bound (the verdict's ``flagged`` column), beside the stages.
CERTIFIED = "certified bound"

#: Every check family of an audited training, in the order of the training's path.
FAMILIES = (*STAGES, CERTIFIED)

#: The largest fraction of seeds a correct training may be flagged in, per check family
#: (issue 37, Done when: "at most 1 of 20 seeds per check family").
ALLOWED_RATE = 1 / 20

#: The per-seed columns a false-alarm table reads beside the verdict's.
_CONFORMANCE = (CONFORMANCE_DEPARTS, CONFORMANCE_UNSEEN, CONFORMANCE_ALPHA)


def per_seed_verdicts(
    table: pd.DataFrame,
    by: list[str],
    estimator: str | None = None,
    source: str = "the audit table",
) -> pd.DataFrame:
    """The verdict table of an audit table with one row per implementation (the columns
    ``by``), claimed epsilon and seed (:func:`dpaudit.verdict.verdict_table` grouped also by
    ``seed``): each seed's own bound, verdict and conformance report. An audit table without a
    ``seed`` column or without the conformance columns (no audited training of
    :mod:`dpaudit.attach`) is an error naming ``source``."""
    missing = [c for c in ("seed", *_CONFORMANCE) if c not in table]
    if missing:
        raise ValueError(
            f"{source}: no column(s) {missing}; a false-alarm table reads the audit table of a "
            "train experiment whose trainings carry a conformance report (train.entry_point, "
            "dpaudit.attach)"
        )
    return verdict_table(table, [*by, "seed"], estimator, source=source)


def _stages(values: pd.Series, stage: str) -> pd.Series:
    """Whether each ``"; "``-joined list of stages names ``stage``."""
    return values.fillna("").astype(str).map(lambda text: stage in text.split("; "))


def false_alarm_table(
    table: pd.DataFrame,
    by: list[str],
    estimator: str | None = None,
    source: str = "the audit table",
) -> pd.DataFrame:
    """One row per implementation (the columns ``by``) and check family (:data:`FAMILIES`) of
    an audit table of several seeds: ``claimed_epsilon`` (the largest of its seeds' claims),
    ``seeds`` (the seeds run),
    ``seen`` (those in which the family was measured: a stage the run could not see, or a
    seed without a usable bound, flags nothing), ``flagged`` (the seeds the family flags) and
    ``flagged_seeds`` (which, ``"; "``-joined), ``error_probability`` (the stated chance, per
    seed, that a training meeting its claim is flagged there: the stage's ``alpha``, or one
    minus the bound's joint confidence), ``allowed`` (floor(:data:`ALLOWED_RATE` x seeds)) and
    ``within`` (flagged <= allowed); ``largest_bound`` and ``largest_measured_epsilon`` (the
    implementation's largest certified bound and measured epsilon over its seeds) stand in
    every row of it. Errors name ``source`` (:func:`per_seed_verdicts`)."""
    seeds = per_seed_verdicts(table, by, estimator, source)
    out = []
    for key, g in seeds.groupby(by, dropna=False, sort=True):
        claims = pd.to_numeric(g[CLAIMED_EPSILON], errors="coerce")
        ident = {**dict(zip(by, key, strict=True)), CLAIMED_EPSILON: float(claims.max())}
        bound = pd.to_numeric(g[EPSILON_LOWER_BOUND], errors="coerce")
        measured = pd.to_numeric(g[MEASURED_EPSILON], errors="coerce")
        extremes = {
            "largest_bound": float(bound.max()) if bound.notna().any() else math.nan,
            "largest_measured_epsilon": float(measured.max())
            if measured.notna().any()
            else math.nan,
        }
        for family in FAMILIES:
            if family == CERTIFIED:
                seen = bound.notna()
                flagged = pd.to_numeric(g["flagged"], errors="coerce").fillna(0) > 0
                level = 1 - pd.to_numeric(g["joint_confidence"], errors="coerce")
            else:
                has = g[CONFORMANCE_DEPARTS].notna()
                seen = has & ~_stages(g[CONFORMANCE_UNSEEN], family)
                flagged = seen & _stages(g[CONFORMANCE_DEPARTS], family)
                level = pd.to_numeric(g[CONFORMANCE_ALPHA], errors="coerce")
            n = len(g)
            count = int(flagged.sum())
            allowed = math.floor(ALLOWED_RATE * n + 1e-9)
            out.append(
                {
                    **ident,
                    "family": family,
                    "seeds": n,
                    "seen": int(seen.sum()),
                    "flagged": count,
                    "flagged_seeds": "; ".join(str(s) for s in g["seed"][flagged]),
                    "error_probability": float(level[seen].max()) if seen.any() else math.nan,
                    "allowed": allowed,
                    "within": count <= allowed,
                    **extremes,
                }
            )
    return pd.DataFrame(out)


def markdown(alarms: pd.DataFrame, by: str = "entry_point") -> str:
    """A :func:`false_alarm_table` as a Markdown table, one row per implementation (column
    ``by``): per family the seeds that flag it of those that measured it (``flagged / seen``,
    ``-`` where no seed measured it, a ``!`` where the count exceeds the bound), the seeds run,
    the largest certified bound and measured epsilon and the claim (the table of
    docs/real_data/own_training.md, "Correct scripts over 20 seeds")."""
    head = [by, "seeds", *FAMILIES, "largest bound", "largest measured epsilon", "claimed"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for name, g in alarms.groupby(by, sort=False):
        rows = g.set_index("family")
        cells = [
            "-"
            if rows.loc[f, "seen"] == 0
            else f"{rows.loc[f, 'flagged']} / {rows.loc[f, 'seen']}"
            + ("" if rows.loc[f, "within"] else " !")
            for f in FAMILIES
        ]
        first = g.iloc[0]
        lines.append(
            "| "
            + " | ".join(
                [
                    f"`{str(name).rsplit('.', 1)[-1]}`",
                    str(first["seeds"]),
                    *cells,
                    f"{first['largest_bound']:.2f}",
                    f"{first['largest_measured_epsilon']:.2f}",
                    f"{first['claimed_epsilon']:.2f}",
                ]
            )
            + " |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """``python -m dpaudit.attach.false_alarms results/<experiment>/false_alarms.csv``: the
    table as Markdown (:func:`markdown`)."""
    import sys

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m dpaudit.attach.false_alarms <false_alarms.csv>", file=sys.stderr)
        return 2
    print(markdown(pd.read_csv(args[0])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
