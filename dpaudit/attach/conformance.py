"""The conformance report of an audited training: each DP-SGD stage measured against its claim.

The certified lower bound (:mod:`dpaudit.attach.claim`) sees only what reaches the canaries'
coordinates after the noise call. The conformance report measures the stages before it from the
user's own objects (the loader's batch sampler, the optimizer's noise calls and noise
multiplier), never from an argument only the author of a bug could give:

``sampling``   the records each noisy step really received vs Poisson sampling at the claimed
               rate q (:mod:`dpaudit.attach.sampling_checks`);
``steps``      the noisy steps really taken vs the claim's, and the loader's logical batches vs
               the noisy steps (:mod:`dpaudit.attach.step_checks`);
``noise``      the noise at the canary coordinates no canary touched vs sigma C
               (:mod:`dpaudit.attach.noise_checks`);
``normalisation`` the divisor of the released update vs one that does not depend on the
               (private) dataset size (:mod:`dpaudit.attach.normalisation_checks`);
``accounting`` the epsilon of the *measured* mechanism (its noise multiplier, the largest
               per-record rate measured, the steps taken) through the library's accountant,
               beside the claim (:mod:`dpaudit.attach.measured_accounting`).

Each :class:`Check` states its error probability: the probability that a training that meets
its claim departs there (``level``, at a level fixed before the data; ``0`` for exact facts such
as a record twice in one step). The statistical sampling and noise checks are anytime-valid
(:mod:`dpaudit.attach.anytime`): their error probability holds over all steps at once, so the
report may be read at any step (:meth:`ConformanceReport.report_at`) and a training stopped at
the first departure; ``first_flagged_step`` is the step at which each check first departed.
The checks of one stage share the stage's ``alpha`` by a Bonferroni split, so each stage
(check family) falsely departs with probability at most ``alpha``. Stages the run did not
measure are listed as ``unseen``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pandas as pd

from dpaudit.keys import CLAIMED_EPSILON, MEASURED_EPSILON

#: The DP-SGD stages, in the order of the training's path.
STAGES = ("sampling", "steps", "sensitivity", "noise", "normalisation", "accounting")

#: Default error probability of each stage's checks together (Bonferroni within the stage).
DEFAULT_ALPHA = 0.01

#: The score-file metadata keys of a conformance report (:meth:`ConformanceReport.score_meta`):
#: the auditor's facts, never a user's.
SCORE_META_KEYS = ("measured_mechanism", "conformance")

#: What a stage that no check measured leaves unseen (shown in the verdict text).
UNSEEN_TEXT = {
    "sampling": "sampling (which records each step received; give the training's DataLoader)",
    "steps": "steps (the noisy steps taken against the claim's)",
    "sensitivity": "sensitivity (per-example clipping of the gradient actually used)",
    "noise": "noise (its scale, independence and Gaussian law)",
    "normalisation": "normalisation (the update's divisor against the dataset size; seen for an "
    "Opacus optimizer given data_loader=)",
    "accounting": "accounting (the measured mechanism's epsilon; give noise_multiplier=)",
}


#: The fields of each check the score file's metadata keeps (``conformance["checks"]``).
META_CHECK_KEYS = (
    "stage",
    "check",
    "measured",
    "claimed",
    "departs",
    "level",
    "first_flagged_step",
)

#: The columns of the pipeline's conformance table (:func:`conformance_rows`), after the
#: score file's identity (experiment, setting, seed).
TABLE_COLUMNS = ("stage", "check", "status", "measured", "claimed", "level", "first_flagged_step")


def conformance_rows(meta: dict[str, Any]) -> list[dict[str, Any]]:
    """The conformance table of one score file's metadata (``conformance``, written by
    :meth:`ConformanceReport.score_meta`): one row per check (``status`` ``departs`` or
    ``ok``, the value measured beside the claimed one) and one per stage the run could not
    see (``status`` ``unseen``, the reason in ``measured``), in the order of :data:`STAGES`;
    empty for a file without a conformance report."""
    report = meta.get("conformance")
    if not isinstance(report, dict):
        return []
    rows = [
        {
            "stage": c["stage"],
            "check": c["check"],
            "status": "departs" if c["departs"] else "ok",
            "measured": c["measured"],
            "claimed": c["claimed"],
            "level": c["level"],
            "first_flagged_step": c["first_flagged_step"],
        }
        for c in report.get("checks") or []
    ]
    why = (meta.get("measured_mechanism") or {}).get("sampling_unobservable")
    for stage in report.get("unseen") or []:
        text = UNSEEN_TEXT.get(stage, stage)
        if stage == "sampling" and why:
            text += f"; the loader's indices could not be read: {why}"
        rows.append(
            dict.fromkeys(TABLE_COLUMNS, None)
            | {"stage": stage, "check": "not measured", "status": "unseen", "measured": text}
        )
    order = {s: i for i, s in enumerate(STAGES)}
    return sorted(rows, key=lambda r: order.get(r["stage"], len(STAGES)))


def conformance_table(files: Sequence[Any]) -> pd.DataFrame:
    """The conformance table of score files (:class:`dpaudit.scores.ScoreFile`): their
    :func:`conformance_rows`, each with the file's experiment, setting, seed and claimed
    epsilon, and the measured mechanism's epsilon beside it (the pipeline's report shows it
    next to the audit table's bounds)."""
    ident = ("experiment", "setting", "seed", CLAIMED_EPSILON, MEASURED_EPSILON)
    rows = []
    for sf in files:
        claimed = sf.meta.get(CLAIMED_EPSILON)
        measured = (sf.meta.get(SCORE_META_KEYS[0]) or {}).get("epsilon_estimate")
        head = {
            "experiment": sf.meta.get("experiment"),
            "setting": sf.meta.get("setting"),
            "seed": sf.meta.get("seed"),
            CLAIMED_EPSILON: float("inf") if claimed is None else float(claimed),
            MEASURED_EPSILON: float("nan") if measured is None else float(measured),
        }
        rows += [{**head, **row} for row in conformance_rows(sf.meta)]
    return pd.DataFrame(rows, columns=[*ident, *TABLE_COLUMNS])


