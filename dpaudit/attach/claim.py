"""The claim, the audit table and the verdict of an audit of a user's own training.

:func:`resolve_claim` turns what the user knows about their training (an epsilon, or the DP-SGD
settings their accountant used) into the claimed (epsilon, delta) and names its source;
:func:`make_score_file` turns final per-canary scores into an ordinary score file
(:mod:`dpaudit.scores`, design ``one_run``), :func:`audit_file` runs the estimators on it and
reads the verdict, and :func:`audit_scores` does both.

**The verdict uses only bounds that hold for every mechanism meeting the claim.** A bound that
assumes a trade-off family (the GDP or Laplace nulls of ``fdp_one_run`` / ``fdp_abstention``,
or ``fdp_one_run``'s ``approx_dp`` null with delta > 0, see docs/estimators/fdp_one_run.md)
can exceed the claim of a correct but non-Gaussian training. The verdict set is the registry's
family-free bounds, :data:`VERDICT_ESTIMATORS` (the verdict rules: :mod:`dpaudit.verdict`):
Steinke, Nasr, Jagielski 2023 (arXiv:2305.08846, Theorem 3.1; ``one_run``) and Mahloujifar,
Melis, Chaudhuri 2025 (arXiv:2410.22235; ``fdp_abstention`` with the ``approx_dp`` null, which
that recursion tests for every (epsilon, delta)-DP mechanism), each with a valid selection of
its guess count (``bonferroni``). Both are tested at confidence 1 - (1 - confidence) / 2, so the
verdict (a maximum over the two) holds at ``confidence`` by the union bound. Other estimators
may be added to the table (``extra_estimators``); their rows are marked ``in_verdict`` False and
never flag.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from dpaudit.keys import CLAIMED_EPSILON, EPSILON_LOWER_BOUND
from dpaudit.scores import ScoreFile, ScoreFileError, one_run_meta

# VERDICT_ESTIMATORS: re-exported, the verdict's estimators are part of this module's API
from dpaudit.verdict import VERDICT_ESTIMATORS as VERDICT_ESTIMATORS
from dpaudit.verdict import own_training_verdict

if TYPE_CHECKING:
    from dpaudit.attach.power import Power

#: The ``score`` of white-box Dirac gradient canaries added at the noise call
#: (:class:`dpaudit.attach.core.GradientCanaries`), whose idealised law
#: :mod:`dpaudit.attach.power` computes the power of.
DIRAC_SCORE = "sum_t_noisy_clipped_sum_at_canary_coordinate_over_clip_norm"
#: The library's accountants (:data:`dpaudit.accounting.dpsgd.EPSILON_ACCOUNTANTS`).
_ACCOUNTANTS = ("pld", "prv", "rdp", "gdp")

#: Accountant used when the claim is computed from DP-SGD settings (Opacus' default).
DEFAULT_ACCOUNTANT = "prv"


@dataclass(frozen=True)
class Claim:
    """The claimed guarantee of the audited training: ``epsilon`` at ``delta`` (``None``: no
    guarantee, e.g. no noise), who computed it (``accountant``) and how (``source``: ``given``
    by the user, or ``accountant`` from the DP-SGD ``settings``)."""

    epsilon: float | None
    delta: float
    accountant: str
    source: str
    settings: dict[str, Any] = field(default_factory=dict)

    def meta(self) -> dict[str, Any]:
        """The score-file metadata of the claim."""
        return {
            CLAIMED_EPSILON: self.epsilon,
            "delta": self.delta,
            "accountant": self.accountant,
            "claim_source": self.source,
            **({"claim_settings": self.settings} if self.settings else {}),
        }


def claim_meta_keys() -> frozenset[str]:
    """Every score-file metadata key a :class:`Claim` writes (:meth:`Claim.meta`)."""
    return frozenset(Claim(None, 0.5, "", "", {"steps": 1}).meta())


def resolve_claim(
    claimed_epsilon: float | None = None,
    *,
    delta: float,
    accountant: str | None = None,
    noise_multiplier: float | None = None,
    sample_rate: float | None = None,
    steps: int | None = None,
) -> Claim:
    """The claim from an epsilon (``claimed_epsilon``; ``accountant`` then only names who
    computed it, default ``"user"``) or from DP-SGD's (``noise_multiplier``, ``sample_rate``,
    ``steps``) at ``delta`` with the library's accountant (:mod:`dpaudit.accounting.dpsgd`;
    ``accountant`` one of pld, prv, rdp, gdp, default prv). A noise multiplier of 0 claims no
    guarantee (epsilon ``None``)."""
    if isinstance(delta, bool) or not isinstance(delta, int | float) or not 0 < delta < 1:
        raise ValueError(f"delta must be a number in (0, 1), got {delta!r}")
    delta = float(delta)
    if claimed_epsilon is not None:
        eps = claimed_epsilon
        if isinstance(eps, bool) or not isinstance(eps, int | float | np.floating):
            raise ValueError(f"claimed_epsilon must be a number >= 0, got {eps!r}")
        if math.isnan(eps) or eps < 0:
            raise ValueError(f"claimed_epsilon must be a number >= 0, got {eps!r}")
        value = None if math.isinf(eps) else float(eps)
        return Claim(value, delta, accountant or "user", "given")
    missing = [
        name
        for name, value in (
            ("noise_multiplier", noise_multiplier),
            ("sample_rate", sample_rate),
            ("steps", steps),
        )
        if value is None
    ]
    if missing:
        raise ValueError(
            "give claimed_epsilon, or the DP-SGD settings noise_multiplier, sample_rate and "
            f"steps to compute it (missing: {', '.join(missing)})"
        )
    from dpaudit.accounting import dpsgd

    name = accountant or DEFAULT_ACCOUNTANT
    settings = check_claim_settings(
        noise_multiplier=noise_multiplier, sample_rate=sample_rate, steps=steps
    )
    if settings["noise_multiplier"] == 0:
        return Claim(None, delta, name, "accountant", settings)
    eps = dpsgd.epsilon(
        name, settings["noise_multiplier"], settings["sample_rate"], settings["steps"], delta
    )
    return Claim(float(eps), delta, name, "accountant", settings)


def check_rate(value: Any, name: str = "sample_rate") -> float:
    """``value`` as a float if it is a sampling rate in (0, 1]; else ``ValueError`` naming
    ``name`` (the attached auditor's and the Opacus adapter's ``sample_rate``)."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.floating):
        raise ValueError(f"{name} must be a number in (0, 1], got {value!r}")
    if not 0 < value <= 1:
        raise ValueError(f"{name} must be a number in (0, 1], got {value!r}")
    return float(value)


