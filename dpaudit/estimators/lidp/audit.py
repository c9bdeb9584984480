"""Applies the LiDP estimator (:mod:`.bound`) to score files of design ``lidp``.

Mapping of a LiDP trial to the ``(trials, canaries)`` arrays of :mod:`dpaudit.scores`:

* one row per trial, i.e. per trained model (replace-one variant, App. B.2 / Eq. (12): one
  model per trial) or per pair of models (add/remove, Algorithm 1 / Eq. (4): the inserted
  canaries scored on A(D u {c_1..c_K}), the null canaries on A(D u {c_1..c_{K-1}}));
* columns are the K inserted canaries (``membership`` 1) and the m null canaries, fresh i.i.d.
  draws from the same canary distribution that were never inserted (``membership`` 0), in any
  order; every row must have the same K and the same m (the paper and its code use m = K);
* ``score`` higher means IN (e.g. minus the loss, or the inner product <c, theta> for the
  Gaussian mechanism); the statistic is ``score >= threshold``.

**Held-out tuning trials (App. E.1).** A file may declare ``meta["heldout_trials"] = h``: its
first h rows are trials drawn only to tune the threshold (the paper's "holdout set of n
trials"; :func:`dpaudit.mechanisms.lidp_gaussian.score_file` writes them with
``heldout_trials``). Then ``threshold: heldout`` tunes on exactly those rows and every mode
computes the bound on the other rows; ``heldout_fraction`` and ``split_seed`` are then not
used (the row's ``heldout_source`` says ``file_rows``; the config schema fills them in).
Files without the key keep the random split of ``heldout_fraction``.

**Bounds at several numbers of trials** (``trials: [n_1, ..., n_J]``; Pillutla et al.
App. F.2 trains n in {125, 250, 500, 1000} trials and reads Table 1 off the curve of eps-hat
against n). The file's trials are split once into tuning and evaluation trials as above (the
declared held-out rows, or the random ``heldout_fraction`` split of ``split_seed``); the bound
at n uses the first n evaluation trials with the threshold tuned on the first n tuning trials
(the paper's "holdout set of n trials"), so the subsets are nested: one row per n, and the
curve over n is the curve of one growing experiment. A fixed or ``in_sample`` threshold uses
the first n trials. Asking for more trials than the file has is an error.

Parameters left out take the schema's defaults (:func:`dpaudit.defaults.fill_defaults`).

The score file's ``meta`` may carry ``lidp_variant`` ("replace_one" or "add_remove"); it is
copied to the output rows but does not change the computation. The paper's "DP + Wilson"
baseline is this same method on a file with K = 1 (one canary per model) and ``order: 1``, so
no separate method is registered for it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dpaudit.defaults import estimator_defaults, fill_defaults
from dpaudit.estimators.lidp import bound as lidp
from dpaudit.estimators.registry import FAMILY_FREE
from dpaudit.scores import ScoreFile, ScoreFileError

#: What to do with a file whose K (or m) is smaller than ``order``: ``error`` (default), or
#: ``skip`` (no row; the released code's NaN), for sweeps over K that include K = 1.
BELOW_ORDER = ("error", "skip")


def split_in_out(sf: ScoreFile) -> tuple[np.ndarray, np.ndarray]:
    """(score_in (n, K), score_out (n, m)) from a ``lidp`` score file, row order kept.

    When every row has the same membership pattern (e.g. the simulated files), the columns are
    taken as slices or one column gather instead of a boolean mask over the whole array (the
    same values in the same order; views when the inserted columns are contiguous).
    """
    row0 = np.asarray(sf.membership[0]).astype(bool)
    if 0 < row0.sum() < row0.size and (sf.membership == sf.membership[:1]).all():
        return _columns(sf.score, np.flatnonzero(row0)), _columns(sf.score, np.flatnonzero(~row0))
    mem = sf.membership.astype(bool)
    k_per_row = mem.sum(axis=1)
    m_per_row = (~mem).sum(axis=1)
    for name, per_row in (
        ("inserted (membership 1)", k_per_row),
        ("null (membership 0)", m_per_row),
    ):
        if per_row.min() < 1:
            t = int(np.argmin(per_row))
            raise ScoreFileError(f"{sf.source}: trial {t} has no {name} canaries")
        if per_row.min() != per_row.max():
            t = int(np.argmax(per_row != per_row[0]))
            raise ScoreFileError(
                f"{sf.source}: every trial must have the same number of {name} canaries; "
                f"trial 0 has {per_row[0]}, trial {t} has {per_row[t]}"
            )
    n = sf.n_trials
    return sf.score[mem].reshape(n, -1), sf.score[~mem].reshape(n, -1)


def _columns(score: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """``score[:, cols]``, as a slice (a view) when ``cols`` is a contiguous range."""
    if cols[-1] - cols[0] + 1 == len(cols):
        return score[:, cols[0] : cols[-1] + 1]
    return score[:, cols]


def _in_id_order(sf: ScoreFile) -> ScoreFile:
    """``sf`` with each trial's canaries sorted by canary id (``sf`` itself if they are).

    The Clopper-Pearson interval bounds the first coordinate only: the inserted and the null
    canary of lowest id, so that the row does not depend on the order of the canaries in the
    file (a fixed coordinate, chosen before the scores are seen, as the interval needs)."""
    order = np.argsort(sf.canary_id, axis=1, kind="stable")
    if (order == np.arange(sf.n_canaries)).all():
        return sf

    def take(a: np.ndarray) -> np.ndarray:
        return np.take_along_axis(np.asarray(a), order, axis=1)

    return ScoreFile(take(sf.score), take(sf.membership), take(sf.canary_id), sf.meta, sf.source)


def _confidence(params: dict[str, Any]) -> float:
    conf = params.get("confidence")
    beta = params.get("beta")
    if beta is not None:
        beta = float(beta)
        if conf is not None and abs(float(conf) - (1 - beta)) > 1e-12:
            raise ValueError(f"give confidence or beta, not both inconsistently: {conf}, {beta}")
        return 1.0 - beta
    return float(estimator_defaults("lidp")["confidence"] if conf is None else conf)


def run_lidp(sf: ScoreFile, params: dict[str, Any]) -> list[dict[str, Any]]:
    """Pillutla et al. LiDP bound (Alg. 1 with XBern intervals, Algs. 2-7), threshold tuned on
    held-out trials (App. E.1) or fixed."""
    if sf.meta["design"] != "lidp":
        raise ScoreFileError(f"{sf.source}: lidp applies to design 'lidp' only")
    known = sorted(estimator_defaults("lidp"))
    unknown = set(params) - set(known) - {"beta"}
    if unknown:
        raise ValueError(
            f"unknown lidp parameter(s) {sorted(unknown)}; allowed: {known + ['beta']}"
        )
    p = fill_defaults("lidp", params)  # the schema's defaults (order 1 for clopper_pearson)
    order = int(p["order"])
    if p["below_order"] not in BELOW_ORDER:
        raise ValueError(f"below_order must be one of {BELOW_ORDER}, got {p['below_order']!r}")
    if p["interval"] == "clopper_pearson":  # the first coordinate: the lowest canary id
        sf = _in_id_order(sf)
    score_in, score_out = split_in_out(sf)
    if p["below_order"] == "skip" and min(score_in.shape[1], score_out.shape[1]) < order:
        return []
    heldout_trials = sf.meta.get("heldout_trials", 0) or 0
    confidence = _confidence(params)
    if p.get("trials") is not None:
        return [
            _row(_audit(score_in[rows], score_out[rows], sf, p, confidence, n_tune), sf, origin)
            for rows, n_tune, origin in trial_subsets(
                sf.n_trials, list(p["trials"]), p, heldout_trials, str(sf.source)
            )
        ]
    return [_row(_audit(score_in, score_out, sf, p, confidence, heldout_trials), sf)]


def _audit(
    score_in: np.ndarray,
    score_out: np.ndarray,
    sf: ScoreFile,
    p: dict[str, Any],
    confidence: float,
    heldout_trials: int,
) -> lidp.LiDPAudit:
    """:func:`.bound.audit_scores` with the estimator's filled parameters ``p``."""
    return lidp.audit_scores(
        score_in,
        score_out,
        delta=sf.delta,
        confidence=confidence,
        interval=p["interval"],
        order=int(p["order"]),
        variant=p["variant"],
        threshold=p["threshold"],
        heldout_fraction=float(p["heldout_fraction"]),
        split_seed=int(p["split_seed"]),
        grid_size=int(p["grid_size"]),
        heldout_trials=heldout_trials,
    )


