"""The canaries' scores of a trained shard, one statistic per threat model (higher means IN).

Threat models (``score`` names the statistic; Steinke §4, Pillutla App. D, Annamalai §5.1-5.3):

``black_box_loss``    input canaries, final model: ``-loss(theta_T; c)``.
``black_box_logit``   input canaries, final model: logit-scaled confidence
                      ``log p_y - log(1 - p_y)`` (Carlini et al. 2022).
``white_box_dot``     all iterates. Input canaries: ``sum_t <theta_{t-1} - theta_t,
                      clip(grad loss(theta_{t-1}; c))>`` (Steinke et al. §4.1). Gradient
                      canaries: the same sum with the fixed canary gradient, which telescopes to
                      ``<theta_0 - theta_T, v>`` (any optimizer; our observation): Dirac canaries
                      ``C (theta_0 - theta_T)[j]``.
``final_model_cosine``  gradient canaries, final model only (LiDP App. D.2, authors' code):
                      ``-<v, theta_T> / (|v| |theta_T|)`` (IN lowers ``<v, theta>``).
``per_step_dot``      gradient canaries, every step: ``o_t = <g~_t, v/|v|>`` (Annamalai et al.
                      Algorithm 1); score = ``sum_t o_t`` or the likelihood ratio
                      (``canaries.statistic``); the (trials, canaries, steps) matrix is also
                      returned as ``observations``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from dpaudit import likelihood_ratios
from dpaudit.canaries import gradient_space
from dpaudit.training.readout import all_logits
from dpaudit.training.step import DPSGDConfig, TrainingDiverged
from dpaudit.training.vectorized import ShardResult


def logit_confidence(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``log p_y - log(1 - p_y) = z_y - logsumexp_{j != y} z_j`` (stable)."""
    zy = logits.gather(-1, y.unsqueeze(-1)).squeeze(-1)
    other = logits.scatter(-1, y.unsqueeze(-1), float("-inf"))
    return zy - torch.logsumexp(other, dim=-1)


#: The ``score`` entry of the meta: the statistic each threat model scores a canary with.
SCORE_NAMES = {
    "black_box_loss": "minus_loss",
    "black_box_logit": "logit_confidence",
    "white_box_dot": "sum_t_update_dot_clipped_canary_gradient",
    "final_model_cosine": "minus_cosine_canary_final_params",
    "per_step_dot": "sum_t_noisy_gradient_dot_unit_canary",
}


def canary_scores(
    threat_model: str,
    template: torch.nn.Module,
    result: ShardResult,
    x: np.ndarray,
    y: np.ndarray,
    grad_pool: gradient_space.Canaries | None,
    cols: np.ndarray,
    pool_size: int,
    gradient: bool,
    wb_inputs: np.ndarray | None,
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The (trials, canaries) scores of the threat model (higher means IN) and, for
    ``per_step_dot``, the per-step observations; see the module docstring. ``x``, ``y``: the
    shard's examples (input canaries first, ``pool_size`` of them), ``grad_pool``: its gradient
    canaries, ``cols[j]``: the pool ids scored in trial ``j``, ``gradient``: whether the
    canaries are gradients, ``wb_inputs``: the input canaries the trainer kept white-box sums
    of (sorted ids)."""
    observations: dict[str, np.ndarray] = {}
    pool = pool_canaries(grad_pool, pool_size)
    n_models = cols.shape[0]
    if threat_model in ("black_box_loss", "black_box_logit"):
        logits = all_logits(template, result, torch.from_numpy(x[:pool_size]))
        yp = torch.from_numpy(y[:pool_size]).expand(n_models, -1)
        if threat_model == "black_box_loss":
            full = -F.cross_entropy(logits.transpose(1, 2), yp, reduction="none")
        else:
            full = logit_confidence(logits, yp)
        score = np.take_along_axis(full.double().numpy(), cols, axis=1)
    elif threat_model == "white_box_dot" and not gradient:
        pos = np.searchsorted(wb_inputs, cols)  # type: ignore[arg-type]
        score = np.take_along_axis(result.white_box, pos, axis=1)  # type: ignore[arg-type]
    elif threat_model == "white_box_dot":
        diff = (result.flat("params0") - result.flat("params")).double()
        full = gradient_space.dots(pool, diff).numpy()  # type: ignore[arg-type]
        score = np.take_along_axis(full, cols, axis=1)
    elif threat_model == "final_model_cosine":
        theta = result.flat("params").double()
        norms = gradient_space.row_norms(pool).double()  # type: ignore[arg-type]
        cos = gradient_space.dots(pool, theta) / (  # type: ignore[arg-type]
            theta.norm(dim=1, keepdim=True) * norms[None]
        )
        score = np.take_along_axis(-cos.numpy(), cols, axis=1)
    else:  # per_step_dot: o_t = <g~_t, v/|v|>
        vn = gradient_space.row_norms(pool).double().numpy()  # type: ignore[arg-type]
        obs = result.step_dots[:, :pool_size] / vn[None, :, None]  # type: ignore[index]
        obs = np.take_along_axis(obs, cols[:, :, None], axis=1)
        observations["step_dots"] = obs
        score = obs.sum(-1)
    return score, observations


def pool_canaries(
    grad_pool: gradient_space.Canaries | None, pool_size: int
) -> gradient_space.Canaries | None:
    """The first ``pool_size`` gradient canaries (the pool, without zero-out records), float64."""
    if grad_pool is None:
        return None
    if isinstance(grad_pool, gradient_space.SparseCanaries):
        return gradient_space.SparseCanaries(
            grad_pool.coords[:pool_size],
            grad_pool.values[:pool_size].double(),
            grad_pool.n_params,
        )
    return grad_pool[:pool_size].double()


def likelihood_ratio_scores(
    step_dots: np.ndarray, c: dict[str, Any], cfg: DPSGDConfig, job: str
) -> np.ndarray:
    """(trials, canaries) log likelihood ratios of the adversary's threat model over the
    normalised observations ``B o_t / C`` (Annamalai et al. §5.3, §7; the mean of the target's
    batch is +1 with ``|v| = C``, the noise's standard deviation sigma)."""
    x = likelihood_ratios.normalised(step_dots, cfg.batch_size, cfg.max_grad_norm)
    trials, cols, steps = x.shape
    try:
        lr = likelihood_ratios.log_likelihood_ratio(
            x.reshape(trials * cols, steps),
            cfg.noise_multiplier,
            c["adversary"],
            cfg.steps_per_epoch,
            cfg.batch_size,
            c["prefix_batches"],
        )
    except ValueError as exc:
        raise ValueError(f"{job}: canaries.statistic likelihood_ratio: {exc}") from exc
    return lr.reshape(trials, cols)


def check_finite_scores(score: np.ndarray, job: str, steps: int) -> None:
    """Raise :class:`TrainingDiverged` naming ``job`` (experiment, setting, seed, ...), the
    trial and the canary if a canary score of the trained models is NaN or infinite."""
    bad = ~np.isfinite(score)
    if not bad.any():
        return
    trial, canary = (int(v) for v in np.argwhere(bad)[0])
    raise TrainingDiverged(
        f"{job}: training diverged: the score of trial {trial}, canary {canary} is "
        f"{score[trial, canary]} ({int(bad.sum())} non-finite score(s) in all): the trained "
        "model overflows; a too-large learning rate (train.lr) is the usual cause",
        trial,
        steps,
    )