def check_claim_settings(**settings: Any) -> dict[str, Any]:
    """The DP-SGD settings of a claim (``noise_multiplier``, ``sample_rate``, ``steps``; those
    given and not None) as the accountant reads them, each checked as a number of its kind:
    ``noise_multiplier`` a finite number >= 0, ``sample_rate`` in (0, 1], ``steps`` a whole
    number >= 1. A bool, a string or a fractional step count is a ``ValueError`` naming the
    setting; nothing is truncated (``steps=2.7`` was accounted as 2 steps)."""
    out: dict[str, Any] = {}
    for key, value in settings.items():
        if value is None:
            continue
        number = not isinstance(value, bool) and isinstance(
            value, int | float | np.integer | np.floating
        )
        if key == "sample_rate":
            out[key] = check_rate(value, key)
        elif key == "noise_multiplier":
            if not (number and math.isfinite(value) and value >= 0):
                raise ValueError(f"noise_multiplier must be a finite number >= 0, got {value!r}")
            out[key] = float(value)
        elif key == "steps":
            if not (number and math.isfinite(value) and value >= 1 and float(value).is_integer()):
                raise ValueError(
                    f"steps must be a whole number >= 1 (the logical steps trained), got "
                    f"{value!r}"
                )
            out[key] = int(value)
        else:
            raise TypeError(f"unknown DP-SGD setting {key!r}")
    return out


def check_scores(scores: Any, membership: Any) -> tuple[np.ndarray, np.ndarray]:
    """``scores`` (m,) finite floats and ``membership`` (m,) 0/1, else a clear error naming the
    first bad canary."""
    score = np.asarray(scores, dtype=np.float64).ravel()
    member = np.asarray(membership).ravel()
    if score.shape != member.shape:
        raise ValueError(
            f"{score.size} scores for {member.size} canaries: give one score per canary"
        )
    if score.size < 2:
        raise ValueError(f"an audit needs at least 2 canaries, got {score.size}")
    bad = ~np.isfinite(score)
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(
            f"score of canary {i} is {score[i]} ({int(bad.sum())} non-finite score(s) in all): "
            "the training diverged or the scores were computed wrongly; no bound can be drawn"
        )
    if not np.isin(member, (0, 1)).all():
        raise ValueError("membership must hold 0 (OUT) or 1 (IN) for every canary")
    return score, member.astype(np.int8)


