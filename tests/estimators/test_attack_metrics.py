"""Attack metrics (dpaudit.estimators.attack_metrics.metrics) against their definitions.

AUROC against ``sklearn.metrics.roc_auc_score``; TPR at FPR and balanced accuracy against
sklearn's ROC curve and ``balanced_accuracy_score`` at every threshold; the raw-count epsilon
against a loop over thresholds; the bootstrap intervals' coverage of a known AUROC; the runner
on every design; bad input.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import balanced_accuracy_score, roc_auc_score, roc_curve

from dpaudit import audit as audit_mod
from dpaudit.config import validate_config
from dpaudit.estimators import METHODS
from dpaudit.estimators.attack_metrics import ci
from dpaudit.estimators.attack_metrics import metrics as am
from dpaudit.estimators.attack_metrics.metrics import attack_metrics
from dpaudit.scores import ScoreFile, ScoreFileError

DELTA = 1e-5


def _data(m: int, mu: float, seed: int, decimals: int | None = None):
    rng = np.random.default_rng(seed)
    member = (rng.random(m) < 0.5).astype(np.int8)
    score = rng.normal(size=m) + mu * member
    if decimals is not None:  # ties
        score = np.round(score, decimals)
    return score, member


@pytest.mark.parametrize(("m", "decimals"), [(300, None), (1000, 1), (57, 0)])
def test_point_metrics_are_sklearns(m, decimals):
    score, member = _data(m, 1.0, m, decimals)
    res = attack_metrics(score, member, delta=DELTA, fprs=[0.001, 0.01, 0.1], resamples=0)
    assert res.estimate["auroc"] == pytest.approx(roc_auc_score(member, score), abs=1e-12)
    fpr, tpr, thresholds = roc_curve(member, score, drop_intermediate=False)
    for a in (0.001, 0.01, 0.1):
        assert res.estimate[f"tpr_at_fpr_{a:g}"] == pytest.approx(tpr[fpr <= a].max(), abs=1e-12)
    best = max(balanced_accuracy_score(member, (score >= t).astype(int)) for t in np.unique(score))
    assert res.estimate["balanced_accuracy"] == pytest.approx(max(best, 0.5), abs=1e-12)


def _raw_epsilon(score, member, delta, min_count):
    """Eq. (1) of Annamalai et al. with the raw rates, by a loop over thresholds."""
    ins, outs = score[member == 1], score[member == 0]
    best = 0.0
    for t in np.r_[np.unique(score), np.inf]:
        tp, fp = np.sum(ins >= t), np.sum(outs >= t)
        fn, tn = ins.size - tp, outs.size - fp
        tpr, fpr, tnr, fnr = tp / ins.size, fp / outs.size, tn / outs.size, fn / ins.size
        if fp >= min_count and tpr > delta:
            best = max(best, np.log((tpr - delta) / fpr))
        if fn >= min_count and tnr > delta:
            best = max(best, np.log((tnr - delta) / fnr))
    return best


@pytest.mark.parametrize(("min_count", "delta"), [(1, 0.0), (10, DELTA), (50, 0.01)])
def test_raw_count_epsilon_is_its_definition(min_count, delta):
    score, member = _data(800, 2.0, 3, 2)
    res = attack_metrics(score, member, delta=delta, min_count=min_count, resamples=0)
    assert res.estimate["epsilon"] == pytest.approx(
        _raw_epsilon(score, member, delta, min_count), abs=1e-12
    )
    assert res.estimate["epsilon"] > 0.5
    assert np.isnan(res.lower["epsilon"])  # no resamples, no interval


def test_perfect_separation_is_finite_and_the_null_is_about_half():
    member = np.r_[np.ones(100), np.zeros(100)].astype(np.int8)
    res = attack_metrics(np.r_[np.ones(100), np.zeros(100)], member, delta=DELTA, resamples=0)
    assert res.estimate["auroc"] == 1.0 and res.estimate["balanced_accuracy"] == 1.0
    assert res.estimate["epsilon"] == 0.0  # no threshold has >= 10 false positives and a gap
    score, member = _data(4000, 0.0, 5)
    null = attack_metrics(score, member, delta=DELTA, resamples=200)
    assert null.lower["auroc"] < 0.5 < null.upper["auroc"]


def _reference_metrics(tp, fp, fprs, delta, min_count):
    """The straightforward computation (the first implementation, kept as the reference): every
    metric at every pooled distinct threshold, from the ROC counts (B, thresholds + 1)."""
    n_in, n_out = tp[:, -1:], fp[:, -1:]
    d_fp = np.diff(fp, axis=1)
    above = np.einsum("bj,bj->b", d_fp, tp[:, :-1] + np.diff(tp, axis=1) / 2)
    out = {"auroc": above / (n_in[:, 0] * n_out[:, 0])}
    rows = np.arange(tp.shape[0])
    for a in fprs:
        last = np.sum(fp <= a * n_out * (1 + 1e-12), axis=1) - 1
        out[f"tpr_at_fpr_{a:g}"] = tp[rows, last] / n_in[:, 0]
    out["balanced_accuracy"] = (1 + np.max(tp / n_in - fp / n_out, axis=1)) / 2

    def best_log_ratio(num, den, ok):
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(ok & (num > 0), num / den, 0.0)
        return np.log(np.maximum(ratio.max(axis=1), 1.0))

    c = max(min_count, 1)
    fwd = best_log_ratio((tp / n_in - delta) * n_out, fp, fp >= c)
    fn = n_in - tp
    rev = best_log_ratio(((n_out - fp) / n_out - delta) * n_in, fn, fn >= c)
    out["epsilon"] = np.maximum(fwd, rev)
    return out


@pytest.mark.parametrize(
    ("m", "mu", "decimals", "min_count", "delta", "clustered"),
    [
        (3000, 1.0, None, 10, DELTA, False),  # many blocks of thresholds, continuous scores
        (3000, 0.0, None, 1, 0.0, False),  # null scores: few blocks can be skipped
        (4000, 3.0, None, 10, DELTA, False),  # strong attack: most blocks skipped
        (2000, 1.0, 1, 5, 0.01, False),  # ties within and between the classes
        (500, 2.0, 0, 10, DELTA, False),  # few distinct scores
        (1200, 1.0, 2, 10, DELTA, True),  # cluster bootstrap (weights 0, 1, 2, ...)
    ],
)
def test_fast_metrics_equal_the_straightforward_computation_on_the_same_resamples(
    m, mu, decimals, min_count, delta, clustered
):
    """The O(m) per-resample metrics (thresholds at OUT / IN scores only, pruned blocks) equal
    the reference computed at every pooled threshold from the same resample weights."""
    score, member = _data(m, mu, 7 + m, decimals)
    c = am.split_classes(score, member)
    cluster = np.arange(m) // 4 if clustered else None
    w, v = am.resample_weights(c, np.random.default_rng(1), 40, cluster)
    assert (w.sum(axis=1) > 0).all() and (v.sum(axis=1) > 0).all()
    if not clustered:  # n draws with replacement per class
        assert (w.sum(axis=1) == c.in_pos.size).all() and (v.sum(axis=1) == c.out_pos.size).all()
    weights = np.zeros((w.shape[0], m))
    weights[:, c.in_pos], weights[:, c.out_pos] = w, v
    fprs = (0.001, 0.01, 0.1)
    ref = _reference_metrics(
        *am.roc_counts(am.sort_scores(score, member), weights), fprs, delta, min_count
    )
    fast = am.metrics_from_weights(c, w, v, fprs, delta, min_count)
    assert set(fast) == set(ref)
    for k in ref:
        np.testing.assert_allclose(fast[k], ref[k], rtol=0, atol=1e-12, err_msg=k)
    assert np.ptp(fast["epsilon"]) > 0  # the resamples differ


def test_multinomial_counts_are_n_uniform_draws_with_replacement():
    """The Poissonised sampler against the Multinomial(n; 1/n, ..., 1/n) law: totals, the
    Binomial(n, 1/n) marginals (chi-square), the covariance -n p^2 of two items, and the
    table's undecided 16-bit values (refined with more bits) are hit."""
    rng = np.random.default_rng(11)
    for n in (1, 2, 7, 1000):
        assert all(am.multinomial_counts(rng, n).sum() == n for _ in range(50))
    n, reps = 10, 40_000
    x = np.stack([am.multinomial_counts(rng, n) for _ in range(reps)])
    observed = np.bincount(np.minimum(x[:, 0], 4), minlength=5)
    pmf = stats.binom.pmf(np.arange(4), n, 1 / n)
    expected = reps * np.r_[pmf, 1 - pmf.sum()]
    assert stats.chisquare(observed, expected).pvalue > 1e-3
    assert np.cov(x[:, 0], x[:, 1])[0, 1] == pytest.approx(-n / n**2, abs=0.03)
    n, reps = 3000, 300
    x = np.concatenate([am.multinomial_counts(rng, n) for _ in range(reps)])
    observed = np.bincount(np.minimum(x, 5), minlength=6)
    pmf = stats.binom.pmf(np.arange(5), n, 1 / n)
    expected = x.size * np.r_[pmf, 1 - pmf.sum()]
    assert stats.chisquare(observed, expected).pvalue > 1e-3
    assert (am._POISSON_OF_U16 == am.AMBIGUOUS).sum() == 8
    undecided = np.flatnonzero(am._POISSON_OF_U16 == am.AMBIGUOUS)
    # every decided 16-bit value is the Poisson(1) inverse CDF at both ends of its interval
    u = np.flatnonzero(am._POISSON_OF_U16 != am.AMBIGUOUS)
    for end in ((u + 1e-9) / 2**16, (u + 1 - 1e-9) / 2**16):
        want = stats.poisson.ppf(end, 1.0)
        np.testing.assert_array_equal(am._POISSON_OF_U16[u], want)
    assert undecided.size and undecided.max() == 2**16 - 1


