"""Private hyper-parameter tuning with real DP-SGD, audited as one game per tuning trial.

The tuning protocol (Xiang, Wang, Wang 2024, arXiv:2402.13087, Algorithm 2; Papernot and
Steinke 2022): draw K ~ xi = TNB(eta, nu), run DP-SGD K times, each with a hyper-parameter
configuration drawn uniformly from Omega (here: learning rates, which leave the privacy
budget of a run unchanged), and release only the run with the largest selection score g
(strict ``>``, the first run wins ties). The audit game (their Algorithm 1) flips a fair coin
b for each tuning trial: b = 1 trains every run of the trial on X' = X + {z}, b = 0 on X.

Threat models (their Section 4, Table 2), the training set X and the score g of a run with
final parameters w_N:

``ntnv``  X = the data; g = -(1/n_v) sum_i loss(w_N; validation_i), the negated validation
          loss (mean cross-entropy over the first ``train.eval_examples`` test records);
``ntcv``  X = the data; g = -loss(w_N; z) (natural canary) or (w_0 - w_N)[j] (Dirac canary
          Z_D on coordinate j);
``etcv``  X = empty set (only z can be in a batch); g as for ``ntcv``.

The released statistic (their Eq. 10) is ``lambda_a = (1/N) sum_i <p_i^z, p_i> / C^2``, with
p_i the noisy gradient *sum* of step i and p_i^z the clipped gradient of z, or ``lambda_b =
lambda_a - g`` (``ntnv``) / ``lambda_a + g`` (``ntcv``, ``etcv``). The engine's white-box score
is ``sum_i <w_{i-1} - w_i, p_i^z>`` and ``w_{i-1} - w_i = (lr / B) p_i``, so ``lambda_a`` is
that score times ``B / (lr N C^2)``.

**How the trials are trained together.** :func:`draw_plan` draws, from the job's seed, every
trial's b and K and every candidate run's configuration, and numbers the runs trial by trial.
Each run is trained once (by :func:`dpaudit.training.shard.run_shard`, all runs of one
learning rate in one vectorised pass) with its own seeds ``model_seeds(seed, setting, shard,
r)``, and belongs to exactly one trial. A trial's runs are therefore K independent DP-SGD runs
on the trial's data set, each with a uniformly drawn configuration, independent of every other
trial: :func:`assemble` then releases exactly what Algorithm 2 releases, and the trials are
i.i.d. games, the same in distribution as running the protocol trial by trial (no run is
reused, unlike pool resampling). ``tests/training/test_tuning.py`` checks the plan against the
definitions and the assembly against a direct simulation of the protocol.
"""

from __future__ import annotations

import dataclasses
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from dpaudit.accounting.run_counts import RunCountDistribution, TruncatedNegativeBinomial
from dpaudit.keys import FORMAT_VERSION_KEY
from dpaudit.scores import ScoreFile
from dpaudit.training.spec import JobId, RunSpec

#: ``selection.setup``: the threat models of the tuning audit (their Section 4, Table 2).
TUNING_SETUPS = ("ntnv", "ntcv", "etcv")
#: ``selection.statistic``: the released statistic of a tuning trial (their Eq. 10).
TUNING_STATISTICS = ("lambda_a", "lambda_b")
#: Table 3 of the paper (z = Z_D, full-batch DP-SGD, TNB(0, 1e-2), 2,000 games, the mean of 3
#: trials): the audited epsilon_L per (setup, data set X, statistic) and epsilon_B. X is
#: FashionMNIST ("F"), CIFAR-10 ("C"), SVHN ("S") or empty (ETCV).
PAPER_TABLE3_EPSILON_L: dict[tuple[str, str, str], dict[float, float]] = {
    ("ntnv", "F", "lambda_a"): {1.0: 0.54, 2.0: 0.99, 4.0: 1.91},
    ("ntnv", "F", "lambda_b"): {1.0: 0.54, 2.0: 1.00, 4.0: 1.91},
    ("ntnv", "C", "lambda_a"): {1.0: 0.84, 2.0: 1.41, 4.0: 2.13},
    ("ntnv", "C", "lambda_b"): {1.0: 0.77, 2.0: 1.37, 4.0: 2.13},
    ("ntnv", "S", "lambda_a"): {1.0: 0.88, 2.0: 1.35, 4.0: 2.13},
    ("ntnv", "S", "lambda_b"): {1.0: 0.81, 2.0: 1.32, 4.0: 2.13},
    ("ntcv", "F", "lambda_a"): {1.0: 0.52, 2.0: 0.91, 4.0: 1.74},
    ("ntcv", "F", "lambda_b"): {1.0: 0.52, 2.0: 0.91, 4.0: 1.74},
    ("ntcv", "C", "lambda_a"): {1.0: 0.99, 2.0: 1.17, 4.0: 1.99},
    ("ntcv", "C", "lambda_b"): {1.0: 1.03, 2.0: 1.19, 4.0: 1.98},
    ("ntcv", "S", "lambda_a"): {1.0: 1.06, 2.0: 1.17, 4.0: 1.99},
    ("ntcv", "S", "lambda_b"): {1.0: 1.11, 2.0: 1.19, 4.0: 1.98},
    ("etcv", "empty", "lambda_a"): {1.0: 1.17, 2.0: 2.36, 4.0: 4.28},
    ("etcv", "empty", "lambda_b"): {1.0: 1.19, 2.0: 2.09, 4.0: 4.68},
}