def make_score_file(
    scores: Any,
    membership: Any,
    claimed_epsilon: float | None = None,
    *,
    delta: float,
    threat_model: str = "black_box_loss",
    experiment: str = "own_training",
    setting: str = "default",
    seed: int = 0,
    extra_meta: Mapping[str, Any] | None = None,
    **claim_settings: Any,
) -> ScoreFile:
    """The ``one_run`` score file of final per-canary ``scores`` (m,; higher means IN, e.g.
    minus the loss) and their fair-coin ``membership`` (m,), computed by any framework (a JAX
    loop included); the claim as in :func:`resolve_claim`, from ``claimed_epsilon``,
    ``delta`` and its other keywords (``accountant``, ``noise_multiplier``, ``sample_rate``,
    ``steps``) in ``claim_settings``. Audit it with :func:`audit_file`, write it with
    :func:`dpaudit.scores.write` (then ``dpaudit audit`` reads it)."""
    score, member = check_scores(scores, membership)
    claim = resolve_claim(claimed_epsilon, delta=delta, **claim_settings)
    meta = {
        **one_run_meta(experiment, setting, seed),  # coins: dpaudit.audit.fair_coin_failure
        "threat_model": threat_model,
        "m": int(score.size),
        **(dict(extra_meta) if extra_meta else {}),
        **claim.meta(),
    }
    try:
        return ScoreFile(
            score=score[None, :],
            membership=member[None, :],
            canary_id=np.arange(score.size)[None, :],
            meta=meta,
            source=f"audit of {experiment!r}",
        )
    except ScoreFileError as exc:
        raise ValueError(str(exc)) from exc


def audit_scores(
    scores: Any,
    membership: Any,
    claimed_epsilon: float | None = None,
    *,
    delta: float,
    confidence: float = 0.95,
    extra_estimators: Mapping[str, Mapping[str, Any]] | None = None,
    **kwargs: Any,
) -> AuditResult:
    """The audit table and verdict (:func:`audit_file`) of final per-canary ``scores`` and
    their fair-coin ``membership`` from any framework (a JAX loop included); the claim and the
    other keywords as in :func:`make_score_file`."""
    sf = make_score_file(scores, membership, claimed_epsilon, delta=delta, **kwargs)
    return audit_file(sf, confidence, extra_estimators)


def largest_detectable_epsilon(m: int, delta: float, confidence: float = 0.95) -> float:
    """The largest bound the verdict estimators can give with ``m`` canaries, every guess they
    make right at each guess count (:func:`dpaudit.attach.power.ceiling`): no run with m
    canaries certifies more, whatever its coins, so a claim above it can never be flagged."""
    from dpaudit.attach.power import ceiling

    return ceiling(int(m), float(delta), float(confidence))


