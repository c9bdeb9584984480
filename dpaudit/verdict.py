"""The verdict rules: when an audit row or an implementation is flagged, when there is no verdict
and why, the words of each verdict, and how several bounds combine (the union bound).

Read by the audit tables (:mod:`dpaudit.tables`, the ``verdict`` column of ``audit.csv`` and the
``verdict:`` table), by the audit of a user's own training (:mod:`dpaudit.attach.claim`: its
estimators, :data:`VERDICT_ESTIMATORS`, are the registry's family-free bounds) and by the verdict
figure (:mod:`dpaudit.plots.verdict`, which only draws). A valid lower bound above the claim
refutes the claim at the bound's confidence (Annamalai, Balle, Hayes, De Cristofaro 2024,
arXiv:2411.10614, §7); one below it is no evidence either way at the run's scale.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from dpaudit.audit import EVIDENCE_UNITS, NOT_FAIR_COIN, AuditTableError
from dpaudit.estimators.registry import family_free_blocks
from dpaudit.keys import (
    CLAIMED_EPSILON,
    CONFORMANCE_ALPHA,
    CONFORMANCE_DEPARTS,
    CONFORMANCE_FIRST_STEP,
    CONFORMANCE_UNSEEN,
    EPSILON_LOWER_BOUND,
    MEASURED_EPSILON,
    MEASURED_EPSILON_LOWER,
)

#: Audit-table columns a verdict may group by besides the experiment's setting columns.
VERDICT_ID_COLUMNS = ("estimator", "threat_model", "design", "canary_type", "selection")

#: The verdict of an audit row (:func:`add_verdicts`).
FLAGGED = "flagged: the valid lower bound exceeds the claim"
#: A usable bound at or below the claim: no evidence against the claim at the row's scale
#: (``NOT_FLAGGED.format(n=..., unit=...)``: the runs, canaries or trials the row rests on,
#: :func:`dpaudit.audit.evidence`), which is no evidence for it: a weak audit stays below too.
NOT_FLAGGED = "not flagged: no evidence at {n} {unit}"
NOT_A_BOUND = "no verdict: not a valid bound"
NO_CLAIM = "no verdict: no privacy claimed"
#: A valid bound that holds only under a trade-off family the score file does not declare:
#: ``ASSUMES.format(family=...)`` (a key of :data:`dpaudit.estimators.registry.ASSUMPTIONS`).
ASSUMES = "no verdict: assumes a {family} trade-off"
#: A valid bound at a smaller delta than the claim's: it bounds another epsilon than the claimed.
SMALLER_DELTA = "no verdict: the bound is at a smaller delta than the claim"
#: A game the claim does not cover (the ``not_covered`` column, :func:`dpaudit.audit.not_covered`,
#: e.g. the partially-informed adversary under Poisson sampling): ``NOT_COVERED.format(reason=)``.
NOT_COVERED = "no verdict: {reason}"

#: The ``verdict`` of an own-training table row outside :data:`VERDICT_ESTIMATORS`.
OUTSIDE_VERDICT = "not used by the verdict: not a family-free estimator of this audit"
#: The verdict figure's legend: a flagged implementation, one not flagged (the runs behind each
#: row are in the table), and the mark of a row where no bound may decide a verdict.
FLAGGED_LEGEND = "flagged: valid lower bound > claim"
NOT_FLAGGED_LEGEND = NOT_FLAGGED.format(n="these", unit="runs")
NO_VERDICT_MARK = "(no verdict)"

#: The family-free estimators an own-training verdict reads (name -> estimator block, as in a
#: config): the registry's (:func:`~dpaudit.estimators.registry.family_free_blocks`: one-run
#: auditing, Steinke, Nasr, Jagielski 2023, arXiv:2305.08846, Thm. 3.1, and f-DP auditing with
#: abstention under the (epsilon, delta) null, Mahloujifar, Melis, Chaudhuri 2025,
#: arXiv:2410.22235), each with the valid ``bonferroni`` selection of its guess count;
#: ``confidence`` is set by :func:`verdict_specs`.
VERDICT_ESTIMATORS: dict[str, dict[str, Any]] = {
    name: {**block, "selections": ["bonferroni"]}
    for name, block in family_free_blocks("one_run").items()
}


def not_flagged(n: float | None, design: str | None) -> str:
    """:data:`NOT_FLAGGED` for ``n`` observations of a score file of ``design`` (runs,
    canaries or trials, :data:`dpaudit.audit.EVIDENCE_UNITS`); without a count (a table written
    before the ``evidence`` column) ``"not flagged: no evidence"``."""
    if n is None or not np.isfinite(n):
        return NOT_FLAGGED.partition(" at ")[0]
    return NOT_FLAGGED.format(n=f"{int(n):,}", unit=EVIDENCE_UNITS.get(design or "", "scores"))


def column_text(table: pd.DataFrame, column: str) -> pd.Series:
    """``column`` as strings, ``""`` where it is missing or empty (a CSV reads ``""`` as NaN)."""
    if column not in table:
        return pd.Series("", index=table.index)
    values = table[column].astype(object)
    return values.where(values.notna(), "").astype(str)


def not_fair_coin(table: pd.DataFrame) -> pd.Series:
    """Rows whose ``note`` is :data:`dpaudit.audit.NOT_FAIR_COIN` (no bound: their estimator
    needs fair coins, and the file's membership is not plausible under them)."""
    return column_text(table, "note").str.startswith(NOT_FAIR_COIN.partition("{")[0])


def is_valid(table: pd.DataFrame) -> pd.Series:
    """Rows whose ``valid`` is true (``True`` or ``1``, as a table or its CSV holds it)."""
    return table["valid"].astype(str).str.lower().isin(["true", "1"])


def one_run_ceiling(canaries: float, confidence: float) -> float:
    """The largest lower bound a one-run audit of ``canaries`` canaries can certify at
    ``confidence``: every guess right, pure DP (Steinke, Nasr, Jagielski 2023, arXiv:2305.08846,
    Theorem 3.1 at r = v = m and delta = 0: logit((1 - confidence)^(1/m)), or 0 where that is
    negative: a trivial bound of 0 is what such a run reports). A positive delta
    only lowers the one-run bound, and the f-DP bounds that hold for every mechanism
    (``fdp_abstention`` with the ``approx_dp`` null, ``fdp_one_run`` at delta 0) on perfect
    guesses stay at or below it (``tests/tables/test_tables.py``)."""
    from dpaudit.estimators.one_run.bound import pure_dp_closed_form

    # too few canaries certify nothing, but a bound of 0 is always reported: never below 0
    return max(0.0, pure_dp_closed_form(int(canaries), float(confidence)))


def check_certifiable(table: pd.DataFrame, source: str = "the audit table") -> None:
    """Raise :class:`AuditTableError` naming ``source`` and the row if a valid, family-free bound
    of a one-run audit exceeds what its canaries (the row's ``evidence``) can certify at all
    (:func:`one_run_ceiling`): no audit can have computed it, so the table was edited or
    damaged after it was written. Rows without the columns this needs are not checked."""
    needed = {"design", "epsilon", "valid", "evidence", "confidence"}
    if table.empty or not needed <= set(table.columns):
        return
    eps = pd.to_numeric(table["epsilon"], errors="coerce").to_numpy(dtype=float)
    n = pd.to_numeric(table["evidence"], errors="coerce").to_numpy(dtype=float)
    conf = pd.to_numeric(table["confidence"], errors="coerce").to_numpy(dtype=float)
    rows = (
        (column_text(table, "design") == "one_run").to_numpy()
        & is_valid(table).to_numpy()
        & (column_text(table, "assumes") == "").to_numpy()
        & np.isfinite(eps)
        & (n >= 1)
        & (conf > 0)
        & (conf < 1)
    )
    pairs = set(zip(n[rows], conf[rows], strict=True))
    ceilings = {(k, c): one_run_ceiling(k, c) for k, c in pairs}
    for pos in np.flatnonzero(rows):
        top = ceilings[(n[pos], conf[pos])]
        if eps[pos] > top + 1e-9 * max(1.0, top):
            row = table.iloc[pos]
            who = ", ".join(
                f"{c} {row[c]}" for c in ("estimator", "setting", "seed") if c in table.columns
            )
            raise AuditTableError(
                f"{source}: data row {pos + 1} ({who}) has a valid bound epsilon = "
                f"{eps[pos]:.6g} from {int(n[pos])} canaries, above the {top:.4g} that "
                f"{int(n[pos])} canaries can certify at all at confidence {conf[pos]:.4g} "
                "(every guess right; Steinke, Nasr, Jagielski 2023, Theorem 3.1): no audit "
                "computed it, the table was edited or damaged; delete it and rerun its audit job"
            )

def verdict_reasons(table: pd.DataFrame, *, need_claim: bool = True) -> pd.Series:
    """Why each row of an audit table may not decide a verdict: ``""`` where it may (a valid
    bound, family-free or of the score file's declared family, at the claim's delta or larger,
    against a finite claim that covers the audited game), else the verdict text that says why
    not.

    A row's ``assumes`` (``""``: a bound for every mechanism) is admitted when it is empty or
    equals the row's ``tradeoff_family`` (the family the score file declares the mechanism's
    trade-off curve to have, :func:`dpaudit.audit.tradeoff_family`): a mu-GDP test converted to
    (epsilon, delta) refutes a claim only of a mechanism whose curve is Gaussian. A table
    without these columns (written before they existed) counts every row as family-free. A
    bound computed at a delta (``delta_used``) below the claim's bounds epsilon at that smaller
    delta, which may exceed the claimed epsilon of an honest mechanism. A row whose
    ``not_covered`` is set audits a game the claim does not speak about
    (:func:`dpaudit.audit.not_covered`): a bound above the claim there refutes nothing.
    A row whose estimator needs fair coins on a file whose membership is not plausible under
    them (``note`` :data:`dpaudit.audit.NOT_FAIR_COIN`, e.g. 990 of 1000 IN) has no bound and
    reads that note. Precedence: the coins, then no claim, then not a valid bound, then the
    assumed family, then the delta, then the coverage. ``need_claim=False`` leaves out the claim
    (a row without a finite claim is then judged as a bound only: the "largest valid bound" of
    ``dpaudit audit --json``)."""
    claimed = pd.to_numeric(table[CLAIMED_EPSILON], errors="coerce")
    assumed = column_text(table, "assumes")
    declared = column_text(table, "tradeoff_family")
    uncovered = column_text(table, "not_covered")
    reasons = pd.Series("", index=table.index, dtype=object)
    outside = uncovered != ""
    reasons[outside] = [NOT_COVERED.format(reason=r) for r in uncovered[outside]]
    if "delta_used" in table and "delta" in table:
        used = pd.to_numeric(table["delta_used"], errors="coerce")
        claim_delta = pd.to_numeric(table["delta"], errors="coerce")
        reasons[used < claim_delta * (1 - 1e-12)] = SMALLER_DELTA
    foreign = (assumed != "") & (assumed != declared)
    reasons[foreign] = [ASSUMES.format(family=f) for f in assumed[foreign]]
    reasons[~is_valid(table)] = NOT_A_BOUND
    if need_claim:
        reasons[~np.isfinite(claimed.fillna(np.inf))] = NO_CLAIM  # none, or inf: no guarantee
    coins = not_fair_coin(table)
    reasons[coins] = column_text(table, "note")[coins]
    return reasons


def usable_for_verdict(table: pd.DataFrame, *, need_claim: bool = True) -> pd.Series:
    """Rows that may decide a verdict or a "largest valid bound" headline
    (:func:`verdict_reasons` is empty): valid, family-free or of the declared family, covered
    by the claim; with ``need_claim=False`` also such rows of a file without a claim."""
    if table.empty:
        return pd.Series(False, index=table.index)
    return verdict_reasons(table, need_claim=need_claim) == ""


def _evidence(table: pd.DataFrame) -> pd.Series:
    if "evidence" not in table:
        return pd.Series(np.nan, index=table.index)
    return pd.to_numeric(table["evidence"], errors="coerce")


def add_verdicts(table: pd.DataFrame, source: str = "the audit table") -> pd.DataFrame:
    """Add ``exceeds_claim`` (1 where a usable lower bound is above the claimed epsilon, else
    0) and ``verdict`` (:data:`FLAGGED`, :data:`NOT_FLAGGED` with the row's ``evidence``, or
    why there is none: :data:`NO_CLAIM` for a row without a finite claim, e.g. the noise-free
    control, :data:`NOT_A_BOUND`, :data:`ASSUMES`, :data:`SMALLER_DELTA` and
    :data:`NOT_COVERED`; :func:`verdict_reasons`) to an audit table. A usable lower bound above
    the claim refutes the claim at the bound's confidence: the implementation does not deliver
    the epsilon it reports (Annamalai et al. 2024, §7, the buggy data loaders). One below it
    says only that these runs found no evidence against the claim. A bound above what its
    canaries can certify is an error naming ``source`` (:func:`check_certifiable`)."""
    if table.empty or CLAIMED_EPSILON not in table or "valid" not in table:
        return table
    check_certifiable(table, source)
    claimed = pd.to_numeric(table[CLAIMED_EPSILON], errors="coerce")
    eps = pd.to_numeric(table["epsilon"], errors="coerce")
    reasons = verdict_reasons(table)
    usable = reasons == ""
    exceeds = usable & (eps > claimed)
    designs = column_text(table, "design")
    below = [not_flagged(n, d) for n, d in zip(_evidence(table), designs, strict=True)]
    verdict = reasons.where(~usable, pd.Series(below, index=table.index, dtype=object))
    verdict[exceeds] = FLAGGED
    return table.assign(exceeds_claim=exceeds.astype(int), verdict=verdict)


def familywise_confidence(confidences: pd.Series | np.ndarray | list[float]) -> float:
    """The union bound 1 - sum(1 - confidence) over rows (clipped at 0): the confidence at which
    every one of them holds at once (Bonferroni)."""
    conf = np.asarray(pd.to_numeric(pd.Series(confidences)), dtype=float)
    return max(1.0 - float((1.0 - conf).sum()), 0.0)



def split_confidence(confidence: float, parts: int) -> float:
    """The confidence each of ``parts`` bounds is computed at so that their maximum holds at
    ``confidence`` (the inverse of :func:`familywise_confidence`): 1 - (1 - confidence) / parts."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence!r}")
    return 1.0 - (1.0 - confidence) / parts


def verdict_specs(confidence: float) -> dict[str, dict[str, Any]]:
    """:data:`VERDICT_ESTIMATORS`, each at :func:`split_confidence` of ``confidence``, so that
    the largest of their bounds holds at ``confidence`` (union bound)."""
    each = split_confidence(confidence, len(VERDICT_ESTIMATORS))
    return {name: {**spec, "confidence": each} for name, spec in VERDICT_ESTIMATORS.items()}

def _group_evidence(g: pd.DataFrame) -> tuple[float | None, str | None]:
    """The observations behind a verdict group: summed over its distinct score files
    (experiment, setting, seed), each counted once whatever the number of its rows."""
    keys = [c for c in ("experiment", "setting", "seed") if c in g]
    files = g.drop_duplicates(keys) if keys else g.iloc[:1]
    n = _evidence(files)
    designs = sorted(set(column_text(files, "design")))
    return (None if n.isna().any() else float(n.sum())), (designs[0] if len(designs) == 1 else None)


def _shuffle_bound(g: pd.DataFrame) -> float:
    """The group's known theoretical lower bound (Chua et al.), NaN where none is known."""
    cols = [c for c in ("shuffle_lower_bound", "reference_shuffle_lower_bound") if c in g]
    values = pd.concat([pd.to_numeric(g[c], errors="coerce") for c in cols]) if cols else None
    return float(values.max()) if values is not None and values.notna().any() else float("nan")


def _joined(values: pd.Series) -> str:
    """The distinct ``"; "``-joined names of a group's files, in order, ``none`` when none."""
    names = [n for v in values.dropna() for n in str(v).split("; ") if n and n != "none"]
    return "; ".join(dict.fromkeys(names)) or "none"


def _conformance(g: pd.DataFrame) -> dict[str, Any]:
    """The conformance columns of a verdict group (:data:`dpaudit.keys.CONFORMANCE_COLUMNS`),
    over its distinct score files: the stages any of them departs at, those some left unseen,
    the earliest step a check departed at, the largest measured epsilon; empty where no file of
    the group has a conformance report."""
    if CONFORMANCE_DEPARTS not in g or g[CONFORMANCE_DEPARTS].isna().all():
        return {}
    keys = [c for c in ("experiment", "setting", "seed") if c in g]
    files = g[g[CONFORMANCE_DEPARTS].notna()].drop_duplicates(keys)

    def largest(column: str) -> float:
        values = pd.to_numeric(files[column], errors="coerce")
        return float(values.max()) if values.notna().any() else float("nan")

    # an audit table written before the checks were anytime-valid has no first-step column
    column = CONFORMANCE_FIRST_STEP
    first = pd.to_numeric(files[column], errors="coerce") if column in files else pd.Series()

    return {
        CONFORMANCE_DEPARTS: _joined(files[CONFORMANCE_DEPARTS]),
        CONFORMANCE_UNSEEN: _joined(files[CONFORMANCE_UNSEEN]),
        CONFORMANCE_ALPHA: largest(CONFORMANCE_ALPHA),
        CONFORMANCE_FIRST_STEP: float(first.min()) if first.notna().any() else float("nan"),
        MEASURED_EPSILON: largest(MEASURED_EPSILON),
        MEASURED_EPSILON_LOWER: largest(MEASURED_EPSILON_LOWER),
    }


def verdict_table(
    table: pd.DataFrame,
    by: list[str],
    estimator: str | None = None,
    source: str = "the audit table",
) -> pd.DataFrame:
    """A practitioner's table, one row per implementation (the columns ``by``, e.g. sampler
    and buffer_size) and claimed epsilon: the largest valid lower bound over its rows that may
    decide a verdict (:func:`usable_for_verdict`: family-free, or of the score file's declared
    trade-off family, covered by the claim), its confidence and the verdict (flagged when that
    bound exceeds the claim; else "not flagged: no evidence at N runs", N the runs, canaries or
    trials behind the rows, :func:`dpaudit.audit.evidence`).

    Several valid rows of one implementation (seeds, or the partial-shuffle adversary's
    prefixes k) are combined by their maximum: that maximum is a bound at the stated
    confidence only when each row's confidence was raised for it (a union bound, e.g. the
    estimator's ``confidence`` 1 - 0.05 / 3 for three prefixes); the table reports the rows'
    own confidence, how many rows were combined, and ``joint_confidence``, the union bound
    1 - sum(1 - confidence) over the combined rows at which the maximum holds;
    ``familywise_confidence`` (the same in every row) is the union bound over every combined
    row of the table, the confidence at which all its flags hold at once.
    ``shuffle_lower_bound`` is the known theoretical lower bound on the implementation's
    epsilon where there is one (a full shuffle: Chua et al. 2024, via
    :func:`dpaudit.audit.shuffle_lower_bound`; NaN otherwise). ``excluded`` names the valid
    rows kept out of the maximum because the claim does not cover their game (the
    ``not_covered`` column, e.g. the partially-informed adversary under Poisson sampling), and
    the rows left without a bound because their file's membership is not a fair coin
    (:data:`dpaudit.audit.NOT_FAIR_COIN`), with their verdict text; an implementation with only
    such rows gets a row with no bound and that text as its verdict. Where the score files carry
    a conformance report (an audited training of :mod:`dpaudit.attach`,
    :data:`dpaudit.keys.CONFORMANCE_COLUMNS`), the conformance columns stand beside the bound:
    ``conformance_departs`` (the stages any of the group's files departs at, ``none``),
    ``conformance_unseen`` (the stages a file could not see), ``conformance_alpha`` (each
    stage's error probability), ``conformance_first_step`` (the first noisy step at which a
    check departed, the earliest over the files) and ``measured_epsilon`` /
    ``measured_epsilon_lower`` (the measured mechanism's epsilon, the largest over the files,
    beside ``claimed_epsilon``). ``estimator`` keeps the rows of one estimator block (``None``:
    all); ``flagged`` is 1 where the verdict is :data:`FLAGGED`. A table with a bound above what
    its canaries can certify is refused, naming ``source`` and the row
    (:func:`check_certifiable`)."""
    check_certifiable(table, source)
    missing = [
        c for c in [*by, CLAIMED_EPSILON, "epsilon", "valid", "confidence"] if c not in table
    ]
    if missing:
        raise ValueError(f"verdict_table: the audit table has no column(s) {missing}")
    if estimator is not None:
        if "estimator" not in table or not (table["estimator"] == estimator).any():
            raise ValueError(f"verdict_table: no rows of estimator {estimator!r}")
        table = table[table["estimator"] == estimator]
    rows = add_verdicts(table.reset_index(drop=True))
    reasons = verdict_reasons(rows) if len(rows) else pd.Series(dtype=object)
    # rows the claim does not cover: valid bounds kept out of the maximum, named in the table
    uncovered = column_text(rows, "not_covered")
    outside = (uncovered != "") & (reasons == uncovered.map(lambda r: NOT_COVERED.format(reason=r)))
    keep = (reasons == "") | outside | not_fair_coin(rows)
    out = []
    for key, g in rows[keep].groupby([*by, CLAIMED_EPSILON], dropna=False, sort=True):
        usable = g[reasons[g.index] == ""]
        aside = reasons[g.index][reasons[g.index] != ""]
        rec = dict(zip([*by, CLAIMED_EPSILON], key, strict=True))
        excluded = "; ".join(
            f"{n} row(s): {r}" for r, n in aside.value_counts().sort_index().items()
        )
        if usable.empty:
            rec.update(
                epsilon_lower_bound=float("nan"),
                confidence=float("nan"),
                rows_combined=0,
                joint_confidence=float("nan"),
                evidence=float("nan"),
                flagged=0,
                verdict=aside.iloc[0] if aside.nunique() == 1 else "no verdict: " + excluded,
            )
        else:
            best = usable.loc[pd.to_numeric(usable["epsilon"]).idxmax()]
            n, design = _group_evidence(usable)
            flagged = bool((usable["verdict"] == FLAGGED).any())
            rec.update(
                epsilon_lower_bound=float(best["epsilon"]),
                confidence=float(best["confidence"]),
                rows_combined=len(usable),
                joint_confidence=familywise_confidence(usable["confidence"]),
                evidence=n,
                flagged=int(flagged),
                verdict=FLAGGED if flagged else not_flagged(n, design),
            )
        rec.update(shuffle_lower_bound=_shuffle_bound(g), excluded=excluded, **_conformance(g))
        out.append(rec)
    verdicts = pd.DataFrame(out)
    if len(verdicts):
        usable_rows = rows[keep][reasons[keep] == ""]
        verdicts["familywise_confidence"] = familywise_confidence(usable_rows["confidence"])
    return verdicts


def own_training_verdict(
    table: pd.DataFrame, names: list[str], meta: Mapping[str, Any], confidence: float
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The verdict of an audit of one own training (:func:`dpaudit.attach.claim.audit_file`):
    ``table`` (its audit rows, from one score file of metadata ``meta``) with ``in_verdict``
    (its estimator is one of ``names``, each run at :func:`split_confidence`), and
    ``exceeds_claim`` and ``verdict`` (:func:`add_verdicts`; :data:`OUTSIDE_VERDICT` and never
    flagging outside ``names``), and the one-row verdict: :func:`verdict_table` over the verdict
    rows, or without a claim the largest bound and :data:`NO_CLAIM` (``joint_confidence`` then
    ``confidence``), with the claim's ``delta`` and ``accountant`` and the ``estimator`` of the
    largest bound."""
    table = table.assign(in_verdict=table["estimator"].isin(names))
    table = add_verdicts(table)
    outside = ~table["in_verdict"]  # shown, never flagging
    table.loc[outside, "exceeds_claim"] = 0
    table.loc[outside, "verdict"] = OUTSIDE_VERDICT
    rows = table[table["in_verdict"]]
    eps = pd.to_numeric(rows["epsilon"])
    # no bound at all where the membership is not a fair coin (dpaudit.audit.fair_coin_failure)
    best_idx = eps.idxmax() if eps.notna().any() else rows.index[0]
    if meta[CLAIMED_EPSILON] is None:
        best = rows.loc[best_idx]
        verdict = pd.DataFrame(
            [
                {
                    "experiment": meta["experiment"],
                    "setting": meta["setting"],
                    CLAIMED_EPSILON: math.inf,
                    EPSILON_LOWER_BOUND: float(best["epsilon"]),
                    "confidence": float(best["confidence"]),
                    "rows_combined": len(rows),
                    "joint_confidence": confidence,
                    "flagged": 0,
                    "verdict": NO_CLAIM if eps.notna().any() else best["verdict"],
                }
            ]
        )
    else:
        verdict = verdict_table(rows, ["experiment", "setting"])
    verdict.insert(3, "delta", float(meta["delta"]))
    verdict.insert(4, "accountant", meta["accountant"])
    verdict["estimator"] = rows.loc[best_idx, "estimator"]
    return table, verdict
