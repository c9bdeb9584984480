"""A still smaller config/cpu/shuffling.yaml end to end (real Location-30 records, real DP-SGD
with shuffled, unshuffled and batch-then-shuffled batches, the likelihood-ratio statistics, the
multi-run estimator, the verdict columns, the paper target and the claims' reproduction rows)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from dpaudit import scores
from dpaudit.verdict import FLAGGED, verdict_table
from tests.workflow.test_pipeline_e2e import snakemake

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


def _small_config(mirror: Path) -> dict:
    """config/cpu/shuffling.yaml's experiment, reduced: 199 records (T = 20 batches of 10),
    200 runs per setting, Poisson (modified worst case), no shuffle (k = 1) and
    batch-then-shuffle."""
    cpu = yaml.safe_load((REPO / "config" / "cpu" / "shuffling.yaml").read_text())
    exp = cpu["experiments"]["shuffling_variants_cpu"]
    exp["dataset"].update(n_train=199, n_test=100)
    exp["shards"] = 1
    exp["train"].update(models_per_shard=200, eval_examples=100, batch_size=10)
    keep = [
        ("poisson", "batch_worst_case"),  # a fixed data set: the Poisson claim covers it
        ("no_shuffle", "partially_informed"),
        ("batch_then_shuffle", "batch_worst_case"),
    ]
    exp["points"] = [
        p
        for p in exp["points"]
        if (p["train.sampler"], p["canaries.adversary"]) in keep
        and p["canaries.prefix_batches"] in (None, 1)
    ]
    exp["paper_target"] = "shuffling/verdicts_small"
    exp["verdict"].update(by=["sampler"], target="shuffling/verdict_table_small")
    exp["tradeoff"].update(where={"sampler": "batch_then_shuffle"}, runs=[50, 200])
    exp["tradeoff"]["target"] = "shuffling/tradeoff_small"
    exp["reproduce"] = [
        r
        for r in exp["reproduce"]
        if "partial shuffling" not in r["quantity"] and "full shuffle" not in r["quantity"]
    ]
    return {
        "data": {"mirror": str(mirror)},
        "experiments": {"shuffling_small": exp},
        "estimators": cpu["estimators"],
    }


def test_shuffling_variants_end_to_end(tmp_path, shared_data):
    cfg = tmp_path / "shuffling_small.yaml"
    cfg.write_text(yaml.safe_dump(_small_config(shared_data / "data")))
    target = "results/shuffling/verdicts_small.csv"
    practitioner = "results/shuffling/verdict_table_small.csv"
    tradeoff = "results/shuffling/tradeoff_small.csv"
    snakemake(tmp_path, target, practitioner, tradeoff, "results/reproduction.csv", configfile=cfg)
    table = pd.read_csv(tmp_path / target)
    assert set(table["sampler"]) == {"poisson", "no_shuffle", "batch_then_shuffle"}
    assert np.allclose(table["claimed_epsilon"], 0.4, atol=0.01)  # the Poisson PRV claim
    # the verdict columns: flagged exactly where a valid bound exceeds the claim
    valid = table["valid"].astype(bool)
    assert set(table.loc[valid, "selection"]) == {"heldout"}
    want = valid & (table["epsilon"] > table["claimed_epsilon"])
    assert (table["exceeds_claim"] == want.astype(int)).all()
    assert (table.loc[want, "verdict"] == FLAGGED).all()
    verdicts = verdict_table(table, ["sampler", "adversary"]).set_index("sampler")
    assert len(verdicts) == 3 and (verdicts["confidence"] == 0.975).all()
    assert verdicts.loc["poisson", "verdict"] != FLAGGED  # the correct implementation
    # the published practitioner's table: one row per sampler, the valid rows of one block
    published = pd.read_csv(tmp_path / practitioner).set_index("sampler")
    assert list(published.index) == sorted(["poisson", "no_shuffle", "batch_then_shuffle"])
    assert (published["joint_confidence"] == 0.975).all()  # one valid row per sampler here
    assert published.loc["poisson", "verdict"] != FLAGGED
    for sampler, row in published.iterrows():
        own = table[(table["sampler"] == sampler) & valid]
        assert row["epsilon_lower_bound"] == pytest.approx(own["epsilon"].max())
        assert (row["verdict"] == FLAGGED) == bool(own["exceeds_claim"].max())
    assert (tmp_path / "results/shuffling/verdict_table_small.png").stat().st_size > 0
    # the trade-off figure's table: nested 50 and 200 runs of batch-then-shuffle, the claims
    curves = pd.read_csv(tmp_path / tradeoff)
    emp = curves[curves["curve"] == "empirical"]
    assert sorted(emp["runs"].unique()) == [50, 200]
    assert set(curves["curve"]) == {"empirical", "eps_delta", "poisson_pld"}
    assert (emp["fpr_upper"] >= emp["fpr"]).all() and (emp["fnr_upper"] >= emp["fnr"]).all()
    assert (tmp_path / "results/shuffling/tradeoff_small.pdf").stat().st_size > 0
    # every row scores the adversary's likelihood ratio of 20 per-step observations
    for setting in table["setting"].unique():
        sf = scores.read(
            tmp_path / "results" / "shuffling_small" / "scores" / setting / "seed0.shard0.npz"
        )
        assert sf.score.shape == (200, 1) and sf.meta["statistic"] == "likelihood_ratio"
        assert sf.meta["steps"] == 20 and sf.meta["steps_per_epoch"] == 20
    # the claims' rows: the Poisson claim holds; the others are reported whatever they show
    rep = pd.read_csv(tmp_path / "results" / "reproduction.csv")
    rows = rep[rep["experiment"] == "shuffling_small"].set_index("quantity")
    assert len(rows) == 3 and (rows["source"] == "claim").all()
    poisson = next(q for q in rows.index if "Poisson" in q)
    assert bool(rows.loc[poisson, "agrees"])