def test_resamples_do_not_depend_on_the_block_size(monkeypatch):
    score, member = _data(700, 1.0, 2)
    a = attack_metrics(score, member, delta=DELTA, resamples=37, seed=3)
    monkeypatch.setattr(am, "BLOCK", 5)
    b = attack_metrics(score, member, delta=DELTA, resamples=37, seed=3)
    assert a.lower == b.lower and a.upper == b.upper


def test_bootstrap_interval_covers_the_true_auroc():
    """Binormal scores, shift mu: AUROC = Phi(mu / sqrt 2). The 90% percentile interval
    covers it in about 90% of 60 independent data sets (at least 80%)."""
    mu = 1.0
    truth = stats.norm.cdf(mu / np.sqrt(2))
    hits = 0
    for rep in range(60):
        score, member = _data(400, mu, 100 + rep)
        res = attack_metrics(score, member, delta=DELTA, confidence=0.9, resamples=200, seed=rep)
        hits += res.lower["auroc"] <= truth <= res.upper["auroc"]
        assert res.lower["auroc"] <= res.estimate["auroc"] <= res.upper["auroc"]
    assert hits >= 48


def test_bootstrap_is_seeded_and_the_cluster_bootstrap_is_wider_for_correlated_trials():
    score, member = _data(600, 1.0, 9)
    a = attack_metrics(score, member, delta=DELTA, resamples=100, seed=4)
    b = attack_metrics(score, member, delta=DELTA, resamples=100, seed=4)
    c = attack_metrics(score, member, delta=DELTA, resamples=100, seed=5)
    assert a.lower == b.lower and a.upper == b.upper and a.lower != c.lower
    # 30 trials of 20 canaries; each trial shifts all its scores by a common random effect
    rng = np.random.default_rng(0)
    member = np.tile(np.r_[np.ones(10), np.zeros(10)], (30, 1)).astype(np.int8)
    score = rng.normal(size=member.shape) + member + 3 * rng.normal(size=(30, 1)) * member
    trial = np.broadcast_to(np.arange(30)[:, None], member.shape)
    iid = attack_metrics(score, member, delta=DELTA, resamples=300)
    clustered = attack_metrics(score, member, delta=DELTA, resamples=300, cluster=trial)
    assert clustered.unit == "trials" and iid.unit == "canaries"
    width = clustered.upper["auroc"] - clustered.lower["auroc"]
    assert width > 1.3 * (iid.upper["auroc"] - iid.lower["auroc"])