@dataclass(frozen=True)
class TuningPlan:
    """Who is trained and how the runs form tuning trials.

    ``world[i]``: the coin b of trial i (1: X' = X + {z}); ``runs[i]``: its K. Candidate run r
    belongs to trial ``run_trial[r]`` (runs are numbered trial by trial) and uses
    configuration ``run_config[r]`` (an index into Omega).
    """

    world: np.ndarray
    runs: np.ndarray
    run_trial: np.ndarray
    run_config: np.ndarray

    @property
    def run_world(self) -> np.ndarray:
        """The world of every candidate run (that of its trial)."""
        return self.world[self.run_trial]

    @property
    def n_runs(self) -> int:
        return int(self.run_trial.size)


def draw_plan(
    trials: int, xi: RunCountDistribution, n_configs: int, rng: np.random.Generator
) -> TuningPlan:
    """The coins, run counts K ~ ``xi`` and configurations (uniform over ``n_configs``) of
    ``trials`` independent tuning trials (Algorithm 1's b; Algorithm 2's k and M_i)."""
    if trials < 1:
        raise ValueError(f"selection.trials must be >= 1, got {trials}")
    if n_configs < 1:
        raise ValueError(f"selection.lrs: Omega needs at least one configuration, got {n_configs}")
    world = rng.integers(0, 2, size=trials).astype(np.int8)
    runs = xi.sample(trials, rng).astype(np.int64)
    if (runs < 1).any():
        raise ValueError(f"the run count law {xi.name!r} drew K = 0; tuning needs K >= 1")
    run_trial = np.repeat(np.arange(trials), runs)
    run_config = rng.integers(0, n_configs, size=run_trial.size)
    return TuningPlan(world, runs, run_trial, run_config)


def plan_for_job(selection: dict[str, Any], job: JobId) -> TuningPlan:
    """The plan of one training job: ``selection.trials`` trials drawn from the job's seed,
    setting and shard (so every shard holds independent trials)."""
    xi = TruncatedNegativeBinomial(float(selection["eta"]), float(selection["nu"]))
    ss = np.random.SeedSequence(
        [int(job.seed), zlib.crc32(job.setting.encode()), int(job.shard), 0x7E5]
    )
    return draw_plan(int(selection["trials"]), xi, len(selection["lrs"]), np.random.default_rng(ss))


