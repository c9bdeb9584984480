"""Sampling checks: the records each noisy step received against Poisson sampling at rate q.

Under the claim (the Poisson-subsampled Gaussian mechanism every DP-SGD accountant of
:mod:`dpaudit.accounting.dpsgd` and Opacus analyses), each of the n records enters each of the T
noisy steps independently with probability q, whatever happened before. Then, given the past,
exactly: step t's batch size s_t is Binomial(n, q); record i's count of steps c_i(t) grows by a
Bernoulli(q); the records of step t that step t - 1 also held are Binomial(s_(t-1), q); no record
is twice in one step. Each statistical check below is an **anytime-valid** test of one of these
consequences, a mixture likelihood-ratio martingale read at every step with Ville's inequality
(:mod:`dpaudit.attach.anytime`; Ramdas et al. 2023, arXiv:2210.01948; Howard et al. 2021,
arXiv:1810.08240): it departs at the first step its e-process reaches 1 / level, so its error
probability holds over all steps at once and ``first_flagged_step`` says when. ``alpha`` of the
stage is split equally over the statistical checks (Bonferroni); the exact facts have level 0.

- **mean rate** (the batch sizes s_t vs Binomial(n, q), two-sided mixture over rates q e^(+-u)):
  a rate other than q, e.g. the claim's q computed for a larger dataset than the loader holds
  (the dataset size the claim's q implies is shown);
- **per-record inclusion rate** (the largest count c_i(t) vs Binomial(t, q), one-sided mixture
  over rates above q, each record's e-process at level / n, a union bound over the records; the
  largest count carries the largest e-value): records drawn more often than q, e.g. a
  ``WeightedRandomSampler``;
- **batch-size law** (the indicator that s_t equals the most common size of the steps before it,
  whose probability under the claim is that size's Binomial(n, q) probability, a Bernoulli
  mixture over event rates): fixed-size batches;
- **per-epoch regularity** (the records step t shares with step t - 1 vs Binomial(s_(t-1), q),
  one-sided mixture over rates below q): records delivered more regularly than independent
  draws, e.g. each record exactly once per epoch of a shuffled loader accounted as Poisson, whose
  consecutive batches are disjoint (Chua et al. 2024, arXiv:2403.17673; Annamalai et al. 2024,
  arXiv:2411.10614);
- **a record twice in one step** and **indices outside the dataset** (exact facts).

:func:`largest_rate_lower_bound` turns the final counts into a lower confidence bound on the
largest per-record rate, which the accounting check (:mod:`dpaudit.attach.measured_accounting`)
uses; it is fixed-sample, read at the end.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from dpaudit.attach.anytime import EVENT_RATES, binomial_log_e, first_crossing, rate_grid
from dpaudit.attach.conformance import Check
from dpaudit.attach.sampling_record import SamplingRecord

#: The statistical sampling checks that share the stage's alpha (Bonferroni).
STATISTICAL_CHECKS = 4
ANYTIME = "anytime-valid (mixture likelihood-ratio martingale, Ville's inequality)"


def _crossing(log_e: np.ndarray, level: float) -> tuple[bool, int | None, float]:
    """(departs, first flagged step, anytime p-value) of an e-process over steps 1..T."""
    first, p = first_crossing(log_e, level)
    return first is not None, first, p


def _mean_rate(rec: SamplingRecord, q: float, level: float) -> Check:
    n, t = rec.n_records, rec.steps
    sizes = np.asarray(rec.sizes)
    total, trials = int(sizes.sum()), n * t
    if q >= 1:
        short = np.flatnonzero(sizes < n)
        first = int(short[0]) + 1 if short.size else None
        departs, p = first is not None, 0.0 if short.size else 1.0
    else:
        log_e = binomial_log_e(sizes, np.full(t, n), q, rate_grid(q, "two-sided"))
        departs, first, p = _crossing(log_e, level)
    mean_batch = total / t
    note = ""
    if departs and mean_batch > 0:
        note = (
            f"the claim's q = {q:.4g} with the mean batch {mean_batch:.4g} implies a dataset of "
            f"{mean_batch / q:.0f} records; the loader's dataset holds {n}"
        )
    return Check(
        "sampling",
        "mean rate",
        f"{total / trials:.4g} (mean batch {mean_batch:.4g} of {n} records over {t} steps)",
        f"q = {q:.4g} (mean batch {q * n:.4g})",
        departs,
        level,
        f"batch sizes vs Binomial({n}, q), two-sided; {ANYTIME}",
        p,
        note,
        True,
        first,
    )


def _per_record(rec: SamplingRecord, q: float, level: float) -> Check:
    n, t = rec.n_records, rec.steps
    top = int(np.argmax(rec.presence))
    c = int(rec.presence[top])
    if q >= 1:
        departs, first, p = False, None, 1.0
    else:
        grows = np.diff(np.asarray(rec.top_counts), prepend=0)
        log_e = binomial_log_e(grows, np.ones(t), q, rate_grid(q, "greater"))
        departs, first, p = _crossing(log_e, level / n)
        p = min(1.0, n * p)
    return Check(
        "sampling",
        "per-record inclusion rate",
        f"largest count {c} of {t} steps (record {top}; mean {rec.presence.mean():.3g})",
        f"each record Binomial({t}, {q:.4g}): {t * q:.3g} steps on average",
        departs,
        level,
        f"largest count vs Binomial(t, q), one-sided, each record at level / {n}; {ANYTIME}",
        p,
        "",
        True,
        first,
    )


def _batch_sizes(rec: SamplingRecord, q: float, level: float) -> Check:
    n, t = rec.n_records, rec.steps
    sizes = np.asarray(rec.sizes)
    values, counts = np.unique(sizes, return_counts=True)
    r, size = int(counts.max()), int(values[np.argmax(counts)])
    if q >= 1 or t < 2:
        departs, first, p = False, None, 1.0
    else:
        pmf = stats.binom.pmf(np.arange(n + 1), n, q)
        hits, null = np.zeros(t - 1), np.zeros(t - 1)
        seen: dict[int, int] = {}
        mode = int(sizes[0])
        for i, s in enumerate(sizes.tolist()):
            if i:  # the most common size of the steps before this one (predictable)
                hits[i - 1], null[i - 1] = s == mode, pmf[mode]
            seen[s] = seen.get(s, 0) + 1
            if seen[s] > seen[mode]:
                mode = s
        null = np.clip(null, 1e-300, 1 - 1e-12)
        log_e = binomial_log_e(hits, np.ones(t - 1), null, EVENT_RATES)
        first, p = first_crossing(log_e, level, start=2)
        departs = first is not None
    return Check(
        "sampling",
        "batch-size law",
        f"{r} of {t} steps held exactly {size} records (sizes {sizes.min()}-{sizes.max()})",
        f"Binomial({n}, {q:.4g}) batch sizes, independent across steps",
        departs,
        level,
        "each size equal to the most common size before it, vs its Binomial probability; "
        + ANYTIME,
        p,
        "",
        True,
        first,
    )


def _regularity(rec: SamplingRecord, q: float, level: float) -> Check:
    t = rec.steps
    shared = np.asarray(rec.overlaps[1:], dtype=np.float64)
    before = np.asarray(rec.sizes[:-1], dtype=np.float64)
    if q >= 1 or t < 2:
        departs, first, p = False, None, 1.0
    else:
        log_e = binomial_log_e(shared, before, q, rate_grid(q, "less"))
        first, p = first_crossing(log_e, level, start=2)
        departs = first is not None
    expected = q * before.sum()
    return Check(
        "sampling",
        "per-epoch regularity",
        f"{int(shared.sum())} records shared by consecutive steps ({expected:.4g} expected)",
        "Binomial(previous batch, q) records shared (each record drawn independently at each "
        "step)",
        departs,
        level,
        "records a step shares with the previous one vs Binomial(s_(t-1), q), one-sided; "
        + ANYTIME,
        p,
        "records delivered more regularly than independent draws (consecutive batches nearly "
        "disjoint: a shuffled loader accounted as Poisson)"
        if departs
        else "",
        True,
        first,
    )


def _exact_facts(rec: SamplingRecord) -> list[Check]:
    mult = np.asarray(rec.max_multiplicity)
    twice = int((mult > 1).sum())
    first_twice = int(np.argmax(mult > 1)) + 1 if twice else None
    out = [
        Check(
            "sampling",
            "record twice in one step",
            f"{twice} of {rec.steps} steps held a record more than once"
            + (f" (up to {int(mult.max())} times)" if twice else ""),
            "never (each record at most once per step)",
            twice > 0,
            0.0,
            "exact count",
            None,
            "",
            True,
            first_twice,
        )
    ]
    if rec.out_of_range:
        out.append(
            Check(
                "sampling",
                "indices outside the dataset",
                f"{rec.out_of_range} delivered indices outside 0..{rec.n_records - 1}",
                "every index a record of the dataset",
                True,
                0.0,
                "exact count",
                None,
                "",
                True,
                rec.first_out_of_range,
            )
        )
    return out


def sampling_checks(rec: SamplingRecord, q: float, alpha: float) -> list[Check]:
    """The sampling checks of ``rec`` against Poisson sampling at rate ``q`` (see the module
    docstring), the statistical ones each at ``alpha`` / :data:`STATISTICAL_CHECKS`; none when
    no noisy step was recorded or the indices could not be read."""
    if rec.steps == 0 or rec.unobservable is not None:
        return []
    level = alpha / STATISTICAL_CHECKS
    return [
        _mean_rate(rec, q, level),
        _per_record(rec, q, level),
        _batch_sizes(rec, q, level),
        _regularity(rec, q, level),
        *_exact_facts(rec),
    ]


def largest_rate_lower_bound(rec: SamplingRecord, alpha: float) -> tuple[float, float]:
    """(lower bound, mean rate): a lower confidence bound, at confidence 1 - ``alpha``, on the
    largest per-record inclusion rate, and the measured mean rate. The bound is the larger of
    the Clopper-Pearson lower bounds of the mean rate (at ``alpha`` / 2; the mean is at most the
    largest rate) and of the largest count's record (at ``alpha`` / (2n), a Bonferroni bound
    over the records), each valid when a record's steps are independent draws."""
    n, t = rec.n_records, rec.steps
    total, trials = int(rec.presence.sum()), n * t
    mean = total / trials
    lb_mean = float(stats.beta.ppf(alpha / 2, total, trials - total + 1)) if total else 0.0
    c = int(rec.presence.max())
    lb_top = float(stats.beta.ppf(alpha / (2 * n), c, t - c + 1)) if c else 0.0
    return max(lb_mean, lb_top), mean