# ------------------------------------------- intervals of independent canaries (attack_metrics.ci)


@pytest.mark.parametrize(
    ("m", "mu", "decimals", "min_count", "delta"),
    [
        (3000, 1.0, None, 10, DELTA),  # continuous scores
        (3000, 0.0, None, 1, 0.0),  # null scores: many blocks expanded
        (4000, 3.0, None, 10, DELTA),  # strong attack: few blocks expanded
        (2000, 1.0, 1, 5, 0.01),  # ties within and between the classes
        (500, 2.0, 0, 10, DELTA),  # few distinct scores
    ],
)
def test_two_stage_epsilon_bootstrap_equals_the_full_computation_on_the_same_resamples(
    m, mu, decimals, min_count, delta
):
    """Given the same item counts (the second stage replaced by them), the two-stage
    bootstrap's maxima equal metrics_from_weights on the full weights, exactly."""
    score, member = _data(m, mu, 7 + m, decimals)
    c = am.split_classes(score, member)
    w, v = am.resample_weights(c, np.random.default_rng(1), 30)
    want = am.metrics_from_weights(c, w, v, (0.01,), delta, min_count)["epsilon"]
    order = np.argsort(-score, kind="stable")
    full = np.zeros((30, m))
    full[:, c.in_pos], full[:, c.out_pos] = w, v
    pooled, is_in = full[:, order], member[order] == 1
    expanded = []

    def counts(r, lo, hi):
        expanded.append((r, lo))
        x, i = pooled[r, lo:hi], is_in[lo:hi]
        return np.where(i, x, 0), np.where(i, 0, x)

    got = ci.epsilon_bootstrap(score, member, delta, min_count, 30, None, counts=counts)
    np.testing.assert_array_equal(got, want)
    assert np.ptp(got) > 0
    s = score[order]
    blocks = ci._block_edges(np.r_[0, np.flatnonzero(s[1:] != s[:-1]) + 1], m).size - 1
    assert len(expanded) > 30 * blocks  # the second stage ran (first stage: every block)


