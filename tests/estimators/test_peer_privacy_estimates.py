"""dpaudit's Clopper-Pearson bound from counts against values recorded from Microsoft's
``privacy-estimates`` 0.1.0.post1 (``compute_eps_lo(..., method="beta")``), an independent
implementation of the same bound: each rate's one-sided Clopper-Pearson upper bound at
(1 - confidence) / 2 (Clopper and Pearson 1934) and the larger of the two ratios of Eq. (1) of
Annamalai et al. 2024 (arXiv:2411.10614), i.e. the (epsilon, delta) region of Kairouz, Oh and
Viswanath 2015 (arXiv:1311.0776).

The peer is NOT imported here: the values below were produced by :func:`_privacy_estimates_value`
with privacy-estimates installed (``pip install -e '.[bench]'``). The two libraries differ on an
attack worse than chance (FPR + FNR above 1 at both ends of the intervals): privacy-estimates
flips the attack and bounds the flipped one, dpaudit's rule is fixed (higher score means IN)
and its bound is 0; that row pins the difference.
"""

from __future__ import annotations

import pytest

from dpaudit.estimators.multi_run.definition import epsilon_from_counts

#: (false positives, non-members, false negatives, members, delta, confidence, the peer's
#: eps_lo), recorded with privacy-estimates 0.1.0.post1 and statsmodels 0.15.0.
PRIVACY_ESTIMATES_0_1_0 = [
    (10, 1000, 500, 1000, 1e-05, 0.95, 3.2419952494409845),
    (3, 5000, 2000, 5000, 1e-05, 0.95, 5.812745070432181),
    (0, 100, 40, 100, 1e-05, 0.95, 2.6194705155687004),
    (50, 5000, 4000, 5000, 1e-05, 0.95, 2.664253210184819),
    (100, 1000, 30, 1000, 1e-05, 0.95, 3.0288704709267398),
    (2361, 2500, 12, 2500, 1e-05, 0.95, 1.7241053279910177),
    (10, 1000, 500, 1000, 0.001, 0.99, 3.068964757897288),
    (7, 200, 150, 300, 0.0, 0.9, 1.9412230153314503),
    (480, 1000, 490, 1000, 1e-05, 0.95, 0.0),
]

#: An attack worse than chance: the peer bounds the flipped attack, dpaudit reports 0.
INVERTED = (900, 1000, 950, 1000, 1e-05, 0.95, 2.5992064827528365)


def _privacy_estimates_value(fp: int, n_out: int, fn: int, n_in: int, delta, confidence):
    """How the reference values were produced (needs privacy-estimates; not run by the tests)."""
    from privacy_estimates import AttackResults, compute_eps_lo

    counts = AttackResults(FN=fn, FP=fp, TN=n_out - fp, TP=n_in - fn)
    return float(compute_eps_lo(counts, delta, 1 - confidence, "beta"))


@pytest.mark.parametrize(
    ("fp", "n_out", "fn", "n_in", "delta", "conf", "peer"), PRIVACY_ESTIMATES_0_1_0
)
def test_equals_privacy_estimates_beta(fp, n_out, fn, n_in, delta, conf, peer):
    """epsilon_from_counts equals privacy-estimates' Clopper-Pearson eps_lo on the same counts
    (recorded values; runs without the peer installed)."""
    ours = epsilon_from_counts(fp, n_out, fn, n_in, delta, conf)[0]
    assert ours == pytest.approx(peer, rel=1e-12, abs=1e-12)


def test_inverted_attack_differs_from_privacy_estimates():
    """On an attack worse than chance dpaudit's fixed rule gives 0 where the peer, flipping
    the attack, reported a positive bound."""
    fp, n_out, fn, n_in, delta, conf, peer = INVERTED
    assert peer > 2.5
    assert epsilon_from_counts(fp, n_out, fn, n_in, delta, conf)[0] == 0.0
