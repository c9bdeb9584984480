"""Sampling checks: the records each noisy step received against Poisson sampling at rate q.

Under the claim (the Poisson-subsampled Gaussian mechanism every DP-SGD accountant of
:mod:`dpaudit.accounting.dpsgd` and Opacus analyses), each of the n records enters each of the T
noisy steps independently with probability q. Then, exactly: the records delivered in all,
sum_i c_i, are Binomial(nT, q); record i's count of steps c_i is Binomial(T, q), independently
across records; a step's batch size is Binomial(n, q), independently across steps; no record
is twice in one step. Each check below rejects one consequence; all are fixed-sample tests
read once, at the end of the training, at a level set before it (``alpha`` of the stage split
equally over the statistical checks, a Bonferroni split; the exact facts have level 0):

- **mean rate** (two-sided exact binomial test of sum_i c_i): a rate other than q, e.g. the
  claim's q computed for a larger dataset than the loader holds (the dataset size the claim's q
  implies is shown);
- **per-record inclusion rate** (exact Binomial(T, q) upper tail of the largest c_i, Bonferroni
  over the n records): records drawn more often than q, e.g. a ``WeightedRandomSampler``;
- **batch-size law** (the most common batch size occurs r times in T steps; under the claim
  P(r or more) <= sum_k P(Binomial(T, p_k) >= r), p_k the Binomial(n, q) probability of size k,
  a union bound over sizes): fixed-size batches;
- **per-epoch regularity** (the per-record counts' dispersion S = sum_i (c_i - Tq)^2 / (Tq(1-q)),
  mean n under the claim; a sum of independent non-negative variables, whose lower tail obeys
  P(E S - S >= t) <= exp(-t^2 / (2 sum_i E X_i^2)), Maurer 2003, "A bound on the deviation
  probability for sums of non-negative random variables", JIPAM 4(1), Art. 15, with
  E X_i^2 = 3 + (1 - 6q(1-q)) / (Tq(1-q)) from the Binomial's fourth central moment): records
  delivered more regularly than independent draws, e.g. each record exactly once per epoch of a
  shuffled loader accounted as Poisson (Chua et al. 2024, arXiv:2403.17673; Annamalai et al.
  2024, arXiv:2411.10614);
- **a record twice in one step** and **indices outside the dataset** (exact facts).

:func:`largest_rate_lower_bound` turns the same counts into a lower confidence bound on the
largest per-record rate, which the accounting check (:mod:`dpaudit.attach.measured_accounting`)
uses.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from dpaudit.attach.conformance import Check
from dpaudit.attach.sampling_record import SamplingRecord

#: The statistical sampling checks that share the stage's alpha (Bonferroni).
STATISTICAL_CHECKS = 4
FIXED = "fixed-sample, read at the end of the training"


def _mean_rate(rec: SamplingRecord, q: float, level: float) -> Check:
    n, t = rec.n_records, rec.steps
    total, trials = int(rec.presence.sum()), n * t
    if q >= 1:
        p = 1.0 if total == trials else 0.0
    else:
        p = float(stats.binomtest(total, trials, q).pvalue)
    mean_batch = total / t
    departs = p <= level
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
        f"two-sided exact binomial test of the {total} inclusions in {n} x {t}; {FIXED}",
        p,
        note,
    )


def _per_record(rec: SamplingRecord, q: float, level: float) -> Check:
    n, t = rec.n_records, rec.steps
    top = int(np.argmax(rec.presence))
    c = int(rec.presence[top])
    p = 1.0 if q >= 1 else min(1.0, n * float(stats.binom.sf(c - 1, t, q)))
    return Check(
        "sampling",
        "per-record inclusion rate",
        f"largest count {c} of {t} steps (record {top}; mean {rec.presence.mean():.3g})",
        f"each record Binomial({t}, {q:.4g}): {t * q:.3g} steps on average",
        p <= level,
        level,
        f"exact binomial upper tail of the largest count, Bonferroni over {n} records; {FIXED}",
        p,
    )


def _batch_sizes(rec: SamplingRecord, q: float, level: float) -> Check:
    n, t = rec.n_records, rec.steps
    sizes = np.asarray(rec.sizes)
    values, counts = np.unique(sizes, return_counts=True)
    r, size = int(counts.max()), int(values[np.argmax(counts)])
    if q >= 1:
        p = 1.0 if r == t and size == n else 0.0
    else:
        pmf = stats.binom.pmf(np.arange(n + 1), n, q)
        p = min(1.0, float(stats.binom.sf(r - 1, t, pmf[pmf > 0]).sum()))
    return Check(
        "sampling",
        "batch-size law",
        f"{r} of {t} steps held exactly {size} records (sizes {sizes.min()}-{sizes.max()})",
        f"Binomial({n}, {q:.4g}) batch sizes, independent across steps",
        p <= level,
        level,
        "most common batch size's count, union bound over the sizes; " + FIXED,
        p,
    )


def _regularity(rec: SamplingRecord, q: float, level: float) -> Check:
    n, t = rec.n_records, rec.steps
    if q >= 1:
        p = 1.0 if (rec.presence == t).all() else 0.0
        ratio = 0.0
    else:
        v = t * q * (1 - q)
        s = float((((rec.presence - t * q) ** 2) / v).sum())
        ratio = s / n
        second = n * (3 + (1 - 6 * q * (1 - q)) / v)
        p = 1.0 if s >= n else math.exp(-((n - s) ** 2) / (2 * second))
    return Check(
        "sampling",
        "per-epoch regularity",
        f"per-record count dispersion {ratio:.3g} of the Binomial's",
        "1 (each record drawn independently at each step)",
        p <= level,
        level,
        "lower tail of the counts' dispersion, Maurer (2003) bound for sums of independent "
        "non-negative variables; " + FIXED,
        p,
        "records delivered more regularly than independent draws (each about once per epoch: "
        "a shuffled loader accounted as Poisson)"
        if p <= level
        else "",
    )


def _exact_facts(rec: SamplingRecord) -> list[Check]:
    mult = np.asarray(rec.max_multiplicity)
    twice = int((mult > 1).sum())
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