def test_two_stage_epsilon_bootstrap_has_the_law_of_the_full_bootstrap():
    """Its draws and those of n draws with replacement per class (resample_weights) are
    samples of one law: two-sample Kolmogorov-Smirnov, 1500 resamples each."""
    score, member = _data(400, 1.0, 5)
    c = am.split_classes(score, member)
    w, v = am.resample_weights(c, np.random.default_rng(2), 1500)
    full = am.metrics_from_weights(c, w, v, (0.01,), DELTA, 10)["epsilon"]
    two = ci.epsilon_bootstrap(score, member, DELTA, 10, 1500, np.random.default_rng(3))
    assert stats.ks_2samp(full, two).pvalue > 1e-3
    assert abs(np.median(full) - np.median(two)) < 0.1


def test_intervals_cover_the_true_metrics_of_a_binormal_attack():
    """IN ~ N(mu, 1), OUT ~ N(0, 1), mu = 1: AUROC = Phi(mu / sqrt 2), TPR at FPR a =
    1 - Phi(Phi^-1(1 - a) - mu), balanced accuracy = Phi(mu / 2). Over 300 data sets of 2000
    canaries, each 90% interval covers its truth in at least 90% of them less three Monte Carlo
    standard errors (DeLong is asymptotic; the TPR and balanced-accuracy intervals are exact or
    conservative, and the latter is checked to be conservative)."""
    mu, reps, alpha = 1.0, 300, 0.1
    norm = stats.norm
    truth = {
        "auroc": norm.cdf(mu / np.sqrt(2)),
        0.01: norm.sf(norm.isf(0.01) - mu),
        0.1: norm.sf(norm.isf(0.1) - mu),
        "ba": norm.cdf(mu / 2),
    }
    hits = dict.fromkeys(truth, 0)
    widths = []
    for rep in range(reps):
        score, member = _data(2000, mu, 1000 + rep)
        x, y = score[member == 1], score[member == 0]
        auc, lo, hi = ci.delong_auroc(x, y, alpha)
        assert auc == pytest.approx(roc_auc_score(member, score), abs=1e-12)
        hits["auroc"] += lo <= truth["auroc"] <= hi
        for a in (0.01, 0.1):
            lo, hi = ci.tpr_at_fpr_interval(x, y, a, alpha)
            hits[a] += lo <= truth[a] <= hi
        est = attack_metrics(score, member, delta=DELTA, resamples=0).estimate
        lo, hi = ci.balanced_accuracy_interval(est["balanced_accuracy"], x.size, y.size, alpha)
        hits["ba"] += lo <= truth["ba"] <= hi
        widths.append(hi - lo)
    floor = (1 - alpha) - 3 * np.sqrt(alpha * (1 - alpha) / reps)
    for k, h in hits.items():
        assert h / reps >= floor, (k, h)
    assert hits["ba"] / reps >= 0.97  # DKW is conservative
    assert np.mean(widths) < 0.09  # and not vacuous (2 sqrt(log 40 / 2000) = 0.086)


