"""The trade-off figure (Annamalai et al. 2024, Figs. 4-5) and the practitioner's verdict table:
the claim curves against closed forms, the empirical curve against the multi-run estimator,
nested run counts, the figures' canvas and labels, and the config checks of both blocks."""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import pytest

from dpaudit.accounting.dpsgd import dpsgd_tradeoff, eps_delta_tradeoff, epsilon_pld
from dpaudit.accounting.gaussian import gdp_tradeoff
from dpaudit.config import ConfigError, load_schema, validate_config
from dpaudit.estimators.multi_run.bound import threshold_audit
from dpaudit.pipeline import targets
from dpaudit.plots.labels import internal_names
from dpaudit.plots.style import fits_canvas
from dpaudit.plots.tradeoff import (
    EMPIRICAL,
    EPS_DELTA,
    POISSON_PLD,
    draw_tradeoff,
    empirical_curve,
    tradeoff_table,
)
from dpaudit.plots.verdict import draw_verdicts, with_implementation
from dpaudit.scores import ScoreFile
from dpaudit.verdict import FLAGGED, verdict_table

ALPHA = np.linspace(0.0, 1.0, 201)


def test_eps_delta_tradeoff_closed_form():
    # epsilon 0, delta 0: the diagonal; larger epsilon: a lower curve, symmetric f(f(a)) = a
    assert np.allclose(eps_delta_tradeoff(ALPHA, 0.0, 0.0), 1 - ALPHA)
    f = eps_delta_tradeoff(ALPHA, 1.0, 0.0)
    assert (f <= 1 - ALPHA + 1e-12).all() and f[20] < 1 - ALPHA[20] - 0.1
    assert np.allclose(eps_delta_tradeoff(f, 1.0, 0.0), ALPHA, atol=1e-12)
    assert eps_delta_tradeoff(0.1, 1.0, 1e-5) == pytest.approx(1 - 1e-5 - np.e * 0.1)
    with pytest.raises(ValueError, match="epsilon"):
        eps_delta_tradeoff(ALPHA, -1.0, 0.0)


def test_poisson_tradeoff_without_subsampling_is_the_gaussian_curve():
    # q = 1, T steps of noise sigma: the Gaussian mechanism with mu = sqrt(T) / sigma
    f = dpsgd_tradeoff(ALPHA, sigma=2.0, q=1.0, steps=4)
    assert np.allclose(f, gdp_tradeoff(ALPHA, 1.0), atol=2e-4)


def test_poisson_tradeoff_lies_above_its_eps_delta_curve():
    # the accounted mechanism is (epsilon, delta)-DP, so its exact curve is never below
    sigma, q, steps, delta = 1.3, 0.01, 100, 1e-5
    eps = epsilon_pld(sigma, q, steps, delta)
    f = dpsgd_tradeoff(ALPHA, sigma, q, steps)
    assert (f >= eps_delta_tradeoff(ALPHA, eps, delta) - 1e-6).all()
    assert (f <= 1 - ALPHA + 1e-9).all()


def _files(mu: float, n: int, seed: int, shards: int = 2, eps: float = 0.5) -> list[ScoreFile]:
    """Multi-run score files: IN scores N(mu, 1), OUT N(0, 1), a fair coin per run."""
    rng = np.random.default_rng(seed)
    out = []
    for shard in range(shards):
        member = rng.integers(0, 2, n)
        meta = {
            "experiment": "synthetic",
            "setting": f"mu{mu:g}",
            "seed": seed,
            "threat_model": "per_step_dot",
            "accountant": "prv",
            "design": "multi_run",
            "claimed_epsilon": eps,
            "delta": 1e-5,
            "noise_multiplier": 1.3,
            "sample_rate": 0.01,
            "steps": 100,
            "shard": shard,
        }
        score = rng.normal(mu * member, 1.0)
        out.append(ScoreFile(score[:, None], member[:, None], np.zeros((n, 1)), meta))
    return out


def test_empirical_curve_bounds_the_raw_rates_and_its_best_point_is_algorithm_5():
    files = _files(1.5, 500, seed=0)
    score = np.concatenate([f.score.ravel() for f in files])
    member = np.concatenate([f.membership.ravel() for f in files])
    c = empirical_curve(score, member, confidence=0.9, delta=1e-5)
    assert (c["fpr_upper"] >= c["fpr"]).all() and (c["fnr_upper"] >= c["fnr"]).all()
    assert c["fpr"].is_monotonic_decreasing and c["fnr"].is_monotonic_increasing
    same_data = threshold_audit(score, member, 1e-5, confidence=0.9, selection="same_data")
    assert c["epsilon_at_threshold"].max() == pytest.approx(same_data.epsilon, abs=1e-12)


