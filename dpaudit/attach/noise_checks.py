"""Noise check: the noise really added, measured at the canary coordinates no canary touched.

At step t the noisy sum at coordinate j is x_tj = d_tj + sigma C Z_tj: the data's summed
clipped gradient d_tj (0 on coordinates the data never moves) plus the noise. Under the claim the
noise is N(0, sigma^2 C^2), independent of everything before it, so given the past,
sum_j x_tj^2 / (sigma C)^2 over k coordinates is noncentral chi-square with k degrees of freedom
(noncentrality sum_j d_tj^2 / (sigma C)^2 >= 0), which stochastically dominates chi-square(k)
whatever the data do; over the steps the sum dominates chi-square(sum_t k_t). The check reads the
coordinates of the canaries *not drawn* at each step (their canary gradient is 0 there) and
departs when the sum is improbably small under chi-square (lower tail at the stage's alpha): too
little noise (noise for the mean added to the sum, noise that forgets the clipping norm, a
noise multiplier below the one claimed), or a noisy sum divided before it was observed. It
cannot see too *much* noise (not a privacy violation), nor noise reused across steps or of
another law with the right variance.

The test is **anytime-valid**: the likelihood ratio of a smaller noise scale, averaged over a
grid of scales (:func:`dpaudit.attach.anytime.gaussian_scale_log_e`), is a test supermartingale
under the claim whatever the data add, a function of the running sums only; it departs when it
reaches 1 / level at some read (Ville's inequality; Ramdas et al. 2023, arXiv:2210.01948). A
hand-written loop keeps the running sums after each step, so the first flagged step is known;
the Opacus adapter keeps them on the device and they are read once, at the audit.

The same sum gives an upper confidence bound on the noise standard deviation,
sqrt(sum x^2 / chi2.ppf(a, df)) / C (:func:`noise_upper_bound`), which the accounting check uses
for the measured mechanism when it is below the claimed multiplier.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import stats

from dpaudit.attach.anytime import first_crossing, gaussian_scale_log_e
from dpaudit.attach.conformance import Check


def noise_upper_bound(sum_sq: float, df: int, clip_norm: float, alpha: float) -> float:
    """An upper confidence bound (confidence 1 - ``alpha``) on the effective noise multiplier,
    from ``sum_sq`` over ``df`` untouched canary coordinates (see the module docstring)."""
    if df == 0:
        return math.inf
    return math.sqrt(sum_sq / float(stats.chi2.ppf(alpha, df))) / clip_norm


def noise_check(
    sum_sq: float,
    df: int,
    noise_multiplier: float,
    clip_norm: float,
    level: float,
    path: Sequence[tuple[float, int]] | None = None,
) -> Check:
    """The noise check of ``sum_sq`` over ``df`` coordinate-steps against noise std
    ``noise_multiplier`` x ``clip_norm``, at error probability ``level``; ``path``: the running
    (sum of squares, coordinate-steps) after each noisy step (None: only the final read)."""
    scale = noise_multiplier * clip_norm
    reads = list(path) if path else [(sum_sq, df)]
    first, p = None, 1.0
    if scale > 0:
        ys = np.array([r[0] for r in reads]) / scale**2
        log_e = gaussian_scale_log_e(ys, np.array([r[1] for r in reads]))
        first, p = first_crossing(log_e, level)
    departs = first is not None
    if not path:  # one read, at the end: the step of the crossing is not known
        first = None
    rms = math.sqrt(sum_sq / df) / clip_norm
    return Check(
        "noise",
        "noise scale at untouched canary coordinates",
        f"root mean square / C = {rms:.4g} over {df} coordinate-steps (noise plus any data "
        "gradient there)",
        f"noise multiplier {noise_multiplier:.4g} (std {scale:.4g})",
        departs,
        level,
        "likelihood ratio of smaller noise scales vs chi-square, which the data's gradients can "
        "only raise; anytime-valid (mixture supermartingale, Ville's inequality)"
        + ("" if path else "; running sums read once, at the audit"),
        p,
        "less noise than claimed reached the update (or the noisy sum was divided, e.g. by the "
        "batch size, before it was observed)"
        if departs
        else "",
        True,
        first,
    )
