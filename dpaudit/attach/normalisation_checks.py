"""Normalisation check: the divisor of the released update must not depend on the dataset size.

Under add/remove adjacency the dataset size n is private: a neighbouring dataset has n - 1 or
n + 1 records. DP-SGD releases (sum of clipped gradients + noise) / D; the analysis of every
accountant (Abadi et al. 2016, arXiv:1607.00133, Algorithm 1) takes D as a public constant,
so the noisy sum and the update are one post-processing of the other. When D is a function of n
that differs at a neighbour, the scale of every update, pure-noise coordinates included,
reveals which of the two datasets was used, a privacy loss the accountant does not model.

Opacus' ``make_private`` sets the ``DPOptimizer``'s ``expected_batch_size`` to
``int(len(data_loader.dataset) * sample_rate)`` and, with ``loss_reduction="mean"``, divides
the noisy sum by it (``scale_grad``). When int(n q) differs from int((n - 1) q) or
int((n + 1) q) the update's scale reveals n: Opacus #819 (1,400 records, q = 1/4: 350 against
349) and #571 (40 records in batches of 10: 10 against 9). Where n q lies strictly between two
integers (the digits' 1,438 records at q = 1/4: 359.5) the floor is the same for both
neighbours and the update is private as claimed.

The check reads the user's own objects only: the optimizer's ``loss_reduction`` and
``expected_batch_size``, the size of the dataset its loader draws from, the sample rate Opacus
accounts (the loader's), and the divisor actually applied (the noisy sum against the gradient
the optimizer steps on, at the canary coordinates, in every noisy step). It is an exact fact
(error probability 0), true from the first noisy step. A hand-written loop divides where the
auditor cannot see it: the stage is then ``unseen``, not passed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dpaudit.attach.conformance import Check

#: Relative tolerance between the divisor applied and ``expected_batch_size`` (float rounding).
APPLIED_TOLERANCE = 1e-4

#: What a divisor that does not leak the dataset size looks like (the check's claim).
CLAIMED = "a divisor that is the same for every neighbouring dataset (n - 1, n, n + 1 records)"


def opacus_divisor(n_records: int, sample_rate: float) -> int:
    """The ``expected_batch_size`` Opacus' ``make_private`` computes for a dataset of
    ``n_records`` at ``sample_rate``: ``int(n q)``, in Opacus' own float arithmetic."""
    return int(n_records * sample_rate)


@dataclass(frozen=True)
class Normalisation:
    """What an auditor measured of the update's normalisation: ``loss_reduction`` (``mean``:
    the noisy sum is divided by ``expected_batch_size``; ``sum``: not divided),
    ``n_records`` (the size of the dataset the loader draws from), ``sample_rate`` (the rate
    Opacus accounts) and ``applied`` (the smallest and largest divisor measured over the noisy
    steps, None where not measured) with ``applied_steps`` steps measured."""

    loss_reduction: str
    expected_batch_size: float | None
    n_records: int
    sample_rate: float
    applied: tuple[float, float] | None = None
    applied_steps: int = 0


def _applied_text(norm: Normalisation) -> str:
    if norm.applied is None:
        return "divisor applied not measured"
    low, high = norm.applied
    where = f"in {norm.applied_steps} noisy steps"
    if math.isclose(low, high, rel_tol=APPLIED_TOLERANCE):
        return f"divisor applied {low:.6g} {where}"
    return f"divisor applied between {low:.6g} and {high:.6g} {where}"


def normalisation_check(norm: Normalisation) -> Check:
    """The normalisation check of ``norm`` (see the module docstring); departs when the divisor
    is make_private's int(n q) and int(n' q) differs for a neighbour n' = n - 1 or n + 1."""
    n, q = norm.n_records, norm.sample_rate
    applied = _applied_text(norm)
    notes = []
    if norm.loss_reduction != "mean" or norm.expected_batch_size is None:
        reduction = norm.loss_reduction
        measured = f"the noisy sum is not divided (loss_reduction={reduction!r}); {applied}"
        departs = False
    else:
        e = norm.expected_batch_size
        here, fewer, more = (opacus_divisor(k, q) for k in (n, n - 1, n + 1))
        if e != here:
            measured = (
                f"the update is divided by expected_batch_size = {e:g}, not make_private's "
                f"int(n q) = {here} (n = {n} records in the loader's dataset, q = {q:.6g}): set "
                f"by the script, whether it depends on n is not visible; {applied}"
            )
            departs = False
        else:
            departs = fewer != here or more != here
            measured = (
                f"the update is divided by int(n q) = {here} (make_private's expected_batch_size"
                f"; n = {n} records in the loader's dataset, q = {q:.6g}), would be by "
                f"{fewer} with one record fewer and by {more} with one more; {applied}"
            )
            if departs:
                notes.append(
                    "the scale of each update reveals the dataset size (Opacus #819, #571); "
                    "add/remove DP needs a divisor that does not depend on n"
                )
        if norm.applied is not None and not all(
            math.isclose(a, e, rel_tol=APPLIED_TOLERANCE) for a in norm.applied
        ):
            notes.append(f"the divisor applied is not expected_batch_size = {e:g}")
    return Check(
        "normalisation",
        "update divisor against the dataset size",
        measured,
        CLAIMED,
        departs,
        0.0,
        "exact: the optimizer's expected_batch_size and loss_reduction, the loader's dataset "
        "size and sample rate, the divisor measured in each noisy step",
        None,
        "; ".join(notes),
        True,
        1 if departs else None,
    )