def test_tradeoff_table_nests_runs_and_marks_violations():
    strong = _files(4.0, 500, seed=1)  # far more separable than epsilon 0.5 allows
    null = _files(0.0, 500, seed=2)
    t = tradeoff_table({"s": strong, "n": null}, {"s": "strong", "n": "null"}, [100, 1000], 0.95)
    assert set(t["curve"]) == {EMPIRICAL, EPS_DELTA, POISSON_PLD}
    emp = t[t["curve"] == EMPIRICAL]
    assert sorted(emp["runs"].unique()) == [100, 1000]
    # the first 100 runs of the pooled files, in file order
    first = emp[(emp["setting"] == "s") & (emp["runs"] == 100)]
    assert first["n_members"].iloc[0] + first["n_nonmembers"].iloc[0] == 100
    assert first["n_members"].iloc[0] == strong[0].membership[:100].sum()
    assert emp[emp["setting"] == "s"]["below_eps_delta"].any()
    assert emp[emp["setting"] == "s"]["below_poisson"].any()
    assert not emp[emp["setting"] == "n"]["below_poisson"].any()
    assert len(t[t["curve"] == POISSON_PLD]) == len(t[t["curve"] == EPS_DELTA])  # one claim
    with pytest.raises(ValueError, match="2000 runs asked for"):
        tradeoff_table({"s": strong}, {}, [2000], 0.95)


def test_tradeoff_figure_fits_and_names_no_internal_identifier():
    t = tradeoff_table({"s": _files(1.0, 300, seed=3)}, {"s": "full shuffle"}, None, 0.95)
    fig = draw_tradeoff(t, "Trade-off curves (a test)")
    labels = [h.get_label() for ax in fig.axes for h in ax.get_lines()]
    legend_labels = [t.get_text() for leg in fig.legends for t in leg.get_texts()]
    assert any("600 runs" in label for label in legend_labels)
    assert not [name for label in legend_labels for name in internal_names(label)]
    assert labels and fits_canvas(fig)


def _audit_rows() -> pd.DataFrame:
    """Audit rows of three implementations: no_shuffle over two prefixes (one flagged), Poisson
    below its claim, and an invalid same-data row that must not count."""
    base = {"claimed_epsilon": 0.4, "valid": True, "confidence": 0.975, "estimator": "v"}
    rows = [
        {"sampler": "no_shuffle", "prefix_batches": 1, "epsilon": 0.5, **base},
        {"sampler": "no_shuffle", "prefix_batches": 10, "epsilon": 0.0, **base},
        {"sampler": "poisson", "prefix_batches": None, "epsilon": 0.1, **base},
        {**base, "sampler": "poisson", "epsilon": 2.0, "valid": False},
        {**base, "sampler": "poisson", "epsilon": 9.0, "estimator": "other"},
    ]
    return pd.DataFrame(rows)


def test_verdict_table_combines_valid_rows_with_their_joint_confidence():
    v = verdict_table(_audit_rows(), ["sampler"], estimator="v").set_index("sampler")
    assert v.loc["no_shuffle", "epsilon_lower_bound"] == 0.5
    assert v.loc["no_shuffle", "rows_combined"] == 2
    assert v.loc["no_shuffle", "joint_confidence"] == pytest.approx(0.95)
    assert (v.loc["no_shuffle", "verdict"], v.loc["no_shuffle", "flagged"]) == (FLAGGED, 1)
    # the invalid row (2.0) and the other estimator's row (9.0) are not read
    assert v.loc["poisson", "epsilon_lower_bound"] == 0.1
    assert (v.loc["poisson", "verdict"], v.loc["poisson", "flagged"]) == (
        "not flagged: no evidence",  # these rows carry no evidence count
        0,
    )
    assert v.loc["poisson", "joint_confidence"] == pytest.approx(0.975)
    # without the estimator filter the other block's row flags Poisson
    assert verdict_table(_audit_rows(), ["sampler"]).set_index("sampler").loc["poisson", "flagged"]
    with pytest.raises(ValueError, match="no rows of estimator 'nope'"):
        verdict_table(_audit_rows(), ["sampler"], estimator="nope")


def test_verdict_figure_names_implementations_for_a_reader():
    v = verdict_table(_audit_rows(), ["sampler"], estimator="v")
    v = with_implementation(v, ["sampler"])
    assert list(v["implementation"]) == ["no shuffling", "Poisson"]
    fig = draw_verdicts(v, "Which data loaders deliver the claimed epsilon")
    ticks = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert sorted(ticks) == ["Poisson", "no shuffling"]
    assert "95% confidence" in fig.axes[0].get_xlabel()  # at least 95%: 0.95 and 0.975
    assert fits_canvas(fig)