def test_tpr_interval_is_exact_on_ties_and_degenerate_at_tiny_fprs():
    """Discrete scores (ties between the classes): the interval still covers the estimand
    sup {TPR(t) : FPR(t) <= a} computed from the known law; with n_out * a far below one the
    lower end is 0 (no OUT order statistic is below a with the needed confidence)."""
    rng = np.random.default_rng(4)
    # IN ~ Binomial(6, 0.6), OUT ~ Binomial(6, 0.4); thresholds t = 0..7
    t = np.arange(8)
    fpr, tpr = stats.binom.sf(t - 1, 6, 0.4), stats.binom.sf(t - 1, 6, 0.6)
    a = 0.2
    truth = tpr[fpr <= a].max()
    hits = 0
    for _ in range(200):
        x, y = rng.binomial(6, 0.6, 500).astype(float), rng.binomial(6, 0.4, 500).astype(float)
        lo, hi = ci.tpr_at_fpr_interval(x, y, a, 0.1)
        hits += lo <= truth <= hi
    assert hits / 200 >= 0.9 - 3 * np.sqrt(0.09 / 200)
    x, y = rng.normal(1, 1, 50), rng.normal(0, 1, 50)
    assert ci.tpr_at_fpr_interval(x, y, 0.001, 0.05)[0] == 0.0


def _meta(design: str) -> dict:
    return {
        "experiment": "t",
        "setting": "s",
        "seed": 0,
        "design": design,
        "threat_model": "simulation",
        "claimed_epsilon": 2.0,
        "delta": DELTA,
        "accountant": "test",
    }


def _file(design: str, member: np.ndarray, seed: int = 0) -> ScoreFile:
    rng = np.random.default_rng(seed)
    score = rng.normal(size=member.shape) + 1.5 * member
    ids = np.tile(np.arange(member.shape[1]), (member.shape[0], 1))
    return ScoreFile(score=score, membership=member, canary_id=ids, meta=_meta(design))


