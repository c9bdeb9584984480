"""The true epsilon of every catalogue script: the mechanism it really runs, accounted.

One place for every number of the catalogue table (docs/real_data/own_training.md): the claim
each script reports and the epsilon of what it runs, at its worst-case neighbouring pair (one
record's clipped gradient on a coordinate no other record's gradient touches, the pair the
white-box Dirac canaries of Nasr et al. 2023, arXiv:2302.07956, realise). Three kinds of answer:

``exact``     the Poisson-subsampled Gaussian at the noise multiplier, rate and steps the script
              really runs, through the library's accountant (:func:`dpaudit.accounting.dpsgd.
              epsilon`, ``pld``: dp_accounting's privacy-loss distribution, a tight upper bound).
``at least``  a lower bound: the privacy loss of one test (a threshold on one statistic of
              what the training releases) between one neighbouring pair. Any test gives a valid
              lower bound on the hockey-stick divergence, hence on epsilon at ``delta``. Used
              where no accountant models the mechanism (a sampler with replacement, a
              normalisation that depends on the dataset size) or where the noise is so small
              that the PLD grid would not fit in memory.
``between``   a lower and an upper bound (shuffled fixed-size batches: no accountant is tight).

:func:`catalogue_table` gives every entry's row; ``python -m dpaudit.attach.catalogue.
true_epsilon`` prints it as the markdown table of the docs (minutes: the PLD accountant).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import special, stats

#: Bisection grid of the threshold tests (any threshold gives a valid bound; the grid only
#: decides how close to the best one).
THRESHOLDS = 4001
#: Floor of the log tail probabilities of the OUT side. Raising the probability subtracted in a
#: threshold test only lowers its delta, so the bound stays valid; it caps the bound near 700.
LOG_FLOOR = -700.0


@dataclass(frozen=True)
class TrueEpsilon:
    """``value``: the epsilon (``exact``), the lower bound (``at least``, ``between``);
    ``upper``: the upper bound of ``between``; ``how``: the method, in words."""

    value: float
    kind: str
    how: str
    upper: float | None = None

    def text(self) -> str:
        if self.kind == "exact":
            return f"{self.value:.2f}"
        if self.kind == "between":
            return f"{self.value:.2f} to {self.upper:.2f}"
        if self.value > -LOG_FLOOR - 1:
            return f">= {-LOG_FLOOR - 1:.0f} (the numerics' cap)"
        return f">= {self.value:.3g}" if self.value < 100 else f">= {self.value:.0f}"


def count_threshold_delta(
    eps: float, counts: np.ndarray, probs: np.ndarray, noise_sd: float, shift: float = 1.0
) -> float:
    """delta(eps) >= max_t P[S > t] - e^eps Q[S > t] for S = shift K + N(0, noise_sd^2),
    K ~ ``probs`` over ``counts`` (the record IN), against S = N(0, noise_sd^2) (OUT)."""
    counts, probs = np.asarray(counts, float), np.asarray(probs, float)
    keep = probs > 0
    counts, log_p = counts[keep], np.log(probs[keep])
    top = shift * counts.max()
    t = np.linspace(-5.0 * noise_sd, top + 10.0 * noise_sd, THRESHOLDS)
    log_in = special.logsumexp(
        log_p[:, None] + special.log_ndtr((shift * counts[:, None] - t[None, :]) / noise_sd),
        axis=0,
    )
    log_out = np.maximum(special.log_ndtr(-t / noise_sd), LOG_FLOOR)
    with np.errstate(over="ignore"):
        gap = np.exp(log_in) - np.exp(np.minimum(eps + log_out, 700.0))
    return float(max(gap.max(), 0.0))


def count_threshold_lower_bound(
    counts: np.ndarray, probs: np.ndarray, noise_sd: float, delta: float, shift: float = 1.0
) -> float:
    """The epsilon at ``delta`` of :func:`count_threshold_delta`: a lower bound on the
    epsilon of any mechanism that releases (a post-processing of) S for that pair."""
    from dpaudit.accounting.gaussian import epsilon_of_profile

    return epsilon_of_profile(
        lambda e: count_threshold_delta(e, counts, probs, noise_sd, shift), delta
    )


def binomial(trials: int, p: float) -> tuple[np.ndarray, np.ndarray]:
    """The Binomial(trials, p) law over 0..trials."""
    k = np.arange(trials + 1)
    return k, stats.binom.pmf(k, trials, p)


def scale_threshold_delta(eps: float, ratio: float, dof: int) -> float:
    """delta(eps) of the best threshold test on S = ||X||^2 between X ~ N(0, I_dof) and
    X ~ N(0, ratio^2 I_dof), both orders (a lower bound for any pair whose releases differ
    by that scale on ``dof`` pure-noise coordinates)."""
    r2 = ratio**2
    lo = stats.chi2.ppf(1e-300, dof) if dof < 50 else dof * 0.5
    t = np.linspace(lo, r2 * dof * 1.5 + 50.0 * math.sqrt(dof), THRESHOLDS * 5)
    sf_a, sf_b = np.maximum(stats.chi2.logsf(t, dof), LOG_FLOOR), stats.chi2.logsf(t / r2, dof)
    cdf_a, cdf_b = stats.chi2.logcdf(t, dof), np.maximum(stats.chi2.logcdf(t / r2, dof), LOG_FLOOR)
    with np.errstate(over="ignore"):
        up = np.exp(sf_b) - np.exp(np.minimum(eps + sf_a, 700.0))
        down = np.exp(cdf_a) - np.exp(np.minimum(eps + cdf_b, 700.0))
    return float(max(up.max(), down.max(), 0.0))


def scale_lower_bound(ratio: float, dof: int, delta: float) -> float:
    """The epsilon at ``delta`` of :func:`scale_threshold_delta` (0 when ``ratio`` is 1)."""
    from dpaudit.accounting.gaussian import epsilon_of_profile

    if ratio == 1.0:
        return 0.0
    return epsilon_of_profile(lambda e: scale_threshold_delta(e, ratio, dof), delta)


def dpsgd(sigma: float, q: float, steps: int, delta: float, shift: float = 1.0) -> TrueEpsilon:
    """DP-SGD with noise multiplier ``sigma`` (noise / the sensitivity of the claim), Poisson
    rate ``q``, ``steps`` steps, where one record moves the noisy sum by ``shift`` times the
    clipping norm: exact through the library's PLD accountant at sigma / shift; where its grid
    would not fit, the threshold lower bound on the summed coordinate (S = shift Binomial(T, q)
    + N(0, sigma^2 T))."""
    from dpaudit.accounting.dpsgd import GridTooLargeError, epsilon

    effective = sigma / shift
    try:
        return TrueEpsilon(
            epsilon("pld", effective, q, steps, delta),
            "exact",
            f"pld at sigma {effective:.3g}, q {q:.3g}, T {steps}",
        )
    except GridTooLargeError:
        k, p = binomial(steps, q)
        value = count_threshold_lower_bound(k, p, sigma * math.sqrt(steps), delta, shift)
        how = (
            f"threshold test on the summed coordinate, shift {shift:.3g} C per inclusion, "
            f"Binomial({steps}, {q:.3g}) inclusions, noise sigma C sqrt(T) = "
            f"{sigma * math.sqrt(steps):.3g} C (the pld grid at sigma {effective:.3g} is too large)"
        )
        return TrueEpsilon(value, "at least", how)


def shuffled(sigma: float, steps_per_epoch: int, epochs: int, delta: float) -> TrueEpsilon:
    """Shuffled fixed-size batches: at least Chua et al.'s one-epoch lower bound (2024,
    arXiv:2403.17673; :func:`dpaudit.mechanisms.shuffle_reference.shuffle_lower_bound`: more
    epochs release more, so it bounds every epoch count), at most the Gaussian mechanism
    composed ``epochs`` times without any amplification (each record is in exactly one batch
    per epoch: mu = sqrt(epochs) / sigma, exact for Gaussian composition)."""
    from dpaudit.accounting.gaussian import gdp_epsilon
    from dpaudit.mechanisms.shuffle_reference import shuffle_lower_bound

    low = shuffle_lower_bound(sigma, steps_per_epoch, delta)
    high = gdp_epsilon(delta, math.sqrt(epochs) / sigma)
    how = (
        f"Chua et al. one-epoch lower bound at sigma {sigma:.3g}, {steps_per_epoch} batches; "
        f"upper: {epochs} Gaussian steps without amplification (mu {math.sqrt(epochs) / sigma:.3g})"
    )
    return TrueEpsilon(low, "between", how, upper=high)


def with_replacement(
    sigma: float, batch: int, p: float, steps: int, delta: float
) -> TrueEpsilon:
    """A sampler drawing ``batch`` records per step with replacement, the record at
    probability ``p`` per draw: it enters the sum Binomial(batch, p) times a step. Lower bound:
    the threshold test on the summed coordinate (S = Binomial(T batch, p) + N(0, sigma^2 T))."""
    k, pmf = binomial(steps * batch, p)
    cut = pmf > 1e-300
    value = count_threshold_lower_bound(k[cut], pmf[cut], sigma * math.sqrt(steps), delta)
    how = (
        f"threshold test on the summed coordinate: Binomial({steps} x {batch}, {p:.3g}) "
        f"copies against noise sigma C sqrt(T), sigma {sigma:.3g}"
    )
    return TrueEpsilon(value, "at least", how)


def floored_normalisation(
    sigma: float, n: int, q: float, steps: int, noise_coordinates: int, delta: float
) -> TrueEpsilon:
    """Opacus' update divided by int(n q) (Opacus #819, #571): between n and n - 1 records the
    update's scale differs by int(n q) / int((n - 1) q) on every coordinate. Lower bound: the
    larger of the DP-SGD epsilon (exact, :func:`dpsgd`) and the threshold test on the squared
    norm of the updates at the ``noise_coordinates`` coordinates no record's gradient reaches,
    over ``steps`` steps."""
    from dpaudit.attach.normalisation_checks import opacus_divisor

    here, fewer = opacus_divisor(n, q), opacus_divisor(n - 1, q)
    scale = scale_lower_bound(here / fewer, noise_coordinates * steps, delta)
    base = dpsgd(sigma, q, steps, delta)
    how = (
        f"scale {here} / {fewer} seen on {noise_coordinates} x {steps} "
        f"pure-noise coordinates (threshold test on their squared norm: {scale:.3g}); "
        f"the Poisson mechanism alone: {base.value:.3g}"
    )
    return TrueEpsilon(max(scale, base.value), "at least", how)


def zero_gradient_coordinates(x: np.ndarray, hidden: int) -> int:
    """First-layer weights from input features that are zero in every record of ``x``: no
    record's gradient reaches them."""
    return int((np.abs(x.reshape(len(x), -1)).max(axis=0) == 0).sum()) * hidden