def _row(res: lidp.LiDPAudit, sf: ScoreFile, source: str | None = None) -> dict:
    row = res.as_row()
    row["assumes"] = FAMILY_FREE  # a bound on the LiDP epsilon of any mechanism
    row["asymptotic"] = res.interval == "wilson"
    row["lidp_variant"] = sf.meta.get("lidp_variant", "")
    if source is not None:
        row["heldout_source"] = source
    return row


def trial_subsets(
    n_rows: int, trials: list[int], p: dict[str, Any], heldout_trials: int, source: str = "file"
) -> list[tuple[np.ndarray, int, str]]:
    """For each n of ``trials``: (the rows to audit, how many of them are tuning rows, where the
    tuning rows come from). Tuning rows come first; see the module docstring ("Bounds at
    several numbers of trials"). ``source`` names the file in errors."""
    if isinstance(p["threshold"], str) and p["threshold"] == "heldout":
        if heldout_trials:
            tune, ev = np.arange(heldout_trials), np.arange(heldout_trials, n_rows)
            origin = "file_rows"
        else:
            tune, ev = lidp.split_trials(n_rows, float(p["heldout_fraction"]), int(p["split_seed"]))
            origin = "random_split"
    else:
        tune, ev, origin = np.arange(0), np.arange(heldout_trials, n_rows), ""
    out = []
    for n in trials:
        if isinstance(n, bool) or int(n) != n or n < 1:
            raise ValueError(f"lidp parameter trials: {n!r} is not a positive integer")
        if n > len(ev):
            raise ValueError(
                f"{source}: lidp parameter trials asks for {n} evaluation trials, but the file "
                f"has {len(ev)} ({n_rows} trials, {len(tune)} of them for tuning the threshold)"
            )
        t = tune[: int(n)]
        out.append((np.concatenate([t, ev[: int(n)]]), len(t), origin))
    return out
