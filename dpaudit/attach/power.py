"""What one audit of a user's own training can see: its ceiling and its power.

The verdict of :mod:`dpaudit.attach.claim` flags a training when the largest of its
family-free lower bounds (:data:`dpaudit.verdict.VERDICT_ESTIMATORS`: Steinke, Nasr,
Jagielski 2023, arXiv:2305.08846, Theorem 3.1; Mahloujifar, Melis, Chaudhuri 2025,
arXiv:2410.22235, Algorithm 3 with the ``approx_dp`` null; each with the Bonferroni selection
of its guess count) exceeds the claim. "Not flagged" then means only that this run showed no
evidence; how much it *could* show is said here in two numbers.

* **Ceiling** (:func:`ceiling`): the largest bound the verdict estimators give when every guess
  they make is right, at every guess count of their grids. No run with m canaries can certify
  more, whatever its coins and scores (a guess count that abstains on a tie makes fewer
  guesses, never more right ones), so a claim above it can never be flagged.
* **Power** (:func:`power`): the smallest true epsilon whose run the verdict flags against the
  claim with probability at least 80%, at the run's own sample rate q, steps T and m. The run
  is the idealised white-box audit of DP-SGD with Dirac gradient canaries (Steinke et al. 2023,
  Sec. 4; Nasr et al. 2023, arXiv:2302.07956): an inserted canary's score is the number of
  steps that sampled it plus N(0, sigma^2 T), an OUT canary's N(0, sigma^2 T)
  (:func:`dpaudit.mechanisms.dpsgd_ideal.summed_update_parts`), and the true epsilon is that of
  DP-SGD at (sigma, q, T) (:mod:`dpaudit.accounting.dpsgd`). The training is assumed to run
  with too little noise (sigma scaled down) and nothing else wrong, and the data's gradients
  never to move a canary's coordinate: a real run can only do worse, and a bug upstream of the
  noise call (sampling, clipping, duplication, accumulation) or in the normalisation after it
  is a different law altogether.

The power is a Monte Carlo estimate over ``replicates`` runs drawn once from a fixed seed
(common random numbers: the same coins, hits and noise at every sigma). With these draws a
run's correct-guess counts can only grow as sigma shrinks (the IN scores rise relative to the
noise, the OUT scores do not move), so the flag rate is monotone in sigma and a bisection on
log sigma finds the largest sigma flagged in at least 80% of the replicates to the relative
``tolerance``; its epsilon is reported, the conservative end of the bracket. Each replicate is
decided by the verdict's own tests at the claim (one p-value or recursion per guess count of
each grid, as thresholds on the number of correct guesses), not by re-running the bisections
of the bounds: a bound exceeds the claim exactly when its test rejects the claim (both tests'
rejections are monotone in epsilon and in the correct count), up to the bounds' bisection
tolerances (below 1e-6).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from dpaudit.keys import CLAIMED_EPSILON

#: The flag probability the power is quoted at.
POWER = 0.8
#: Monte Carlo runs per power estimate (the standard error of a rate of 0.8 is 0.018).
REPLICATES = 500
#: Seed of the Monte Carlo runs: the same audit prints the same power.
SEED = 0
#: Relative tolerance of the bisection on the noise multiplier.
TOLERANCE = 0.02
#: The noise multipliers the bisection searches between (an unflagged run at the smallest is
#: reported as "no true epsilon reaches the power").
SIGMA_RANGE = (1e-3, 1e3)
#: The stages of a DP-SGD step that canaries added to the clipped sum before the noise and read
#: from the noisy sum (:class:`dpaudit.attach.core.GradientCanaries`, the Opacus adapter) cannot
#: see: those upstream of the noise call, and the normalisation after it (the update's division
#: by a batch size, applied after the canaries are read).
UPSTREAM_STAGES = ("sampling", "clipping", "duplication", "accumulation", "normalisation")

#: The conformance stages (:data:`dpaudit.attach.conformance.STAGES`) whose checks together
#: cover each upstream stage (accumulation: the logical batches the loader delivered per noisy
#: step, which needs the loader watched); empty: no check covers it yet (one record reachable
#: through two indices).
UPSTREAM_COVERED_BY: dict[str, tuple[str, ...]] = {
    "sampling": ("sampling",),
    "clipping": ("sensitivity",),
    "duplication": (),
    "accumulation": ("sampling", "steps"),
    "normalisation": ("normalisation",),
}


def unseen_after(seen: Sequence[str], unseen: Sequence[str] = UPSTREAM_STAGES) -> tuple[str, ...]:
    """The stages of ``unseen`` left unseen once the conformance stages ``seen`` were
    measured."""

    def covered(stage: str) -> bool:
        need = UPSTREAM_COVERED_BY.get(stage, ())
        return bool(need) and all(s in seen for s in need)

    return tuple(s for s in unseen if not covered(s))


@dataclass(frozen=True)
class _Grid:
    """One verdict estimator under Bonferroni: its (k+, k-) guess pairs, the level of each test
    and how it tests (``one_run`` or ``fdp_abstention``)."""

    kind: str
    pairs: tuple[tuple[int, int], ...]
    level: float


@lru_cache(maxsize=64)
def _grids(m: int, confidence: float) -> tuple[_Grid, ...]:
    """The verdict estimators' guess grids and per-test levels at m canaries, read from
    :func:`dpaudit.verdict.verdict_specs` and the estimators' defaults; a verdict
    estimator set up otherwise than this module decides it is an error (not a silent miss)."""
    from dpaudit.defaults import fill_defaults
    from dpaudit.estimators.fdp_one_run.audit import default_r_grid
    from dpaudit.estimators.one_run import bound as one_run
    from dpaudit.estimators.selection.rules import Bonferroni
    from dpaudit.verdict import verdict_specs

    grids = []
    for name, spec in verdict_specs(confidence).items():
        method = spec["method"]
        p = fill_defaults(method, {k: v for k, v in spec.items() if k != "method"})
        if list(p["selections"]) != ["bonferroni"]:
            raise NotImplementedError(f"power: verdict estimator {name!r} is not bonferroni")
        if method == "one_run" and not p.get("grid") and p["fixed"] is None:
            pairs = [pair for pair in one_run.default_grid(m, p["k_values"]) if sum(pair) <= m]
        elif (
            method == "fdp_abstention"
            and p["family"] == "approx_dp"
            and p["guess"] == "balanced"
            and p["delta"] is None
            and p["r"] is None
            and p["r_fraction"] is None
        ):
            rs = sorted({int(r) for r in (p["r_grid"] or default_r_grid(m)) if 1 <= r <= m})
            pairs = [((r + 1) // 2, r // 2) for r in rs]  # the balanced guess
        else:
            raise NotImplementedError(f"power: verdict estimator {name!r} is not supported")
        level = Bonferroni(pairs).level(float(p["confidence"]))
        grids.append(_Grid(method, tuple(pairs), level))
    return tuple(grids)


def _rejects(kind: str, m: int, r: int, v: int, epsilon: float, delta: float, level: float):
    """Whether the verdict estimator ``kind`` rejects (epsilon, delta)-DP at ``level`` with
    ``v`` of ``r`` guesses right on m canaries (the test its bound inverts)."""
    if kind == "one_run":
        from dpaudit.estimators.one_run import bound as one_run

        return v > 0 and one_run.p_value(m, r, v, epsilon, delta) < 1.0 - level
    from dpaudit.estimators.fdp_abstention import bound as fdp_abstention

    inverse = fdp_abstention.inverse_blow_up("approx_dp", epsilon, delta)
    return v > 0 and fdp_abstention.rejects(m, r, v, inverse, 1.0 - level)


@lru_cache(maxsize=64)
def thresholds(
    m: int, claimed_epsilon: float, delta: float, confidence: float
) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
    """Per verdict estimator, (pairs (G, 2), need (G,)): the verdict flags the claim when, at
    some (k+, k-) of some estimator, the k+ highest scores hold at least ``need`` correct
    guesses together with the k- lowest (``need`` = r + 1 where no count rejects). The least
    rejecting count is found by bisection on the count (rejection is monotone in it)."""
    out = []
    for grid in _grids(m, confidence):
        need = []
        for kp, km in grid.pairs:
            r = kp + km
            lo, hi = 0, r + 1  # lo: not rejected (or 0); hi: rejected (r + 1: none is)
            if not _rejects(grid.kind, m, r, r, claimed_epsilon, delta, grid.level):
                need.append(r + 1)
                continue
            hi = r
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if _rejects(grid.kind, m, r, mid, claimed_epsilon, delta, grid.level):
                    hi = mid
                else:
                    lo = mid
            need.append(hi)
        out.append((np.array(grid.pairs, dtype=np.int64), np.array(need, dtype=np.int64)))
    return tuple(out)


def _ranked_in_counts(score: np.ndarray, member: np.ndarray) -> np.ndarray:
    """(runs, m + 1): the number of IN canaries among the j highest scores of each run."""
    order = np.argsort(-score, axis=1)
    ranked = np.take_along_axis(member, order, axis=1)
    top = np.zeros((len(ranked), ranked.shape[1] + 1), dtype=np.int64)
    np.cumsum(ranked, axis=1, out=top[:, 1:])
    return top


def correct_counts(top: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    """(runs, G) correct guesses of each run when guessing IN for the k+ highest scores and OUT
    for the k- lowest, at each pair of ``pairs`` (G, 2); ``top`` from the scores' ranking (the
    IN canaries among the j highest, j = 0..m). For scores without ties (continuous laws) these
    are the counts of :func:`dpaudit.estimators.one_run.bound.guess_counts`; a tied block is not
    abstained on here."""
    m, n_in = top.shape[1] - 1, top[:, -1:]
    kp, km = pairs[:, 0], pairs[:, 1]
    return top[:, kp] + km - (n_in - top[:, m - km])


def flags(
    score: np.ndarray,
    member: np.ndarray,
    claimed_epsilon: float,
    delta: float,
    confidence: float = 0.95,
) -> np.ndarray:
    """(runs,) whether the verdict (:func:`dpaudit.attach.claim.audit_file` at
    ``confidence``) flags ``claimed_epsilon`` on each run, rows of ``score`` and ``member``
    (runs, m), scores without ties."""
    score = np.atleast_2d(np.asarray(score, dtype=float))
    member = np.atleast_2d(np.asarray(member, dtype=np.int64))
    top = _ranked_in_counts(score, member)
    flagged = np.zeros(len(score), dtype=bool)
    for pairs, need in thresholds(score.shape[1], float(claimed_epsilon), delta, confidence):
        flagged |= (correct_counts(top, pairs) >= need).any(axis=1)
    return flagged


@dataclass(frozen=True)
class Power:
    """The power of one audit (:func:`power`): the verdict flags a run whose true epsilon is at
    least ``epsilon`` (``inf``: none; by ``accountant``, RDP where the requested one failed) with
    probability at least ``power`` (Monte Carlo: ``flag_rate`` of ``replicates`` runs at noise
    multiplier ``noise_multiplier``, seed ``seed``)."""

    epsilon: float
    noise_multiplier: float
    flag_rate: float
    power: float
    replicates: int
    seed: int
    m: int
    sample_rate: float
    steps: int
    claimed_epsilon: float
    delta: float
    confidence: float
    accountant: str

    def __str__(self) -> str:
        pct = f"{self.power:.0%}"
        if math.isinf(self.epsilon):
            return (
                f"with {self.m:,} canaries, q {self.sample_rate:.3g} and {self.steps} steps no "
                f"true epsilon is flagged with {pct} probability, even without noise"
            )
        return (
            f"at its q {self.sample_rate:.3g}, {self.steps} steps and {self.m:,} canaries this "
            f"audit flags a true epsilon >= {self.epsilon:.3g} with {pct} probability "
            f"(DP-SGD with too little noise, {self.accountant} accountant; idealised: the data "
            "never move a canary's coordinate, so a real run does worse)"
        )


def _check(name: str, value: object, ok: bool, want: str) -> None:
    if isinstance(value, bool) or not ok:
        raise ValueError(f"power: {name} must be {want}, got {value!r}")


def power(
    m: int,
    sample_rate: float,
    steps: int,
    claimed_epsilon: float,
    delta: float,
    confidence: float = 0.95,
    *,
    level: float = POWER,
    replicates: int = REPLICATES,
    seed: int = SEED,
    tolerance: float = TOLERANCE,
    accountant: str = "prv",
) -> Power:
    """The smallest true epsilon the verdict flags against ``claimed_epsilon`` with
    probability at least ``level``, for the idealised white-box audit of DP-SGD at (q =
    ``sample_rate``, T = ``steps``, m canaries) with the noise multiplier scaled down (see the
    module docstring; Steinke, Nasr, Jagielski 2023, arXiv:2305.08846, Sec. 4). The epsilon is
    the library's ``accountant`` at the largest noise multiplier found to be flagged in at
    least ``level`` of ``replicates`` runs (bisection on log sigma to relative ``tolerance``;
    fixed ``seed``). About 1.5 s at m = 1000 and 12 s at m = 10,000 on one core, plus one
    accountant call (cached)."""
    _check("m", m, isinstance(m, int | np.integer) and m >= 2, "an integer >= 2")
    _check(
        "sample_rate",
        sample_rate,
        isinstance(sample_rate, float | int) and 0 < sample_rate <= 1,
        "a number in (0, 1]",
    )
    _check("steps", steps, isinstance(steps, int | np.integer) and steps >= 1, "an integer >= 1")
    _check(
        CLAIMED_EPSILON,
        claimed_epsilon,
        isinstance(claimed_epsilon, float | int) and 0 <= claimed_epsilon < math.inf,
        "a finite number >= 0",
    )
    _check("delta", delta, isinstance(delta, float | int) and 0 < delta < 1, "a number in (0, 1)")
    _check(
        "confidence",
        confidence,
        isinstance(confidence, float) and 0 < confidence < 1,
        "a number in (0, 1)",
    )
    _check("level", level, isinstance(level, float) and 0 < level < 1, "a number in (0, 1)")
    _check(
        "replicates",
        replicates,
        isinstance(replicates, int) and replicates >= 10,
        "an integer >= 10",
    )
    _check(
        "tolerance",
        tolerance,
        isinstance(tolerance, float) and 0 < tolerance < 1,
        "a number in (0, 1)",
    )
    from dpaudit.mechanisms.dpsgd_ideal import summed_update_parts

    rng = np.random.default_rng(seed)
    member, hits, noise = summed_update_parts(
        int(m), float(sample_rate), int(steps), rng, replicates
    )

    def rate(sigma: float) -> float:
        return float(flags(hits + sigma * noise, member, claimed_epsilon, delta, confidence).mean())

    lo, hi = SIGMA_RANGE
    common = dict(
        power=level,
        replicates=replicates,
        seed=seed,
        m=int(m),
        sample_rate=float(sample_rate),
        steps=int(steps),
        claimed_epsilon=float(claimed_epsilon),
        delta=float(delta),
        confidence=confidence,
        accountant=accountant,
    )
    rate_lo = rate(lo)
    if rate_lo < level:
        return Power(epsilon=math.inf, noise_multiplier=0.0, flag_rate=rate_lo, **common)
    rate_hi = rate(hi)
    if rate_hi >= level:  # flagged at any noise in the range
        lo, rate_lo = hi, rate_hi
    while hi / lo > 1.0 + tolerance:
        mid = math.sqrt(lo * hi)
        r = rate(mid)
        if r >= level:
            lo, rate_lo = mid, r
        else:
            hi = mid
    eps, used = _epsilon(lo, float(sample_rate), int(steps), float(delta), accountant)
    return Power(
        epsilon=eps, noise_multiplier=lo, flag_rate=rate_lo, **{**common, "accountant": used}
    )


@lru_cache(maxsize=256)
def _epsilon(
    sigma: float, q: float, steps: int, delta: float, accountant: str
) -> tuple[float, str]:
    """(DP-SGD's epsilon at ``delta``, the accountant used): the library's ``accountant``, or,
    where it fails (PRV's grid at a tiny noise multiplier), RDP, whose epsilon is an upper
    bound on DP-SGD's, so "flags every true epsilon >= Y" stays true. Cached."""
    import warnings

    from dpaudit.accounting import dpsgd

    with warnings.catch_warnings():  # the accountants' numerical warnings at tiny sigma
        warnings.simplefilter("ignore")
        try:
            return float(dpsgd.epsilon(accountant, sigma, q, steps, delta)), accountant
        except (ValueError, ArithmeticError, RuntimeError):
            if accountant == "rdp":
                raise
            return float(dpsgd.epsilon("rdp", sigma, q, steps, delta)), "rdp"


@lru_cache(maxsize=64)
def ceiling(m: int, delta: float, confidence: float = 0.95) -> float:
    """The largest bound the verdict estimators give with m canaries when every guess is right
    (at each guess count of their grids, at its Bonferroni level): no run with m canaries can
    certify more (see the module docstring)."""
    from dpaudit.estimators.fdp_abstention import bound as fdp_abstention
    from dpaudit.estimators.one_run import bound as one_run

    best = 0.0
    for grid in _grids(m, confidence):
        rows = [(kp, km, kp + km, kp + km) for kp, km in grid.pairs]
        if grid.kind == "one_run":
            _, (eps, *_) = one_run.best_over_rows(rows, grid.level, mm=m, delta=delta)
        else:
            rs = [r for *_, r, _ in rows]
            _, (bound, *_) = fdp_abstention.best_over_grid(
                m,
                rs,
                grid.level,
                counts=lambda r: ((r + 1) // 2, r // 2, 0),
                family="approx_dp",
                delta=delta,
            )
            eps = bound.epsilon
        best = max(best, float(eps))
    return best


def power_text(result_power: Power | None, unseen: Sequence[str] = ()) -> str:
    """The sentences the verdict prints about what the audit could see: its power (``None``:
    not known, e.g. black-box canaries, whose score law depends on the model) and the stages of
    the training it could not see (``unseen``, e.g. :data:`UPSTREAM_STAGES` for canaries added
    at the noise call; a conformance check that covered a stage leaves it out)."""
    parts = []
    if result_power is None:
        parts.append("power unknown for these canaries (no idealised score law)")
    else:
        parts.append(str(result_power))
    if unseen:
        stages = list(unseen)
        named = stages[0] if len(stages) == 1 else ", ".join(stages[:-1]) + " and " + stages[-1]
        parts.append(
            f"it cannot see {named} (outside the noisy sum its canaries are read from): a "
            "departure there is not flagged however large"
        )
    return "; ".join(parts)
