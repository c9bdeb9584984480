"""Claimed epsilon of a DP-SGD run: always the Poisson-subsampled Gaussian accountant's.

Opacus's accountants (``rdp``: Mironov et al. 2019; ``prv``: Gopi et al. 2021; ``gdp``: Dong et
al.) compose ``steps`` Poisson-subsampled Gaussian mechanisms with rate ``q`` and noise
multiplier ``sigma``. This is the guarantee claimed whatever sampler actually ran (the shuffling
paper's point, Annamalai et al. §1): the score file records both.
"""

from __future__ import annotations

import functools
import math
import warnings

from dpaudit.opacus_import import import_opacus

#: ``train.accountant``: the accountants a training job calibrates its noise with.
TRAINING_ACCOUNTANTS = ("rdp", "prv", "gdp")


def _check(accountant: str, delta: float | None = None) -> None:
    if accountant not in TRAINING_ACCOUNTANTS:
        raise ValueError(
            f"unknown accountant {accountant!r}; allowed: {list(TRAINING_ACCOUNTANTS)}"
        )
    if delta is not None and not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta!r}")


def poisson_epsilon(
    noise_multiplier: float, sample_rate: float, steps: int, delta: float, accountant: str = "rdp"
) -> float | None:
    """Epsilon at ``delta`` of ``steps`` Poisson-subsampled Gaussian steps; ``None`` (no
    guarantee) when ``noise_multiplier`` is 0."""
    _check(accountant, delta)
    if noise_multiplier == 0:
        return None
    import_opacus()
    from opacus.accountants import create_accountant

    from dpaudit.accounting.dpsgd import guarded_accountant_name

    # prv: checked against the grid limit before it allocates (GridTooLargeError)
    acc = create_accountant(guarded_accountant_name(accountant))
    acc.history = [(float(noise_multiplier), float(sample_rate), int(steps))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eps = float(acc.get_epsilon(delta=delta))
    if not math.isfinite(eps):
        raise RuntimeError(f"accountant {accountant} returned a non-finite epsilon ({eps})")
    return eps


@functools.lru_cache(maxsize=256)
def calibrate_noise(
    target_epsilon: float, delta: float, sample_rate: float, steps: int, accountant: str = "rdp"
) -> float:
    """The noise multiplier for which the accountant claims ``target_epsilon`` (Opacus's
    ``get_noise_multiplier``, tolerance 0.01 in epsilon); cached, as it takes seconds.

    A target the accountant cannot reach with any noise Opacus searches raises ``ValueError``
    naming the target, delta, sample rate and steps (Opacus says only "The privacy budget is
    too low."). With ``prv``, a noise level whose PRV grid would exceed the limit (tiny noise,
    a huge target) raises :class:`dpaudit.accounting.dpsgd.GridTooLargeError` before the
    grid is allocated.
    """
    _check(accountant, delta)
    if not target_epsilon > 0:
        raise ValueError(f"target_epsilon must be > 0, got {target_epsilon}")
    import_opacus()
    from opacus.accountants.utils import get_noise_multiplier

    from dpaudit.accounting.dpsgd import GridTooLargeError, guarded_accountant_name

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            sigma = get_noise_multiplier(
                target_epsilon=target_epsilon,
                target_delta=delta,
                sample_rate=sample_rate,
                steps=steps,
                accountant=guarded_accountant_name(accountant),
            )
        except GridTooLargeError:
            raise  # names its own grid, limit and fix
        except ValueError as exc:
            raise ValueError(
                f"target_epsilon {target_epsilon} at delta {delta} cannot be reached by the "
                f"{accountant} accountant with {steps} steps at sample rate {sample_rate:.6g} "
                f"(Opacus: {exc}); raise the target epsilon or delta, or train fewer steps or "
                "with a smaller batch"
            ) from exc
    return float(sigma)