def assemble(
    plan: TuningPlan, selection_score: np.ndarray, statistic: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """For every trial, the index of the released run (the largest ``selection_score`` among
    its runs, the first one on ties: Algorithm 2's strict ``>``) and its ``statistic``."""
    g = np.asarray(selection_score, dtype=float)
    if g.shape != (plan.n_runs,) or np.shape(statistic) != (plan.n_runs,):
        raise ValueError(f"need one score and one statistic per candidate run ({plan.n_runs})")
    if not np.isfinite(g).all():
        raise ValueError("a candidate run's selection score is not finite")
    starts = np.concatenate([[0], np.cumsum(plan.runs)[:-1]])
    chosen = np.array(
        [s + int(np.argmax(g[s : s + k])) for s, k in zip(starts, plan.runs, strict=True)]
    )
    return chosen, np.asarray(statistic, dtype=float)[chosen]


def statistics_of_runs(
    setup: str,
    lambda_a: np.ndarray,
    score: np.ndarray,
) -> dict[str, np.ndarray]:
    """``lambda_a`` and ``lambda_b`` of every run (Eq. 10 and the NTCV/ETCV variant)."""
    if setup not in TUNING_SETUPS:
        raise ValueError(f"selection.setup {setup!r}; allowed: {list(TUNING_SETUPS)}")
    sign = -1.0 if setup == "ntnv" else 1.0
    return {"lambda_a": lambda_a, "lambda_b": lambda_a + sign * score}


def run_tuning(
    data: dict[str, np.ndarray],
    job: JobId,
    run_spec: RunSpec | dict[str, Any],
    checkpoint: str | Path | None = None,
    progress: bool = False,
    device: str = "cpu",
    max_physical_batch: int | None = None,
) -> ScoreFile:
    """Train the candidate runs of one job's tuning trials and write one score-file row per
    trial (design ``multi_run``: the trial's coin and its released statistic); see the module
    docstring. The run spec's ``selection`` holds ``setup``, ``statistic``, ``eta``, ``nu``,
    ``trials`` and ``lrs`` (Omega). ``max_physical_batch``: as for
    :func:`~dpaudit.training.shard.run_shard`."""
    from dpaudit.scores import FORMAT_VERSION
    from dpaudit.training.shard import ShardPlan, run_shard

    spec = RunSpec.from_run_spec(run_spec)  # checks what a tuning audit needs (TUNING_NEEDS)
    sel = spec.selection
    if sel is None:
        raise ValueError("run spec key selection: a tuning audit needs one")
    setup, stat_name = sel["setup"], sel["statistic"]
    if stat_name not in TUNING_STATISTICS:
        raise ValueError(f"selection.statistic {stat_name!r}; allowed: {list(TUNING_STATISTICS)}")
    plan = plan_for_job(sel, job)
    train_data = data
    if setup == "etcv":  # X = empty set: only the canary can be in a batch
        train_data = {**data, "x_train": data["x_train"][:0], "y_train": data["y_train"][:0]}
    run_ids = np.arange(plan.n_runs)
    g = np.zeros(plan.n_runs)
    lam = np.zeros(plan.n_runs)
    acc = np.zeros(plan.n_runs)
    lr_of_run = np.asarray(sel["lrs"], dtype=float)[plan.run_config]
    first_meta: dict[str, Any] | None = None
    for c, lr in enumerate(sel["lrs"]):
        ids = run_ids[plan.run_config == c]
        if ids.size == 0:
            continue
        run = dataclasses.replace(spec, train={**spec.train, "lr": float(lr)}, selection=None)
        ckpt = None if checkpoint is None else Path(f"{checkpoint}.lr{c}")
        out = run_shard(
            train_data,
            job,
            run,
            ckpt,
            progress,
            device=device,
            plan=ShardPlan(ids, plan.run_world[ids]),
            max_physical_batch=max_physical_batch,
        )
        if ckpt is not None:
            ckpt.unlink(missing_ok=True)
        meta = out.score_file.meta
        first_meta = first_meta or meta
        white_box = out.score_file.score[:, 0]
        c_norm = float(meta["max_grad_norm"])
        lam[ids] = white_box * meta["batch_size"] / (float(lr) * meta["steps"] * c_norm**2)
        g[ids] = _selection_scores(setup, spec, out, data, white_box)
        acc[ids] = meta["test_accuracy_per_model"]
    assert first_meta is not None
    stats = statistics_of_runs(setup, lam, g)
    chosen, released = assemble(plan, g, stats[stat_name])
    meta = _tuning_meta(first_meta, plan, sel, chosen, lr_of_run, acc)
    meta[FORMAT_VERSION_KEY] = FORMAT_VERSION
    n = len(plan.world)
    return ScoreFile(
        score=released[:, None],
        membership=plan.world[:, None].astype(np.int8),
        canary_id=np.zeros((n, 1), dtype=np.int64),
        meta=meta,
        source=f"experiment {job.experiment!r}, setting {job.setting!r}, seed {job.seed}",
    )


def _selection_scores(
    setup: str,
    spec: RunSpec,
    out: Any,
    data: dict[str, np.ndarray],
    white_box: np.ndarray,
) -> np.ndarray:
    """g of every run of one shard (Table 2): the negated validation loss (``ntnv``: the mean
    cross-entropy over the validation records, so that lambda_b = lambda_a - g keeps the scale
    of lambda_a; a sum over n_v records would swamp it),
    the negated loss on z (natural canary) or ``(w_0 - w_N)[j]`` (Dirac canary on coordinate
    j; the white-box score is ``<w_0 - w_N, C e_j>``)."""
    from dpaudit.models import build_for_data
    from dpaudit.training.readout import all_logits, input_pool

    meta = out.score_file.meta
    n_classes = int(max(np.max(data["y_train"], initial=0), data["y_test"].max())) + 1
    template = build_for_data(dict(spec.model), tuple(data["x_train"].shape[1:]), n_classes)
    template = template.to("meta")
    canaries = spec.canaries
    if setup == "ntnv":
        n_eval = spec.train.get("eval_examples")
        x = torch.from_numpy(np.ascontiguousarray(data["x_test"][:n_eval]))
        y = torch.from_numpy(data["y_test"][:n_eval]).long()
    elif canaries["type"] == "dirac":
        return white_box / float(meta["max_grad_norm"])
    else:
        cx, cy = input_pool(data, canaries, meta["canary_pool_size"], n_classes)
        x, y = torch.from_numpy(np.ascontiguousarray(cx[:1])), torch.from_numpy(cy[:1]).long()
    logits = all_logits(template, out.result, x)  # (models, examples, classes)
    m = logits.shape[0]
    loss = F.cross_entropy(logits.transpose(1, 2), y.expand(m, -1), reduction="none")
    return -loss.double().mean(1).numpy()


def _tuning_meta(
    base: dict[str, Any],
    plan: TuningPlan,
    sel: dict[str, Any],
    chosen: np.ndarray,
    lr_of_run: np.ndarray,
    acc: np.ndarray,
) -> dict[str, Any]:
    """The score file's meta: the base run's (claimed epsilon = epsilon_B of one run), the
    tuning protocol, and the claimed and reference bounds of the tuned mechanism."""
    meta = {
        k: v
        for k, v in base.items()
        if k not in ("test_accuracy_per_model", "lr", "models", "shard_models")
    }
    meta.update(
        {
            "threat_model": f"selection_{sel['setup']}",
            "score": sel["statistic"],
            "selection": {k: sel[k] for k in sorted(sel)},
            "candidate_runs": plan.n_runs,
            "mean_runs": float(plan.runs.mean()),
            "released_lr": [float(v) for v in lr_of_run[chosen]],
            "test_accuracy": float(acc[chosen].mean()),
            "test_accuracy_per_model": [float(a) for a in acc[chosen]],
        }
    )
    meta.update(tuned_bounds(meta, sel))
    return meta


def tuned_bounds(meta: dict[str, Any], sel: dict[str, Any]) -> dict[str, Any]:
    """``claimed_epsilons`` (Papernot-Steinke, A.1 Theorem 1: the tuned mechanism's claim) and
    ``references`` (the reduced game of Section 5.1: its exact epsilon, the ceiling of any
    valid audit, and epsilon_U-O of Algorithm 3) for full-batch DP-SGD (sample rate 1: N
    Gaussian steps are exactly mu-GDP with mu = sqrt(N)/sigma). Empty when the base has no
    noise or is subsampled (the reduction then is only approximate)."""
    from dpaudit.accounting.selection import (
        papernot_steinke_epsilon,
        reduced_game_epsilon_exact,
        reduced_game_epsilon_rdp,
    )

    sigma, q, steps = meta["noise_multiplier"], meta["sample_rate"], meta["steps"]
    if not sigma or q < 1:
        return {}
    mu = float(np.sqrt(steps) / sigma)
    xi = TruncatedNegativeBinomial(float(sel["eta"]), float(sel["nu"]))
    delta = float(meta["delta"])
    return {
        "selection_mu": mu,
        "claimed_epsilons": {"papernot_steinke": papernot_steinke_epsilon(xi, mu, delta)},
        "references": {
            "reduced_game_exact": reduced_game_epsilon_exact(xi, mu, delta),
            "reduced_game_rdp": reduced_game_epsilon_rdp(xi, mu, delta),
        },
    }
