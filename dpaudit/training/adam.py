"""The Adam update of the vectorised trainer: Kingma & Ba (2015, arXiv:1412.6980, Algorithm 1),
with the arithmetic of ``torch.optim.Adam`` (no weight decay, no amsgrad), for many models at once.
"""

from __future__ import annotations

import math

import torch


def adam_update(
    m_c: torch.Tensor,
    v_c: torch.Tensor,
    g: torch.Tensor,
    lr: float,
    betas: tuple[float, float],
    eps: float,
    t: int,
) -> torch.Tensor:
    """``theta_{t-1} - theta_t`` of an Adam step (Kingma & Ba 2015, Algorithm 1; the
    arithmetic of ``torch.optim.Adam`` without weight decay or amsgrad) on the noisy gradients
    ``g`` (m, P) of m models at (1-based) step ``t``, with learning rate ``lr``, ``betas`` and
    ``eps``; updates the models' first and second moments ``m_c``, ``v_c`` (m, P) in place and
    overwrites ``g`` with the update."""
    beta1, beta2 = betas
    m_c.lerp_(g, 1 - beta1)
    v_c.mul_(beta2).addcmul_(g, g, value=1 - beta2)
    step_size = lr / (1 - beta1**t)
    denom = torch.sqrt(v_c, out=g).div_(math.sqrt(1 - beta2**t)).add_(eps)
    return torch.div(m_c, denom, out=g).mul_(step_size)