def test_verdict_figure_states_the_family_the_known_bound_and_rows_without_a_bound():
    """The title gives the table's family-wise confidence, the legend says "not flagged", a
    cross marks Chua et al.'s bound where the table knows one, and an implementation whose
    only rows the claim does not cover (no bound) is drawn without a dot."""
    rows = _audit_rows().assign(design="multi_run", evidence=1000)
    rows.loc[rows["sampler"] == "no_shuffle", "shuffle_lower_bound"] = 2.33
    rows = pd.concat([rows, rows.iloc[[2]].assign(sampler="shuffle", not_covered="why not")])
    v = with_implementation(verdict_table(rows, ["sampler"], estimator="v"), ["sampler"])
    assert v.set_index("sampler").loc["shuffle", "verdict"] == "no verdict: why not"
    fig = draw_verdicts(v, "Loaders")
    ax = fig.axes[0]
    assert "all flags at once: 92.5% confidence" in ax.get_title()  # three rows at 97.5%
    labels = [t.get_text() for leg in fig.legends for t in leg.get_texts()]
    labels += [t.get_text() for t in (ax.get_legend().get_texts() if ax.get_legend() else [])]
    assert "not flagged: no evidence at these runs" in labels
    assert not [t for t in labels if "consistent" in t]
    assert any("Chua" in t for t in labels) and ax.get_xlim()[1] > 2.33
    assert fits_canvas(fig)


def test_verdict_figure_title_joins_the_family_into_a_heading_that_ends_in_parentheses():
    """A heading that ends with its own parenthesis (the CPU config's "... (Location-30 MLP, CPU
    scale)") takes the family-wise confidence inside it, not as a second parenthesis after it;
    a heading without one gets its own."""
    rows = _audit_rows().assign(design="multi_run", evidence=1000)
    v = with_implementation(verdict_table(rows, ["sampler"], estimator="v"), ["sampler"])
    every = "all flags at once: 92.5%"  # three rows at 97.5%
    ax = draw_verdicts(v, "Which loaders (Location-30 MLP, CPU scale)").axes[0]
    text = ax.get_title().replace("\n", " ")
    assert text == f"Which loaders (Location-30 MLP, CPU scale; {every} confidence)"
    assert ") (" not in text
    text = draw_verdicts(v, "Loaders").axes[0].get_title().replace("\n", " ")
    assert text == f"Loaders ({every} confidence)"


def _shuffling_cfg(**blocks) -> dict:
    exp = {
        "kind": "train",
        "design": "multi_run",
        "threat_model": "per_step_dot",
        "estimators": ["cp"],
        "shards": 2,
        "dataset": {"name": "synthetic", "n_train": 99},
        "canaries": {
            "type": "random_gradient",
            "neighbouring": "zero_out",
            "adversary": "partially_informed",
            "statistic": "likelihood_ratio",
        },
        "train": {
            "target_epsilons": [1],
            "nonprivate": False,
            "epochs": 1,
            "batch_size": 10,
            "models_per_shard": 50,
        },
        "points": [{"train.sampler": "poisson"}, {"train.sampler": "shuffle"}],
        **blocks,
    }
    return {"experiments": {"sh": exp}, "estimators": {"cp": {"method": "multi_run_cp"}}}


def test_good_verdict_and_tradeoff_blocks_pass_and_publish():
    cfg = _shuffling_cfg(
        verdict={"by": ["sampler"], "estimator": "cp", "target": "shuffling/v"},
        tradeoff={"where": {"sampler": "shuffle"}, "runs": [10, 100], "target": "shuffling/t"},
    )
    validate_config(cfg, load_schema())
    assert targets.tradeoff_settings(cfg, "sh") == ["samplershuffle_eps1"]
    assert targets.published(cfg) == {
        "shuffling/v": ("sh", "verdict"),
        "shuffling/t": ("sh", "tradeoff"),
    }
    inputs = targets.paper_target_inputs(cfg, "shuffling", "t")
    assert inputs["table"] == "results/sh/tradeoff.csv"
    assert inputs["png"] == "results/sh/figures/tradeoff.png"
    assert "results/sh/verdicts.csv" in targets.all_targets(cfg)


@pytest.mark.parametrize(
    "blocks,match",
    [
        (
            {"verdict": {"by": ["buffer_size"]}},
            r"experiments\.sh\.verdict\.by: no audit-table column \['buffer_size'\]",
        ),
        (
            {"verdict": {"by": ["sampler"], "estimator": "gdp"}},
            r"experiments\.sh\.verdict\.estimator: 'gdp' does not run",
        ),
        (
            {"tradeoff": {"where": {"sampler": "no_shuffle"}}},
            r"experiments\.sh\.tradeoff\.where: .* selects no setting",
        ),
        (
            {"tradeoff": {"runs": [101]}},
            r"experiments\.sh\.tradeoff\.runs: asks for 101 runs, but a setting trains 100",
        ),
        (
            {"paper_target": "shuffling/x", "tradeoff": {"target": "shuffling/x"}},
            r"experiments\.sh\.tradeoff\.target: 'shuffling/x' is already published",
        ),
    ],
)
def test_bad_verdict_or_tradeoff_block_names_the_key(blocks, match):
    cfg = _shuffling_cfg(**copy.deepcopy(blocks))
    with pytest.raises(ConfigError, match=match):
        validate_config(cfg, load_schema())
