"""ROC curves (dpaudit.plots.roc): points against sklearn, labels, the log-log figure, and the
pipeline's ROC figure of every experiment with score files."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score, roc_curve

from dpaudit.pipeline import paths
from dpaudit.pipeline.targets import all_targets, figure_kind_files
from dpaudit.plots.roc import curves_of, draw_roc, plot_roc, roc_points, thin
from dpaudit.plots.style import fits_canvas
from dpaudit.scores import ScoreFile


def _file(claimed: float, mu: float, m: int = 2000, seed: int = 0) -> ScoreFile:
    rng = np.random.default_rng(seed)
    member = (rng.random((1, m)) < 0.5).astype(np.int8)
    meta = {
        "experiment": "e",
        "setting": f"eps{claimed}",
        "seed": seed,
        "design": "one_run",
        "threat_model": "simulation",
        "claimed_epsilon": claimed,
        "delta": 1e-5,
        "accountant": "test",
    }
    score = rng.normal(size=member.shape) + mu * member
    return ScoreFile(score, member, np.arange(m)[None], meta)


def test_roc_points_are_sklearns():
    sf = _file(1.0, 1.0)
    score, member = np.round(sf.score[0], 1), sf.membership[0]  # with ties
    fpr, tpr = roc_points(score, member)
    want_fpr, want_tpr, _ = roc_curve(member, score, drop_intermediate=False)
    np.testing.assert_allclose(fpr, want_fpr, atol=1e-15)
    np.testing.assert_allclose(tpr, want_tpr, atol=1e-15)
    low_fpr, low_tpr = thin(fpr, tpr, points=20)
    assert low_fpr[0] == 0 and low_fpr[-1] == 1 and low_fpr.size <= 22
    assert set(zip(low_fpr, low_tpr, strict=True)) <= set(zip(fpr, tpr, strict=True))


def test_a_curve_per_setting_ordered_and_labelled_by_claimed_epsilon(tmp_path):
    files = {
        "eps8": [_file(8.0, 2.0, seed=0), _file(8.0, 2.0, seed=1)],
        "eps1": [_file(1.0, 0.3)],
        "nonprivate": [_file(float("inf"), 4.0)],
    }
    curves = curves_of(files)
    assert [c.label for c in curves] == [
        "eps1 (claimed ε 1)",
        "eps8 (claimed ε 8)",
        "nonprivate (no noise: no guarantee)",
    ]
    pooled = files["eps8"]
    member = np.concatenate([sf.membership.ravel() for sf in pooled])
    score = np.concatenate([sf.score.ravel() for sf in pooled])
    assert curves[1].auroc == pytest.approx(roc_auc_score(member, score), abs=1e-12)
    assert curves[1].n_in + curves[1].n_out == 4000
    assert curves[0].auroc < curves[1].auroc < curves[2].auroc
    fig = draw_roc(curves, "ROC of e")
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert fits_canvas(fig)
    outs = [tmp_path / "roc.pdf", tmp_path / "roc.png"]
    plot_roc(files, outs, "ROC of e")
    assert all(p.stat().st_size > 1000 for p in outs)


def test_settings_with_the_same_claim_keep_their_names_and_bad_files_are_named():
    curves = curves_of({"m100": [_file(2.0, 1.0, 100)], "m1000": [_file(2.0, 1.0, 1000)]})
    assert sorted(c.label for c in curves) == [
        "m100 (claimed ε 2)",
        "m1000 (claimed ε 2)",
    ]
    only_in = _file(2.0, 1.0, 50)
    only_in = ScoreFile(
        only_in.score, np.ones_like(only_in.membership), only_in.canary_id, only_in.meta
    )
    with pytest.raises(ValueError, match="setting 'x'.*IN and OUT"):
        curves_of({"x": [only_in]})


def test_pipeline_draws_the_roc_figure_of_every_experiment_with_score_files():
    config = {
        "experiments": {
            "sim": {"kind": "simulate"},
            "trained": {"kind": "train"},
            "table": {"kind": "analysis"},
        }
    }
    assert figure_kind_files(config, "sim") == [
        "results/sim/figures/roc.pdf",
        "results/sim/figures/roc.png",
    ]
    assert figure_kind_files(config, "trained")[0] == paths.figure("trained", "roc")
    assert figure_kind_files(config, "table") == []


def test_default_config_targets_include_the_roc_figures(repo):
    from dpaudit.config import load_config_file, load_schema, validate_config

    default_config = load_config_file(repo / "config" / "config.yaml")
    validate_config(default_config, load_schema())
    targets = all_targets(default_config)
    for name, exp in default_config["experiments"].items():
        want = paths.figure(name, "roc", "png")
        assert (want in targets) == (exp["kind"] in ("train", "simulate")), name


def test_issue36_item12_every_curve_names_its_setting_beside_its_claim():
    """Issue 36, item 12: the white-box ROC legend said 0.993 / 1.99 / 3.99 for settings named
    eps1 / eps2 / eps4; every curve now shows the setting's name and its claim alike."""
    files = {
        "eps1": [_file(0.993, 0.3)],
        "eps2": [_file(1.99, 0.6)],
        "eps4": [_file(3.99, 1.0)],
        "nonprivate": [_file(float("inf"), 4.0)],
    }
    fig = draw_roc(curves_of(files))
    texts = [t.get_text() for legend in fig.legends for t in legend.get_texts()]
    assert [t.split(", AUROC")[0] for t in texts[:4]] == [
        "eps1 (claimed ε 0.993)",
        "eps2 (claimed ε 1.99)",
        "eps4 (claimed ε 3.99)",
        "nonprivate (no noise: no guarantee)",
    ]