def claimed(sigma: float, q: float, steps: int, delta: float, accountant: str) -> float:
    """The user's accountant's epsilon (:func:`dpaudit.accounting.dpsgd.poisson_epsilon`)."""
    from dpaudit.accounting.dpsgd import poisson_epsilon

    eps = poisson_epsilon(sigma, q, steps, delta, accountant)
    assert eps is not None
    return eps


def catalogue_table(
    x_train: np.ndarray,
    y_train: np.ndarray,
    n_test: int,
    *,
    target: float = 2.0,
    delta: float = 1e-5,
    batch: int = 360,
    epochs: int = 10,
    hidden: int = 256,
    accountant: str = "rdp",
) -> list[dict[str, Any]]:
    """One row per catalogue entry (config/cpu/own_training.yaml's settings by default):
    ``entry``, ``stage``, ``claimed`` (what the script reports), ``true`` (a
    :class:`TrueEpsilon`)."""
    from dpaudit.accounting.dpsgd import calibrate_noise
    from dpaudit.attach.catalogue import accounting, clipping, noise, sampling

    n = len(y_train)
    per_epoch = math.ceil(n / batch)
    q, steps = 1.0 / per_epoch, epochs * per_epoch
    sigma = calibrate_noise(target, delta, q, steps, accountant)
    claim = claimed(sigma, q, steps, delta, accountant)
    rows: list[dict[str, Any]] = []

    def add(entry: str, stage: str, claimed_eps: float, true: TrueEpsilon) -> None:
        rows.append({"entry": entry, "stage": stage, "claimed": claimed_eps, "true": true})

    correct = dpsgd(sigma, q, steps, delta)
    for entry in ("opacus_poisson", "opacus_batch_memory_manager", "handwritten"):
        add(f"correct:{entry}", "none", claim, correct)
    add("sampling:shuffled_batches", "sampling", claim, shuffled(sigma, per_epoch, epochs, delta))
    weights = np.where(y_train == sampling.UPWEIGHTED_CLASS, sampling.UPWEIGHT, 1.0)
    p = sampling.UPWEIGHT / float(weights.sum())
    add(
        "sampling:weighted_sampler_kept",
        "sampling",
        claim,
        with_replacement(sigma, batch, p, steps, delta),
    )
    add("sampling:weighted_sampler_replaced", "sampling", claim, correct)
    for entry, n_sub, b_sub in (
        ("floored_expected_batch", sampling.FLOORED_N, sampling.FLOORED_BATCH),
        ("tiny_dataset", sampling.TINY_N, sampling.TINY_BATCH),
    ):
        q_sub = 1.0 / math.ceil(n_sub / b_sub)
        t_sub = epochs * math.ceil(n_sub / b_sub)
        s_sub = calibrate_noise(target, delta, q_sub, t_sub, accountant)
        coords = zero_gradient_coordinates(x_train[:n_sub], hidden)
        add(
            f"sampling:{entry}",
            "normalisation",
            claimed(s_sub, q_sub, t_sub, delta, accountant),
            floored_normalisation(s_sub, n_sub, q_sub, t_sub, coords, delta),
        )
    # clipping: the sensitivity the script really has, in units of the claim's C
    add(
        "clipping:fast_clipping_ignores_max_grad_norm",
        "clipping",
        claim,
        dpsgd(sigma, q, steps, delta, shift=1.0 / clipping.FAST_CLIPPING_ASKED),
    )
    n_micro = n // clipping.MICROBATCH
    q_micro = 1.0 / math.ceil(n_micro / (batch // clipping.MICROBATCH))
    t_micro = epochs * round(1 / q_micro)
    s_micro = calibrate_noise(target, delta, q_micro, t_micro, accountant)
    add(
        "clipping:microbatch_clipping",
        "clipping",
        claimed(s_micro, q_micro, t_micro, delta, accountant),
        dpsgd(s_micro, q_micro, t_micro, delta, shift=2.0),
    )
    # per-layer clipping of the mean loss's gradients: a record moves the sum by b C, b the
    # batch holding it (1 + Binomial(n - 1, q)); bound with b >= its 1e-6 quantile
    b_low = 1 + int(stats.binom.ppf(1e-6, n - 1, q))
    q_low = q * float(stats.binom.sf(b_low - 2, n - 1, q))
    layer = dpsgd(sigma, q_low, steps, delta, shift=float(b_low))
    add(
        "clipping:per_layer_clipping_batch_factor",
        "clipping",
        claim,
        TrueEpsilon(layer.value, "at least", f"batch b >= {b_low} (all but 1e-6): {layer.how}"),
    )
    add("noise:noise_for_mean_on_sum", "noise", claim, dpsgd(sigma, q, steps, delta, batch))
    t_v1, a_v1 = noise.ABOVE_TARGET_EPSILON, noise.ABOVE_TARGET_ACCOUNTANT
    s_v1 = noise.opacus_v1_noise_multiplier(t_v1, delta, q, steps, a_v1)
    v1 = dpsgd(s_v1, q, steps, delta)
    own = claimed(s_v1, q, steps, delta, a_v1)
    add(
        "noise:noise_multiplier_above_target",
        "noise",
        t_v1,
        TrueEpsilon(v1.value, v1.kind, f"{v1.how}; its own {a_v1} accountant: {own:.4f}"),
    )
    s_few = calibrate_noise(target, delta, q, per_epoch, accountant)
    add("accounting:fewer_steps_claimed", "accounting", target, dpsgd(s_few, q, steps, delta))
    q_big = batch / (n + n_test)
    s_big = calibrate_noise(target, delta, q_big, steps, accountant)
    add("accounting:larger_dataset_claimed", "accounting", target, dpsgd(s_big, q, steps, delta))
    acc = accounting.ACCUMULATION
    s_acc = calibrate_noise(target, delta, q / acc, steps * acc, accountant)
    add(
        "accounting:accumulation_counted_twice",
        "accounting",
        claimed(s_acc, q / acc, steps * acc, delta, accountant),
        dpsgd(s_acc, q, steps, delta),
    )
    return rows


def markdown(rows: Sequence[dict[str, Any]]) -> str:
    """The rows as the docs' markdown table."""
    lines = ["| entry | stage | claimed | true epsilon | how |", "| --- | --- | --- | --- | --- |"]
    for r in rows:
        t = r["true"]
        cells = [f"`{r['entry']}`", r["stage"], f"{r['claimed']:.2f}", t.text(), t.how]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> int:
    import tempfile
    from pathlib import Path

    from dpaudit.data.prepare import load_prepared, prepare_dataset

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "digits.npz"
        prepare_dataset("digits", {}, tmp, None, str(out))
        data = load_prepared(out)[0]
    print(markdown(catalogue_table(data["x_train"], data["y_train"], len(data["y_test"]))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
