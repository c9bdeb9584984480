"""The Gaussian-mechanism LiDP study (Pillutla et al., NeurIPS 2023, Section 4 and App. E).

Query ``q(D) = sum_{z in D} z`` on the base set D = {0_d}, output ``q(D) + sigma xi`` with
``xi ~ N(0, I_d)`` (sensitivity 1). Per trial (Algorithm 1, add/remove, two models):

* K canaries ``u_1..u_K`` and m null canaries ``u'_1..u'_m``, i.i.d. uniform on the unit sphere;
* theta_1 = sum_{k<=K} u_k + sigma z_1 (all K inserted), theta_0 = sum_{k<K} u_k + sigma z_0
  (c_K left out), with independent noises z_1, z_0 (two separate runs of the mechanism);
* inserted scores ``<u_k, theta_1>`` (k = 1..K), null scores ``<u'_j, theta_0>`` (j = 1..m).

(The released code shares one noise draw between the two models; the two sides are bounded
separately by Alg. 1, so the joint law across sides does not affect the bound.)

**Exact sampling through the Gram matrix (ours).** The inserted scores
``s_k = 1 + sum_{j != k} <u_k, u_j> + sigma <u_k, z_1>`` are inner products of the p = K + 1
Gaussian vectors ``(g_1..g_K, z_1)`` (canaries are ``u = g / |g|``). The p x d Gaussian
matrix is ``V = L Q`` with Q independent of L and L (p x r, r = min(p, d)) lower triangular:
``L_ii = sqrt(chi^2_{d-i+1})`` (i = 1..r), ``L_ij ~ N(0, 1)`` for j < min(i, r + 1)
(Bartlett 1933; for p <= d, ``L L^T ~ Wishart_p(d, I)``; for p > d the rows beyond the d-th
are their coordinates in the basis spanned by the first d, i.i.d. N(0, 1) by rotation
invariance). Inner products of rows of V equal those of rows of L, so
``s_k = <L_k, w_1> / |L_k|`` with ``w_1 = sum_j L_j / |L_j| + sigma L_z``: O(K min(K, d)) per
trial. The null scores need less: given the inserted canaries, ``w_0 = a + sigma z_0`` with
``a = sum_{k<K} u_k``, and ``|w_0|^2 = (|a| + sigma N)^2 + sigma^2 chi^2_{d-1}``; the fresh
``u'_j`` are independent and uniform on the sphere, so ``<u'_j, w_0> = |w_0| N_j /
sqrt(N_j^2 + chi^2_{d-1, j})`` independently over j: O(m) per trial. Nothing depends on d
beyond the degrees of freedom.

**Speed.** The entries of L are float32 normals from a Box-Muller transform of raw 32-bit
words of an SFC64 stream seeded from the caller's generator (:func:`standard_normal_f32`;
exact to float32 resolution, tail beyond 6.77 sd cut, mass 1.3e-11) and the two mat-vecs run
in float32 (scores are O(1..10); relative rounding about 1e-6). The diagonal (chi-square), the
null scores and the returned arrays are float64. ``method="direct"`` (float64, the
d-dimensional vectors) is the reference the tests compare with in distribution.

Privacy of the mechanism (App. E.1): the ``rdp`` accountant is the paper's conversion
(:func:`dpaudit.accounting.gaussian.gaussian_rdp_epsilon`, Balle et al. 2020, Thm. 21);
``epsilon_exact`` is the exact curve of the Gaussian mechanism (Balle and Wang 2018, Thm. 8).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Literal

import numpy as np
from scipy import optimize

from dpaudit.accounting.gaussian import gaussian_rdp_epsilon, gdp_epsilon
from dpaudit.keys import CLAIMED_EPSILON
from dpaudit.scores import FIXED_INCLUSION, INCLUSION_KEY, ScoreFile, write

#: Trials sampled per vectorised block (bounds memory at CHUNK * p^2 doubles).
CHUNK_BYTES = 64 * 2**20


# ---------------------------------------------------------------------------------------------
# Privacy of the Gaussian mechanism with sensitivity 1
# ---------------------------------------------------------------------------------------------


def epsilon_exact(sigma: float, delta: float) -> float:
    """Smallest eps with Phi(1/(2s) - eps s) - e^eps Phi(-1/(2s) - eps s) <= delta: the exact
    curve of the Gaussian mechanism with sensitivity 1, i.e. (1/s)-GDP
    (:func:`dpaudit.accounting.gaussian.gdp_epsilon`)."""
    if sigma <= 0 or not 0 < delta < 1:
        raise ValueError(f"need sigma > 0 and delta in (0, 1), got {sigma}, {delta}")
    return gdp_epsilon(delta, 1.0 / sigma)


Accountant = Literal["rdp", "exact"]


def epsilon_of_sigma(sigma: float, delta: float, accountant: Accountant = "rdp") -> float:
    if accountant == "rdp":
        return gaussian_rdp_epsilon(sigma, delta)
    if accountant == "exact":
        return epsilon_exact(sigma, delta)
    raise ValueError(f"unknown accountant {accountant!r}; allowed: 'rdp', 'exact'")


def sigma_for_epsilon(epsilon: float, delta: float, accountant: Accountant = "rdp") -> float:
    """The noise scale whose ``accountant`` epsilon at ``delta`` is ``epsilon``.

    With ``rdp`` and delta = 1e-5 this gives sigma^2 = 16.36, 4.62, 1.34, 0.407 for eps = 1, 2,
    4, 8 (the released code's table; App. E.1).
    """
    if epsilon <= 0:
        raise ValueError(f"epsilon must be > 0, got {epsilon}")
    return float(
        optimize.brentq(
            lambda s: epsilon_of_sigma(s, delta, accountant) - epsilon, 1e-3, 1e4, xtol=1e-12
        )
    )


# ---------------------------------------------------------------------------------------------
# Samplers
# ---------------------------------------------------------------------------------------------


def _check(n: int, K: int, m: int, d: int, sigma: float) -> None:
    for name, v in (("n", n), ("K", K), ("m", m), ("d", d)):
        if int(v) != v or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")
    if not sigma >= 0:
        raise ValueError(f"sigma must be >= 0, got {sigma!r}")


#: Bytes of float32 factors per vectorised block: small blocks stay in cache (measured
#: fastest among 1, 2, 4, 16 and 64 MiB at K = 64..1024).
CHUNK_BYTES_F32 = 2 * 2**20
#: Factors with at most this many rows are filled row by row, larger ones in bands of BAND rows.
ROW_FILL_MAX = 128
BAND = 32
_STRICT_LOWER = np.tril(np.ones((BAND, BAND), dtype=np.float32), k=-1)
#: Box-Muller from 32-bit words: U = (k + 1/2) 2^-32 in (0, 1), so |N| <= sqrt(2 log 2^33) = 6.77;
#: the normal law is matched to float32 resolution with the tail beyond 6.77 (mass 1.3e-11) cut.
_U32_SCALE = np.float32(2.0**-32)
_TWO_PI_U32 = np.float32(2.0 * np.pi * 2.0**-32)
#: Normals per Box-Muller block (measured: 2^16 about 1.5x faster than 2^20).
NORMAL_BLOCK = 2**16


def standard_normal_f32(bitgen: np.random.BitGenerator, size: int) -> np.ndarray:
    """``size`` i.i.d. N(0, 1) draws as float32 by the Box-Muller transform (Box and Muller 1958):
    ``sqrt(-2 log U1) (cos 2 pi U2, sin 2 pi U2)`` from raw 32-bit words of ``bitgen``, in
    blocks of NORMAL_BLOCK draws (cache-sized temporaries).

    About 2.5x faster than ``Generator.standard_normal(dtype=float32)`` (ziggurat) here; the
    draws are a deterministic function of the bit generator's state.
    """
    size = int(size)
    out = np.empty(size, dtype=np.float32)
    for start in range(0, size, NORMAL_BLOCK):
        stop = min(start + NORMAL_BLOCK, size)
        _box_muller(bitgen, out[start:stop])
    return out


def _box_muller(bitgen: np.random.BitGenerator, out: np.ndarray) -> None:
    size = len(out)
    h = (size + 1) // 2
    words = bitgen.random_raw(h).view(np.uint32)  # 2h independent 32-bit words
    r = words[:h].astype(np.float32)
    r += np.float32(0.5)
    r *= _U32_SCALE  # U1 in (0, 1]
    np.log(r, out=r)
    r *= np.float32(-2.0)
    np.sqrt(r, out=r)
    theta = words[h:].astype(np.float32)
    theta *= _TWO_PI_U32
    np.cos(theta[: size - h], out=out[: size - h])
    out[: size - h] *= r[: size - h]
    np.sin(theta, out=theta)
    theta *= r
    out[size - h :] = theta


def normal_stream(rng: np.random.Generator) -> np.random.BitGenerator:
    """The bit generator of the Bartlett entries: an SFC64 seeded (256 bits) from ``rng``, so
    the scores stay a deterministic function of ``rng``'s seed and disjoint streams (the
    held-out and the evaluation trials) stay disjoint."""
    return np.random.SFC64(np.random.SeedSequence(rng.integers(0, 2**63, size=4).tolist()))


def _bartlett(
    rng: np.random.Generator,
    bitgen: np.random.BitGenerator,
    out: np.ndarray,
    d: int,
) -> np.ndarray:
    """Fill ``out`` (t, p, r), float32, r = min(p, d), entries above the diagonal already 0,
    with t independent factors L of a p x d Gaussian matrix V = L Q (Bartlett 1933):
    ``L_ij ~ N(0, 1)`` for j < min(i, r) (from ``bitgen``) and ``L_ii = sqrt(chi^2_{d-i})``
    (0-based i < r, from ``rng``). For p <= d this is the Bartlett factor of Wishart_p(d, I);
    for p > d the rows i >= d are the coordinates of v_i in the orthonormal basis spanned by
    v_0..v_{d-1}, i.e. d i.i.d. N(0, 1) (rotation invariance of v_i, independent of the basis).

    The normals are drawn in one call and copied into the lower triangle without a zero fill
    or a fancy-index scatter (nothing above the diagonal is written, so ``out`` can be reused
    across blocks): row by row for p <= ROW_FILL_MAX; for larger p in bands of BAND rows, each
    band one rectangle of normals whose part above the diagonal is then zeroed (those draws
    are discarded: about BAND / p of all draws, for far fewer Python-level copies).
    """
    t, p, r = out.shape
    if p <= ROW_FILL_MAX:
        lengths = np.minimum(np.arange(p), r)
        packed = standard_normal_f32(bitgen, t * int(lengths.sum())).reshape(t, -1)
        start = 0
        for i in range(1, p):
            out[:, i, : lengths[i]] = packed[:, start : start + lengths[i]]
            start += lengths[i]
    else:
        bands = [(i0, min(i0 + BAND, r)) for i0 in range(0, r, BAND)]
        if r < p:
            bands.append((r, p))  # rows beyond the d-th: full rows of r normals
        sizes = [(i1 - i0) * min(i1, r) for i0, i1 in bands]
        draws = standard_normal_f32(bitgen, t * sum(sizes)).reshape(t, -1)
        start = 0
        for (i0, i1), size in zip(bands, sizes, strict=True):
            width = min(i1, r)
            out[:, i0:i1, :width] = draws[:, start : start + size].reshape(t, i1 - i0, width)
            start += size
            if i0 < r:  # zero the band's square part on and above the diagonal
                out[:, i0:i1, i0:i1] *= _STRICT_LOWER[: i1 - i0, : i1 - i0]
    out.reshape(t, p * r)[:, : r * r : r + 1] = np.sqrt(
        rng.chisquare(d - np.arange(r), size=(t, r))
    )
    return out


def _inserted_scores(V: np.ndarray, K: int, sigma: float) -> tuple[np.ndarray, np.ndarray]:
    """From rows (g_1..g_K, z_1) of V (t, K+1, r): the K inserted scores and |sum_{k<K} u_k|.

    Matrix-vector products only: ``s_k = <V_k, w_1> / |V_k|``, ``w_1 = sum_j V_j / |V_j| +
    sigma V_z`` (no normalised copy of V is formed). Computed in V's dtype.
    """
    G = V[:, :K]
    inv = 1.0 / np.sqrt(np.einsum("tkr,tkr->tk", G, G))  # 1 / |g_k|
    a = (inv[:, None, : K - 1] @ G[:, : K - 1])[:, 0]  # sum_{k<K} u_k: in both models
    w1 = a + inv[:, K - 1, None] * G[:, K - 1] + V.dtype.type(sigma) * V[:, K]
    s_in = (G @ w1[:, :, None])[:, :, 0] * inv
    return s_in, np.sqrt(np.einsum("tr,tr->t", a, a))


def _null_scores_exact(rng, norm_a: np.ndarray, m: int, d: int, sigma: float) -> np.ndarray:
    """<u'_j, a + sigma z_0> for m fresh uniform unit vectors, given |a| (see module doc)."""
    t = len(norm_a)
    norm_w0 = np.sqrt(
        (norm_a + sigma * rng.standard_normal(t)) ** 2
        + sigma**2 * (rng.chisquare(d - 1, size=t) if d > 1 else 0.0)
    )
    g = rng.standard_normal((t, m))
    rest = rng.chisquare(d - 1, size=(t, m)) if d > 1 else 0.0
    return norm_w0[:, None] * g / np.sqrt(g * g + rest)