def test_runner_on_every_design():
    assert set(METHODS["attack_metrics"].designs) == {"one_run", "multi_run", "lidp"}
    rng = np.random.default_rng(1)
    one = _file("one_run", (rng.random((2, 300)) < 0.5).astype(np.int8))
    multi = _file("multi_run", (rng.random((200, 1)) < 0.5).astype(np.int8))
    lidp = _file("lidp", np.tile(np.r_[np.ones(4), np.zeros(4)], (50, 1)).astype(np.int8))
    spec = {"am": {"method": "attack_metrics", "resamples": 50}}
    table = audit_mod.audit([one, multi, lidp], spec)
    assert list(table["design"]) == ["one_run", "one_run", "multi_run", "lidp"]
    assert list(table["trial"].iloc[:2]) == [0, 1]
    assert not table["valid"].any()
    assert list(table["ci_unit"]) == ["canaries", "canaries", "canaries", "trials"]
    for col in ("auroc", "tpr_at_fpr_0.001", "tpr_at_fpr_0.01", "balanced_accuracy", "epsilon"):
        assert (table[f"{col}_lo"] <= table[col] + 1e-12).all(), col
        assert (table[col] <= table[f"{col}_hi"] + 1e-12).all(), col
    # the one-run row of trial 1 is the metrics of that trial's canaries
    want = roc_auc_score(one.membership[1], one.score[1])
    assert table["auroc"].iloc[1] == pytest.approx(want, abs=1e-12)


def test_bad_input_names_the_file_and_the_key():
    member = np.ones((1, 50), np.int8)  # no OUT canary
    sf = _file("one_run", member)
    with pytest.raises(ScoreFileError, match="attack_metrics: .*1 IN|IN and OUT"):
        METHODS["attack_metrics"].run(sf, {})
    two_columns = _file("multi_run", np.tile(np.int8([1, 0]), (20, 1)))
    with pytest.raises(ScoreFileError, match="one target canary per trial"):
        METHODS["attack_metrics"].run(two_columns, {})
    for bad in ({"fprs": [0.0]}, {"fprs": [1.5]}, {"resamples": -1}, {"min_count": 0}):
        config = {"estimators": {"am": {"method": "attack_metrics", **bad}}}
        key = next(iter(bad))
        with pytest.raises(Exception, match=key):
            validate_config(config, require_experiments=False)
    with pytest.raises(ValueError, match="confidence"):
        attack_metrics(np.r_[0.0, 1.0], np.int8([0, 1]), delta=DELTA, confidence=1.0)


@pytest.mark.parametrize("seed", range(6))
def test_tpr_at_fpr_alone_equals_the_full_metrics(seed):
    """attack_metrics.tpr_at_fpr (partition + count) gives the tpr_at_fpr_<a> columns of
    attack_metrics, ties included (integer scores), from budgets below one false positive to
    nearly every OUT score."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(20, 3000))
    member = rng.integers(0, 2, n)
    member[:2] = [0, 1]
    score = rng.integers(0, 40, n) + member * rng.integers(0, 5)
    if seed % 2:
        score = rng.normal(size=n) + member
    fprs = (1e-4, 0.001, 0.01, 0.05, 0.3, 0.99)
    full = am.attack_metrics(score, member, delta=1e-5, fprs=fprs, resamples=0)
    alone = am.tpr_at_fpr(score, member, fprs)
    for a in fprs:
        col = am.tpr_column(a)
        assert alone[col] == full.estimate[col], (a, alone[col], full.estimate[col])


def test_tpr_at_fpr_alone_rejects_what_the_full_metrics_reject():
    with pytest.raises(ValueError, match="fprs must lie in"):
        am.tpr_at_fpr(np.arange(4.0), np.array([0, 1, 0, 1]), (0.0,))
    with pytest.raises(ValueError, match="IN and OUT"):
        am.tpr_at_fpr(np.arange(4.0), np.ones(4, dtype=int))
    with pytest.raises(ValueError, match="finite"):
        am.tpr_at_fpr(np.array([0.0, np.nan]), np.array([0, 1]))