class ConformanceError(AssertionError):
    """A training that departs from its claim (:meth:`ConformanceReport.raise_if_departs`);
    its message is the report."""


@dataclass(frozen=True)
class Check:
    """One measured check: at ``stage``, ``name`` measured ``measured`` against the claim's
    ``claimed``; ``departs`` when the claim is rejected. ``p_value``: the check's p-value under
    the claim (None for an exact fact; for an anytime-valid check min(1, 1 / sup E)); ``level``:
    its error probability (the largest chance that a training meeting the claim departs here);
    ``test``: how it is computed (and whether it is fixed-sample or anytime-valid);
    ``anytime``: the verdict holds read at every step (anytime-valid tests, exact facts);
    ``first_flagged_step``: the first noisy step at which it departed (None: it did not, or the
    step was not recorded)."""

    stage: str
    name: str
    measured: str
    claimed: str
    departs: bool
    level: float
    test: str
    p_value: float | None = None
    note: str = ""
    anytime: bool = False
    first_flagged_step: int | None = None

    def row(self) -> dict[str, Any]:
        """The check as a table row."""
        return {
            "stage": self.stage,
            "check": self.name,
            "measured": self.measured,
            "claimed": self.claimed,
            "departs": self.departs,
            "p_value": self.p_value,
            "level": self.level,
            "test": self.test,
            "note": self.note,
            "first_flagged_step": self.first_flagged_step,
        }


