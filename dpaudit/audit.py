"""Run configured estimators on score files and build the tidy audit table.

One row per (score file, estimator, parameters, selection): the setting's identity and claimed
privacy from the file's metadata (``claimed_epsilon_<accountant>`` for each of
``meta["claimed_epsilons"]``, ``reference_<name>`` for each of ``meta["references"]``), the
estimator's name and method, ``test_accuracy`` (train experiments: the models' mean test
accuracy), ``epsilon`` (the lower bound), ``valid`` (False for uncorrected or point estimates)
and ``assumes`` (what the bound assumes of the mechanism: ``""`` for a bound that holds for
every mechanism, else a trade-off family, :data:`dpaudit.estimators.registry.ASSUMPTIONS`),
then each method's diagnostics. ``tradeoff_family`` is the family the score file declares the
mechanism's trade-off curve to have (``meta["tradeoff_family"]``, e.g. ``gdp`` for a simulated
Gaussian mechanism; ``""`` when it declares none): a verdict may use a row that assumes that
same family (:func:`dpaudit.verdict.add_verdicts`). ``membership_pvalue`` tests the file's IN
count against the inclusion law it declares (:func:`membership_pvalue`); where the membership
is not plausibly fair coins, the rows of an estimator whose theorem needs them carry no bound
(:func:`fair_coin_failure`, :data:`NOT_FAIR_COIN`).
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from dpaudit import estimators
from dpaudit.keys import (
    CLAIMED_EPSILON,
    CONFORMANCE_ALPHA,
    CONFORMANCE_DEPARTS,
    CONFORMANCE_FIRST_STEP,
    CONFORMANCE_UNSEEN,
    ID_COLUMNS,
    MEASURED_EPSILON,
    MEASURED_EPSILON_LOWER,
    MEMBERSHIP_PVALUE,
)
from dpaudit.scores import FAIR_COIN, FIXED_INCLUSION, ScoreFile, ScoreFileError


class AuditTableError(ValueError):
    """An audit table (CSV) is missing, empty, truncated, malformed, or holds a bound no audit
    can have computed (:func:`dpaudit.tables.read_audit_csv`,
    :func:`dpaudit.verdict.check_certifiable`)."""


#: Metadata a score file declares about its run, beyond :data:`dpaudit.scores.REQUIRED_META`,
#: that changes its rows in :func:`run_estimator`: the trade-off family a verdict may assume,
#: extra claims and reference values, a no-canary control, the sampler and adversary (the
#: ``not_covered`` column) and the steps per epoch (the shuffle lower bound).
DECLARED_META = (
    "tradeoff_family",
    "claimed_epsilons",
    "references",
    "canaries_inserted",
    "sampler",
    "adversary",
    "steps_per_epoch",
)
#: Audit-table columns a setting column (the last part of a grid key) must not replace: the ID
#: columns, the bound and its validity, the selection rule and the setting's target epsilon.
RESERVED_COLUMNS = frozenset([*ID_COLUMNS, "epsilon", "valid", "selection", "target_epsilon"])


def run_estimator(sf: ScoreFile, name: str, spec: Mapping[str, Any]) -> pd.DataFrame:
    """Rows of one estimator (config block ``spec`` with key ``method``) on one score file.

    Returns an empty frame (with the ID columns) if the method does not apply to the file's
    design, so that "every estimator on every score file it applies to" needs no special case.
    """
    spec = {k: v for k, v in spec.items() if k != "label"}  # a display name, not a parameter
    method = estimators.get(spec.pop("method"))
    if not method.applies(sf):
        return pd.DataFrame(columns=ID_COLUMNS)
    try:
        rows = method.run(sf, spec)
    except ValueError as exc:
        named = _naming_the_file(exc, sf, name)
        if named is exc:
            raise
        raise named from exc
    missing = [i for i, row in enumerate(rows) if "assumes" not in row]
    if missing:  # the runner contract of dpaudit.estimators.registry
        raise ValueError(f"estimator method {method.name!r}: row {missing[0]} has no 'assumes'")
    rows = [_assumes_after_valid(row) for row in rows]
    if sf.meta.get("canaries_inserted") == "none":
        rows = [_control_row(row) for row in rows]
    rows = [_membership_row(row, sf, method.coins) for row in rows]
    ident = {
        "experiment": sf.meta["experiment"],
        "setting": sf.meta["setting"],
        "seed": json.dumps(sf.meta["seed"]),
        "design": sf.meta["design"],
        "threat_model": sf.meta["threat_model"],
        CLAIMED_EPSILON: sf.claimed_epsilon,
        "delta": sf.delta,
        "accountant": sf.meta["accountant"],
        "estimator": name,
        "method": method.name,
        "params": json.dumps(spec, sort_keys=True),
        "tradeoff_family": tradeoff_family(sf),
        "evidence": evidence(sf),
        "not_covered": not_covered(sf),
    }
    for accountant, eps in sorted((sf.meta.get("claimed_epsilons") or {}).items()):
        ident[f"claimed_epsilon_{accountant}"] = float("inf") if eps is None else eps
    if sf.meta.get("test_accuracy") is not None:
        # the trained models' mean test accuracy (train experiments; the papers report it)
        ident["test_accuracy"] = float(sf.meta["test_accuracy"])
    ident.update(conformance_columns(sf))
    bound = shuffle_lower_bound(sf)
    if bound is not None:  # beside the verdict of a trained shuffle (dpaudit.verdict)
        ident["shuffle_lower_bound"] = bound
    for name, value in sorted((sf.meta.get("references") or {}).items()):
        # reference values of the setting (e.g. a known lower bound), drawn in figures
        ident[f"reference_{name}"] = float("nan") if value is None else float(value)
    frame = pd.DataFrame([{**ident, **row} for row in rows])
    return frame if not frame.empty else pd.DataFrame(columns=ID_COLUMNS)


def conformance_columns(sf: ScoreFile) -> dict[str, Any]:
    """The columns :data:`dpaudit.keys.CONFORMANCE_COLUMNS` of a score file whose metadata has a
    conformance report (an audited training of :mod:`dpaudit.attach`): the departing stages and
    those the run could not see (``"; "``-joined, ``"none"`` when empty), the stages' error
    probability, the first noisy step at which a check departed (NaN: none departed, or the report
    does not say) and the measured mechanism's epsilon (estimate, and at the rate's lower confidence
    bound; NaN where it was not measured). Empty for a file without one."""
    report = sf.meta.get("conformance")
    if not isinstance(report, Mapping):
        return {}
    measured = sf.meta.get("measured_mechanism") or {}

    def number(key: str) -> float:
        value = measured.get(key)
        return float("nan") if value is None else float(value)

    steps = [v for v in (report.get("first_flagged_step") or {}).values() if v is not None]
    return {
        CONFORMANCE_DEPARTS: "; ".join(report.get("departs") or []) or "none",
        CONFORMANCE_UNSEEN: "; ".join(report.get("unseen") or []) or "none",
        CONFORMANCE_ALPHA: float(report["alpha"]),
        CONFORMANCE_FIRST_STEP: float(min(steps)) if steps else float("nan"),
        MEASURED_EPSILON: number("epsilon_estimate"),
        MEASURED_EPSILON_LOWER: number("epsilon_lower"),
    }


def _naming_the_file(exc: ValueError, sf: ScoreFile, name: str) -> ValueError:
    """``exc`` (an estimator's bad input, e.g. "the candidate grid is empty") as the same kind of
    error naming the score file and the estimator block, unless its message names the file."""
    if sf.source in str(exc):
        return exc
    message = f"{sf.source}: estimator {name!r}: {exc}"
    try:
        return type(exc)(message)
    except Exception:  # noqa: BLE001 - an exception class with another constructor
        return ValueError(message)


def tradeoff_family(sf: ScoreFile) -> str:
    """The trade-off family a score file declares its mechanism to have
    (``meta["tradeoff_family"]``, one of :data:`dpaudit.estimators.registry.ASSUMPTIONS`), or
    ``""`` when it declares none (every trained model: DP-SGD's curve is not of one family).
    Any other value is an error naming the file and the allowed values."""
    value = sf.meta.get("tradeoff_family")
    if value is None or value == "":
        return ""
    if value not in estimators.ASSUMPTIONS:
        raise ScoreFileError(
            f"{sf.source}: meta tradeoff_family {value!r} is not a known trade-off family; "
            f"allowed: {sorted(estimators.ASSUMPTIONS)} (or leave it out)"
        )
    return str(value)


#: Why the Poisson accountant's claim does not cover a Poisson-sampled run audited by the
#: partially-informed adversary (the ``not_covered`` column; :func:`not_covered`).
POISSON_PARTIALLY_INFORMED = (
    "the partially-informed adversary is not a fixed data set under Poisson sampling; "
    "the Poisson accountant does not cover it"
)


def not_covered(sf: ScoreFile) -> str:
    """Why the game a score file audits lies outside what its claim covers (``""``: inside).

    Under Poisson sampling the partially-informed adversary of Annamalai, Balle, Hayes, De
    Cristofaro (2024, arXiv:2411.10614, Sec. 5.1, Alg. 1) puts minus the canary gradient in every
    batch that holds neither the target nor the zero-out record: the observations reveal at
    which steps the special record was sampled, under both hypotheses, which no fixed data set
    does under Poisson sampling (a data set of -g records gives binomial counts per batch). The
    Poisson accountant's claim is over fixed neighbouring data sets, so it does not cover this
    game: per step (1-q) N(-1, s^2) + q N(1, s^2) against (1-q) N(-1, s^2) + q N(0, s^2), whose
    100-fold composition at s = 1.289, q = 0.01 has epsilon 2.52 at delta 1e-5 against the
    accountant's 0.39 (tests/tables/test_poisson_partially_informed.py). Under shuffling the same
    adversary's observations are those of the fixed data set (+g, -g, ..., -g) shifted by B - 1
    (Chua et al.'s worst case, :mod:`dpaudit.mechanisms.batched_gaussian`), which a claim about
    shuffling would cover."""
    if sf.meta.get("sampler") == "poisson" and sf.meta.get("adversary") == "partially_informed":
        return POISSON_PARTIALLY_INFORMED
    return ""


#: The unit a score file's scores count, by design (:func:`evidence`).
EVIDENCE_UNITS = {"multi_run": "runs", "one_run": "canaries", "lidp": "trials"}


def evidence(sf: ScoreFile) -> int:
    """How many scored observations a row of ``sf`` rests on, in :data:`EVIDENCE_UNITS` of its
    design: runs (models, ``multi_run``), canaries (``one_run``: every trial's canaries) or
    trials (``lidp``: models, each with its canaries)."""
    if sf.meta["design"] == "one_run":
        return sf.n_trials * sf.n_canaries
    return sf.n_trials


def shuffle_lower_bound(sf: ScoreFile) -> float | None:
    """Chua et al.'s lower bound on the epsilon of one epoch of shuffled DP-SGD
    (:func:`dpaudit.mechanisms.shuffle_reference.shuffle_lower_bound`) at a trained full-shuffle
    run's noise multiplier, batches per epoch and delta; ``None`` for any other file (another
    sampler, several epochs, no noise)."""
    meta = sf.meta
    sigma, steps = meta.get("noise_multiplier"), meta.get("steps_per_epoch")
    if meta.get("sampler") != "shuffle" or not steps or meta.get("steps") != steps:
        return None
    if not (isinstance(sigma, int | float) and 0 < sigma < math.inf):
        return None
    return _shuffle_lower_bound(float(sigma), int(steps), sf.delta)


@functools.lru_cache(maxsize=64)
def _shuffle_lower_bound(sigma: float, steps: int, delta: float) -> float:
    from dpaudit.mechanisms.shuffle_reference import shuffle_lower_bound

    return float(shuffle_lower_bound(sigma, steps, delta))


def _assumes_after_valid(row: Mapping[str, Any]) -> dict[str, Any]:
    """``row`` with its ``assumes`` key moved right after ``valid`` (the table's column order)."""
    out: dict[str, Any] = {}
    for key, value in row.items():
        if key != "assumes":
            out[key] = value
        if key == "valid":
            out["assumes"] = row["assumes"]
    out.setdefault("assumes", row["assumes"])
    return out


#: Why a no-canary control's rows carry no bound.
NO_CANARY_NOTE = (
    "no-canary control (canaries.insert: none): no canary was inserted by a coin flip, so no "
    "bound applies; the row carries the models' test accuracy only"
)


def _control_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """A row of a no-canary control (``canaries.insert: none``) with its bound blanked.

    Every canary of such a file is OUT by construction, not by the fair coins the one-run bounds
    (Steinke, Nasr, Jagielski 2023, Thm. 3.1; Mahloujifar et al. 2024; Xiang et al. 2025) take as
    their randomness, so guessing "out" everywhere would read as a large, meaningless epsilon.
    The estimator still runs (its row keeps the setting's identity and test accuracy, which the
    accuracy figures and claims select by estimator and selection), but ``epsilon`` is NaN,
    ``valid`` False and ``note`` says why.
    """
    return {**row, "epsilon": float("nan"), "valid": False, "note": NO_CANARY_NOTE}


#: Level of the two-sided exact binomial test of a score file's IN count against the inclusion
#: law it declares (:func:`membership_pvalue`; the law: :data:`dpaudit.scores.INCLUSION_KEY`).
#: Where it rejects, the rows of an estimator whose theorem needs independent fair coins
#: (:attr:`dpaudit.estimators.registry.Method.coins`) carry no bound (:func:`fair_coin_failure`).
#: Withholding a bound never makes a reported one wrong (a wrong valid bound still has
#: probability at most 1 - confidence), so the level only sets how often an honest file loses
#: its bound (one in a thousand) against how far from half its IN count may stray: at m = 1000
#: canaries, 500 +- 52 IN pass and 553 or more (447 or fewer) are rejected.
MEMBERSHIP_TEST_LEVEL = 1e-3

#: The ``note`` and the verdict (:func:`dpaudit.verdict.verdict_reasons`) of a row whose coins are
#: not plausible fair coins: ``NOT_FAIR_COIN.format(detail="990 of 1000 IN")``.
NOT_FAIR_COIN = "no verdict: membership is not a fair coin ({detail})"


def membership_counts(sf: ScoreFile, trial: int | None = None) -> tuple[int, int]:
    """(IN canaries, canaries) of trial ``trial`` of ``sf`` (``None``: of every trial)."""
    member = sf.membership if trial is None else sf.membership[trial]
    return int(member.sum()), int(member.size)


def membership_pvalue(sf: ScoreFile, trial: int | None = None) -> float:
    """The p-value of the two-sided exact binomial test (:func:`scipy.stats.binomtest`) of the IN
    count of trial ``trial`` of ``sf`` (``None``: every trial) against the file's declared
    inclusion probability (:attr:`dpaudit.scores.ScoreFile.inclusion_probability`); NaN for a
    design whose membership is fixed, not drawn."""
    law = sf.inclusion_probability
    if law == FIXED_INCLUSION:
        return math.nan
    return _binomial_pvalue(*membership_counts(sf, trial), float(law))


@functools.lru_cache(maxsize=1024)
def _binomial_pvalue(n_in: int, n: int, p: float) -> float:
    if p in (0.0, 1.0):  # a degenerate law: only its one count is possible
        return 1.0 if n_in == n * p else 0.0
    from scipy.stats import binomtest

    return float(binomtest(n_in, n, p).pvalue)


def fair_coin_failure(sf: ScoreFile, trial: int | None = None) -> str:
    """Why the membership of trial ``trial`` of ``sf`` (``None``: every trial) cannot be read as
    independent fair coins, ``""`` where it can: the file declares another law
    (:data:`dpaudit.scores.INCLUSION_KEY`), or its canaries are all IN or all OUT, or the
    two-sided binomial test of the IN count against a fair coin rejects at
    :data:`MEMBERSHIP_TEST_LEVEL` (then ``"990 of 1000 IN"``)."""
    law = sf.inclusion_probability
    if law == FIXED_INCLUSION:
        return "the file declares membership fixed by its design"
    if law != FAIR_COIN:
        return f"the file declares inclusion probability {law:g}"
    n_in, n = membership_counts(sf, trial)
    if n_in in (0, n) or membership_pvalue(sf, trial) < MEMBERSHIP_TEST_LEVEL:
        return f"{n_in} of {n} IN"
    return ""


def _membership_row(row: Mapping[str, Any], sf: ScoreFile, coins: bool) -> dict[str, Any]:
    """``row`` with ``membership_pvalue`` (:func:`membership_pvalue` of the row's trial for a
    one-run file, whose trials each draw their own coins; of the whole file otherwise) and, for
    an estimator whose theorem needs fair coins (``coins``) on a file whose membership is not
    plausible under them (:func:`fair_coin_failure`), no bound: ``epsilon`` NaN, ``valid``
    False and ``note`` :data:`NOT_FAIR_COIN`. A no-canary control keeps its own note."""
    trial = row.get("trial") if sf.meta["design"] == "one_run" else None
    trial = None if trial is None else int(trial)
    out = {**row, MEMBERSHIP_PVALUE: membership_pvalue(sf, trial)}
    failure = fair_coin_failure(sf, trial) if coins and row.get("note") != NO_CANARY_NOTE else ""
    if failure:
        out.update(epsilon=math.nan, valid=False, note=NOT_FAIR_COIN.format(detail=failure))
    return out


def audit(files: list[ScoreFile], specs: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame:
    """Every estimator in ``specs`` (name -> config block) on every file it applies to."""
    frames = [run_estimator(sf, name, spec) for sf in files for name, spec in specs.items()]
    frames = [f for f in frames if not f.empty]
    if not frames:
        return pd.DataFrame(columns=ID_COLUMNS)
    return pd.concat(frames, ignore_index=True)


def applicable_methods(design: str) -> list[str]:
    """Names of the estimator methods that apply to score files of ``design``."""
    return sorted(name for name, m in estimators.METHODS.items() if design in m.designs)


def check_applies(sf: ScoreFile, name: str, spec: Mapping[str, Any]) -> None:
    """Raise :class:`ScoreFileError` if estimator ``name`` does not apply to ``sf``'s design.

    The message names the estimator, its method, the file, the file's design and the methods
    that do apply to that design.
    """
    method = estimators.get(spec["method"])
    if not method.applies(sf):
        design = sf.meta["design"]
        raise ScoreFileError(
            f"{sf.source}: estimator {name!r} (method {method.name!r}, for design(s) "
            f"{list(method.designs)}) does not apply to this file's design {design!r}; "
            f"methods for {design!r}: {applicable_methods(design)}"
        )


def audit_seed_groups(
    seed_files: list[list[str]], name: str, spec: Mapping[str, Any]
) -> pd.DataFrame:
    """Rows of estimator ``name`` on every seed of one setting (one list of paths per seed).

    A seed given as several files (training shards) is stacked with :func:`scores.concat`.
    An estimator that does not apply to a seed's file is an error naming the file; one that
    applies may return no rows for a file by design (LiDP's ``below_order: skip`` at K = 1).
    """
    return audit_setting(seed_files, {name: spec})


def audit_setting(
    seed_files: list[list[str]],
    specs: Mapping[str, Mapping[str, Any]],
    expected: Mapping[str, Mapping[str, Any]] | None = None,
) -> pd.DataFrame:
    """Rows of every estimator block in ``specs`` (name -> block) on every seed of one setting.

    Each seed's score files are read once and every estimator runs on them (an audit job of
    the pipeline: one per setting). Rows come estimator by estimator in the order of
    ``specs``, seed by seed within an estimator, so the table is the concatenation of
    :func:`audit_seed_groups` over the estimators. Errors as in :func:`audit_seed_groups`.
    ``expected`` (path -> experiment, setting, seed, shard) checks each file's metadata
    against what the pipeline expects at its path (:func:`dpaudit.scores.check_identity`).
    """
    from dpaudit import scores

    if not specs:
        raise ValueError("no estimators to run")
    if not seed_files:
        raise ValueError(f"estimator(s) {list(specs)}: no seeds to audit")
    frames: dict[str, list[pd.DataFrame]] = {name: [] for name in specs}
    for paths in seed_files:
        files = [scores.read(path) for path in paths]
        for path, sf in zip(paths, files, strict=True):
            if expected is not None:
                scores.check_identity(sf, path, **expected[path])
        sf = files[0] if len(files) == 1 else scores.concat(files)
        for name, spec in specs.items():
            check_applies(sf, name, spec)
            frames[name].append(run_estimator(sf, name, spec))
    kept = [frame for name in specs for frame in frames[name] if not frame.empty]
    return pd.concat(kept, ignore_index=True) if kept else pd.DataFrame(columns=ID_COLUMNS)