def _direct(rng, t: int, K: int, m: int, d: int, sigma: float):
    """Direct sampling of the d-dimensional vectors (the reference)."""
    V = rng.standard_normal((t, K + 1, d))  # g_1..g_K, z_1
    s_in, _ = _inserted_scores(V, K, sigma)
    U = V[:, : K - 1] / np.linalg.norm(V[:, : K - 1], axis=2, keepdims=True)
    w0 = U.sum(axis=1) + sigma * rng.standard_normal((t, d))  # the model without c_K
    G = rng.standard_normal((t, m, d))
    Un = G / np.linalg.norm(G, axis=2, keepdims=True)
    return s_in, np.einsum("tjr,tr->tj", Un, w0)


def sample_scores(
    n: int,
    K: int,
    m: int,
    d: int,
    sigma: float,
    rng: np.random.Generator | int,
    method: Literal["gram", "direct"] = "gram",
) -> tuple[np.ndarray, np.ndarray]:
    """(score_in (n, K), score_out (n, m)) of ``n`` trials; see the module docstring.

    ``method="gram"`` samples through the Bartlett factor (O(K min(K, d) + m) per trial, any
    d); ``"direct"`` draws the d-dimensional vectors (O((K + m) d), the reference). The same
    ``rng`` seed gives the same scores (on one machine: float32 ``sin``/``cos``/``log`` may
    differ in the last bit between CPU instruction sets).
    """
    _check(n, K, m, d, sigma)
    if method not in ("gram", "direct"):
        raise ValueError(f"method must be 'gram' or 'direct', got {method!r}")
    rng = np.random.default_rng(rng)
    p = K + 1
    ins, outs = [], []
    if method == "gram":
        bitgen = normal_stream(rng)
        r = min(p, d)
        chunk = max(1, min(n, CHUNK_BYTES_F32 // (4 * p * r)))
        buf = np.zeros((chunk, p, r), dtype=np.float32)  # stays 0 above the diagonal
        for start in range(0, n, chunk):
            t = min(chunk, n - start)
            s_in, norm_a = _inserted_scores(_bartlett(rng, bitgen, buf[:t], d), K, sigma)
            ins.append(s_in.astype(np.float64))
            outs.append(_null_scores_exact(rng, norm_a.astype(np.float64), m, d, sigma))
    else:
        chunk = max(1, CHUNK_BYTES // (8 * (K + 1 + m) * d))
        for start in range(0, n, chunk):
            s_in, s_out = _direct(rng, min(chunk, n - start), K, m, d, sigma)
            ins.append(s_in)
            outs.append(s_out)
    return np.concatenate(ins), np.concatenate(outs)


# ---------------------------------------------------------------------------------------------
# Score files
# ---------------------------------------------------------------------------------------------


#: The size guard of the released code (Gaussian study, App. E): configurations with
#: n * K > MAX_NK are skipped there; here they are refused with an error.
MAX_NK = 10**8


def resolve_K(K: int | str, n: int) -> int:
    """``K``, or ``round(sqrt(n))`` for ``K="sqrt_n"`` (the paper's default K = sqrt(n), Sec. 4)."""
    if K == "sqrt_n":
        return max(1, int(round(math.sqrt(n))))
    if isinstance(K, bool) or not isinstance(K, int | np.integer):
        raise ValueError(f"K must be a positive integer or 'sqrt_n', got {K!r}")
    return int(K)


def resolve_heldout(heldout_trials: int | str, n: int) -> int:
    """Held-out tuning trials: an integer >= 0, or ``"n"`` for as many as evaluation trials
    (App. E.1: "a holdout set of n trials")."""
    if heldout_trials == "n":
        return int(n)
    if (
        isinstance(heldout_trials, bool)
        or not isinstance(heldout_trials, int | np.integer)
        or heldout_trials < 0
    ):
        raise ValueError(f"heldout_trials must be an integer >= 0 or 'n', got {heldout_trials!r}")
    return int(heldout_trials)


def heldout_rng(seed: int, heldout_seed: int | None) -> np.random.Generator:
    """The stream of the held-out trials: from ``heldout_seed`` if given (then every file of a
    setting holds the same held-out trials, the paper's one tuning run), else from the file's
    ``seed``; spawn key 1 keeps it disjoint from the evaluation stream ``default_rng(seed)``."""
    base = seed if heldout_seed is None else heldout_seed
    return np.random.default_rng(np.random.SeedSequence(int(base), spawn_key=(1,)))


def score_file(
    n: int,
    K: int | str,
    d: int,
    epsilon: float,
    delta: float,
    seed: int,
    m: int | None = None,
    accountant: Accountant = "rdp",
    method: Literal["gram", "direct"] = "gram",
    heldout_trials: int | str = 0,
    heldout_seed: int | None = None,
    experiment: str = "lidp_gaussian",
    setting: str = "",
) -> ScoreFile:
    """A design-``lidp`` score file of the Gaussian mechanism calibrated to (epsilon, delta).

    Columns: the K inserted canaries (membership 1, canary_id 0..K-1) then the m = K (default)
    null canaries (membership 0, canary_id K..K+m-1); one row per trial. ``K="sqrt_n"`` gives
    K = round(sqrt(n)).

    The paper's protocol (App. E.1: tau tuned on a holdout set of n trials, then 25 fresh
    repetitions) is ``heldout_trials="n"`` with a fixed ``heldout_seed`` (the released code
    tunes on seed 1000): the file's first ``heldout_trials`` rows are then the same tuning
    trials in every file of the setting, followed by n fresh evaluation trials from ``seed``;
    ``meta["heldout_trials"]`` tells the ``lidp`` estimator which rows to tune on. With
    ``heldout_seed=None`` each file draws its own tuning trials. The evaluation trials do not
    depend on ``heldout_trials`` (same ``seed``, same rows).
    """
    K = resolve_K(K, n)
    m = K if m is None else m
    h = resolve_heldout(heldout_trials, n)
    if heldout_seed is not None and (
        isinstance(heldout_seed, bool) or not isinstance(heldout_seed, int | np.integer)
    ):
        raise ValueError(f"heldout_seed must be an integer or null, got {heldout_seed!r}")
    if n * K > MAX_NK:
        raise ValueError(
            f"n * K = {n * K} exceeds the released code's guard n * K <= {MAX_NK:.0e} "
            f"(n = {n}, K = {K})"
        )
    sigma = sigma_for_epsilon(epsilon, delta, accountant)
    s_in, s_out = sample_scores(n, K, m, d, sigma, seed, method)
    if h:
        t_in, t_out = sample_scores(h, K, m, d, sigma, heldout_rng(seed, heldout_seed), method)
        s_in, s_out = np.concatenate([t_in, s_in]), np.concatenate([t_out, s_out])
    meta: dict[str, Any] = {
        "experiment": experiment,
        "setting": setting or f"eps{epsilon:g}_K{K}_d{d}",
        "seed": int(seed),
        "design": "lidp",
        INCLUSION_KEY: FIXED_INCLUSION,  # K inserted and m null canaries in every trial
        "threat_model": "simulation",
        CLAIMED_EPSILON: float(epsilon),
        "delta": float(delta),
        "accountant": f"gaussian_{accountant}",
        "lidp_variant": "add_remove",
        "mechanism": "gaussian_sum",
        "sigma": sigma,
        "d": int(d),
        "K": int(K),
        "m": int(m),
        "sampler": method,
        "heldout_trials": h,
        "heldout_seed": None if heldout_seed is None else int(heldout_seed),
    }
    rows = h + n
    membership = np.zeros((rows, K + m), dtype=np.int8)
    membership[:, :K] = 1
    return ScoreFile(
        score=np.concatenate([s_in, s_out], axis=1),
        membership=membership,
        canary_id=np.tile(np.arange(K + m), (rows, 1)),
        meta=meta,
    )


def write_score_file(path: str | Path, **kwargs: Any) -> Path:
    """:func:`score_file` written to ``path`` (atomic, reproducible bytes)."""
    return write(path, score_file(**kwargs))