@dataclass
class ConformanceReport:
    """The checks of one audited training (:class:`Check`), the stages no check measured
    (``unseen``), each stage's error probability ``alpha`` and ``measured`` (facts of the
    measured mechanism, e.g. its epsilon, written into the score file's metadata)."""

    checks: list[Check]
    unseen: list[str]
    alpha: float = DEFAULT_ALPHA
    measured: dict[str, Any] = field(default_factory=dict)

    @property
    def departs(self) -> bool:
        """True when some check departs from the claim."""
        return any(c.departs for c in self.checks)

    @property
    def departing_stages(self) -> list[str]:
        """The stages with a departing check, in the order of :data:`STAGES`."""
        hit = {c.stage for c in self.checks if c.departs}
        return [s for s in STAGES if s in hit]

    @property
    def seen(self) -> list[str]:
        """The stages some check measured, in the order of :data:`STAGES`."""
        have = {c.stage for c in self.checks}
        return [s for s in STAGES if s in have]

    def score_meta(self) -> dict[str, Any]:
        """The auditor's facts for the score file's metadata (:data:`SCORE_META_KEYS`): the measured
        mechanism (``measured_mechanism``) and the departing, seen and unseen stages at ``alpha``
        (``conformance``), which the audit table and the verdict table carry beside the bound."""
        measured_key, report_key = SCORE_META_KEYS
        return {
            measured_key: dict(self.measured),
            report_key: {
                "departs": self.departing_stages,
                "seen": self.seen,
                "unseen": self.unseen,
                "alpha": self.alpha,
                # the first noisy step at which each departing check departed (anytime-valid)
                "first_flagged_step": {
                    f"{c.stage}: {c.name}": c.first_flagged_step for c in self.checks if c.departs
                },
                # every check, measured beside claimed (the pipeline's conformance table)
                "checks": [{k: c.row()[k] for k in META_CHECK_KEYS} for c in self.checks],
            },
        }

    def raise_if_departs(self) -> None:
        """Raise :class:`ConformanceError` (an ``AssertionError``, so a failing test in the
        user's own CI) with the report when some check departs; else nothing."""
        if self.departs:
            raise ConformanceError(str(self))

    def table(self) -> pd.DataFrame:
        """One row per check (:meth:`Check.row`)."""
        cols = ["stage", "check", "measured", "claimed", "departs", "p_value", "level", "test"]
        return pd.DataFrame(
            [c.row() for c in self.checks], columns=[*cols, "note", "first_flagged_step"]
        )

    def report_at(self, step: int) -> ConformanceReport:
        """The report as it read after noisy step ``step``: the checks whose verdict holds at
        every step (``anytime``), each departing when it had first departed by then; the
        fixed-sample checks (read once, at the end) are left out. A departure whose step was not
        recorded counts only at the last step."""
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise ValueError(f"step must be an integer >= 0, got {step!r}")
        last = int(self.measured.get("steps_taken", 0))
        out = []
        for c in self.checks:
            if not c.anytime:
                continue
            first = c.first_flagged_step
            if c.departs and first is None:
                first = last or None
            hit = first is not None and first <= step
            out.append(
                replace(
                    c,
                    departs=hit,
                    measured=f"departed at step {first}" if hit else f"no departure by step {step}",
                    p_value=None,  # the p-value of the whole run, not of its first steps
                    note="",
                )
            )
        rep = report(out, self.alpha, {"read_at_step": step})
        rep.unseen = list(self.unseen)
        return rep

    def summary(self) -> str:
        """One line: the departing stages (or none), and what the run could not see."""
        if self.departs:
            names = {
                s: ", ".join(c.name for c in self.checks if c.departs and c.stage == s)
                for s in self.departing_stages
            }
            head = "conformance: DEPARTS from the claim at " + "; ".join(
                f"{s} ({n})" for s, n in names.items()
            )
        elif self.checks:
            head = "conformance: no departure measured at " + ", ".join(self.seen)
        else:
            head = "conformance: nothing measured"
        head += f" (each stage's checks at error probability <= {self.alpha:g})"
        if self.unseen:
            head += "; not seen by this run: " + "; ".join(UNSEEN_TEXT[s] for s in self.unseen)
        why = self.measured.get("sampling_unobservable")
        if why:
            head += f" (the loader's indices could not be read: {why})"
        return head

    def __str__(self) -> str:
        lines = [self.summary()]
        for c in self.checks:
            p = "" if c.p_value is None else f", p = {c.p_value:.3g}"
            mark = "DEPARTS" if c.departs else "ok"
            if c.departs and c.first_flagged_step is not None:
                mark += f" from step {c.first_flagged_step}"
            lines.append(
                f"  [{mark}] {c.stage}: {c.name}: measured {c.measured}; claimed {c.claimed} "
                f"(error probability {c.level:.3g}{p}; {c.test})"
                + (f" -- {c.note}" if c.note else "")
            )
        return "\n".join(lines)


def report(
    checks: Sequence[Check], alpha: float, measured: dict[str, Any] | None = None
) -> ConformanceReport:
    """The report of ``checks``: the stages none of them measured are ``unseen``."""
    have = {c.stage for c in checks}
    unseen = [s for s in STAGES if s not in have]
    return ConformanceReport(list(checks), unseen, alpha, dict(measured or {}))