@dataclass
class AuditResult:
    """What :func:`audit_file` returns.

    ``table``: the audit table (:func:`dpaudit.audit.audit`, one row per estimator and
    selection) with ``in_verdict`` (True for :data:`VERDICT_ESTIMATORS`) and, from
    :func:`dpaudit.verdict.add_verdicts`, ``exceeds_claim`` and ``verdict`` per row.
    ``verdict``: one row (:func:`dpaudit.verdict.verdict_table` over the verdict rows) with the
    claimed epsilon, the largest valid lower bound, its estimator, ``joint_confidence`` (at
    which the maximum holds), ``flagged`` and ``verdict``, and ``largest_detectable_epsilon``.
    ``power`` and ``unseen_stages``: what the run could see (:mod:`dpaudit.attach.power`),
    printed with an unflagged verdict.
    ``conformance``: the conformance report of the training's stages (gradient canaries; None
    otherwise); ``flagged`` is the certified bound's, ``conformance.departs`` the checks'.
    """

    table: pd.DataFrame
    verdict: pd.DataFrame
    score_file: ScoreFile
    #: Stages of the training the canaries could not see (:func:`dpaudit.attach.power.power_text`).
    unseen_stages: tuple[str, ...] = ()

    @functools.cached_property
    def power(self) -> Power | None:
        """What this run could see (:func:`dpaudit.attach.power.power`): the smallest true
        epsilon the verdict flags with 80% probability at the run's q, steps and m, for
        white-box Dirac gradient canaries with a finite claim; ``None`` otherwise (computed
        on first use, seconds)."""
        from dpaudit.attach.power import power

        meta = self.score_file.meta
        v = self.verdict.iloc[0]
        claim = meta.get(CLAIMED_EPSILON)
        if not _noise_call_canaries(meta) or claim is None:
            return None
        accountant = meta["accountant"] if meta["accountant"] in _ACCOUNTANTS else "prv"
        return power(
            int(v["m"]),
            float(meta["canary_sample_rate"]),
            int(meta["steps"]),
            float(claim),
            float(meta["delta"]),
            float(v["joint_confidence"]),
            accountant=accountant,
        )

    #: The stages measured against the claim (:class:`dpaudit.attach.conformance.
    #: ConformanceReport`), when the auditor measured them; printed after the verdict.
    conformance: Any = None

    @property
    def flagged(self) -> bool:
        """True when a valid, family-free lower bound exceeds the claimed epsilon."""
        return bool(self.verdict["flagged"].iloc[0])

    @property
    def lower_bound(self) -> float:
        """The largest valid, family-free lower bound on epsilon."""
        return float(self.verdict[EPSILON_LOWER_BOUND].iloc[0])

    def __str__(self) -> str:
        v = self.verdict.iloc[0]
        claim = v[CLAIMED_EPSILON]
        claim_text = "none (no guarantee)" if not math.isfinite(claim) else f"{claim:.3g}"
        text = (
            f"claimed epsilon {claim_text} at delta {v['delta']:.3g} ({v['accountant']}); "
            f"largest valid lower bound {v['epsilon_lower_bound']:.3g} ({v['estimator']}, "
            f"joint confidence {v['joint_confidence']:.3g}); this run can certify at most "
            f"{v['largest_detectable_epsilon']:.3g}; verdict: {v['verdict']}"
        )
        if math.isnan(v[EPSILON_LOWER_BOUND]):  # e.g. membership that is not a fair coin
            text = (
                f"claimed epsilon {claim_text} at delta {v['delta']:.3g} ({v['accountant']}); "
                f"no valid lower bound; verdict: {v['verdict']}"
            )
        elif math.isfinite(claim) and claim >= v["largest_detectable_epsilon"]:
            text += (
                f" (the claim is above what {int(v['m'])} canaries can certify: this run could "
                "not have flagged it; use more canaries)"
            )
        elif math.isfinite(claim) and not self.flagged:
            from dpaudit.attach.power import power_text

            text += f"; not a clean bill: {power_text(self.power, self.unseen_stages)}"
        if self.conformance is not None:
            text += "\n" + str(self.conformance)
        return text


def audit_file(
    sf: ScoreFile,
    confidence: float = 0.95,
    extra_estimators: Mapping[str, Mapping[str, Any]] | None = None,
    unseen_stages: Sequence[str] | None = None,
) -> AuditResult:
    """Run the verdict estimators (and ``extra_estimators``, name -> estimator block, shown but
    never used by the verdict) on the one-run score file ``sf``; see :class:`AuditResult`.
    ``unseen_stages``: the training stages the audit could not see, printed with the verdict
    (default: :data:`dpaudit.attach.power.UPSTREAM_STAGES` for Dirac gradient canaries added
    at the noise call, none otherwise; a conformance check that covered a stage removes it)."""
    from dpaudit.audit import audit
    from dpaudit.verdict import verdict_specs

    if sf.meta["design"] != "one_run" or sf.n_trials != 1:
        raise ValueError(
            f"{sf.source}: the verdict audits one run (design one_run, one trial); this file "
            f"has design {sf.meta['design']!r} and {sf.n_trials} trial(s): use dpaudit audit"
        )
    specs = verdict_specs(confidence)
    extra = dict(extra_estimators or {})
    clash = sorted(set(extra) & set(specs))
    if clash:
        raise ValueError(f"extra_estimators may not reuse the verdict's names {clash}")
    table = audit([sf], {**specs, **extra})
    table, verdict = own_training_verdict(table, list(specs), sf.meta, confidence)
    verdict["largest_detectable_epsilon"] = largest_detectable_epsilon(
        sf.n_canaries, sf.delta, confidence
    )
    verdict["m"] = sf.n_canaries
    if unseen_stages is None:
        from dpaudit.attach.power import UPSTREAM_STAGES

        unseen_stages = UPSTREAM_STAGES if _noise_call_canaries(sf.meta) else ()
    return AuditResult(
        table=table, verdict=verdict, score_file=sf, unseen_stages=tuple(unseen_stages)
    )


def _noise_call_canaries(meta: Mapping[str, Any]) -> bool:
    """Whether a score file's canaries are Dirac gradient canaries added at the noise call
    (:class:`dpaudit.attach.core.GradientCanaries`, with their sample rate and steps)."""
    return meta.get("score") == DIRAC_SCORE and {"canary_sample_rate", "steps"} <= set(meta)
