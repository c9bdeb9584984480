"""The adversaries of Annamalai et al. that replace the gradients of other records: in each
step, how many extra copies of the target canary's gradient a model's batch adds.

Annamalai, Balle, Hayes, De Cristofaro (2024), "To Shuffle or not to Shuffle: Auditing DP-SGD
with Shuffling" (arXiv:2411.10614): the Partially-Informed adversary (Algorithm 1) and the
modified Worst-Case adversary of batch-then-shuffle (Section 7). Used by
:func:`dpaudit.training.step.dpsgd_step`.
"""

from __future__ import annotations

import numpy as np


def adversary_target_weights(
    batches: list[np.ndarray],
    a: int,
    b: int,
    n_inputs: int,
    partially_informed: tuple[int, int] | None,
    batch_worst_case: tuple[int, int] | None,
    plus_items: list[np.ndarray] | None,
) -> np.ndarray:
    """How many extra copies of the target's gradient vector each model of ``a..b-1`` adds
    (Annamalai et al.): the input examples (items below ``n_inputs``) whose gradients the
    adversary replaces are dropped from ``batches`` in place.

    Partially-Informed (Algorithm 1; ``partially_informed = (target, zero)``): in batches
    holding neither the target nor the zero-out record the last slot's gradient becomes minus
    the target's (weight -1). Modified Worst-Case (§7; ``batch_worst_case``): every input
    example's gradient becomes plus the target's for the items ``plus_items[i]`` (the first B
    of model ``i``'s dataset order) and minus it otherwise (weight #plus - #minus)."""
    extra = np.zeros(b - a, dtype=np.float64)
    if partially_informed is not None:
        target, zero = partially_informed
        for i in range(b - a):
            bt = batches[a + i]
            if len(bt) and target not in bt and zero not in bt:
                extra[i] = -1.0
                batches[a + i] = bt[:-1]  # the last slot's gradient is replaced
    elif batch_worst_case is not None:
        for i in range(b - a):
            bt = batches[a + i]
            inputs = bt < n_inputs
            n_plus = int(np.isin(bt[inputs], plus_items[a + i]).sum())  # type: ignore[index]
            extra[i] = 2 * n_plus - int(inputs.sum())
            batches[a + i] = bt[~inputs]  # every input example's gradient is replaced
    return extra
