"""The generic line and dot figure (:mod:`dpaudit.plots.lines`) and the trade-off legend, each on
a small table in the audit table's format, at the points issue 28 (item 6) found wrong by eye:
a one-x table of many settings (the shuffling variants), the trade-off legend, "(uncorrected)"
on what is not an uncorrected bound, y-limits that leave the data in the bottom of the axes,
the selection figures' two claims, ceilings and lone points, unexplained error bars, and the
paper's printed one-run values."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from dpaudit.config import validate_config
from dpaudit.pipeline import params as pipeline_params
from dpaudit.plots.lines import draw_table
from dpaudit.plots.style import fits_canvas

ROOT = Path(__file__).resolve().parents[2]


def _texts(fig) -> list[str]:
    legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend()]
    return [t.get_text().replace("\n", " ") for lg in legends for t in lg.get_texts()]


def _close(fig) -> None:
    import matplotlib.pyplot as plt

    plt.close(fig)


def _row(**kw) -> dict:
    base = {
        "estimator": "multi_run_cp",
        "method": "multi_run_cp",
        "params": json.dumps({"confidence": 0.975}),
        "seed": 0,
        "claimed_epsilon": 0.394,
        "target_epsilon": 0.4,
        "valid": True,
        "epsilon": 0.2,
    }
    return {**base, **kw}


VARIANTS = [
    ("poisson", "partially_informed", ""),
    ("poisson", "batch_worst_case", ""),
    ("shuffle", "partially_informed", ""),
    ("shuffle", "batch_worst_case", ""),
    ("partial_shuffle", "partially_informed", "1"),
    ("partial_shuffle", "partially_informed", "10"),
    ("no_shuffle", "partially_informed", "1"),
    ("no_shuffle", "partially_informed", "10"),
    ("batch_then_shuffle", "batch_worst_case", ""),
]


def _variants_table() -> pd.DataFrame:
    rows = []
    for i, (sampler, adversary, prefix) in enumerate(VARIANTS):
        for sel, valid in (("same_data", False), ("heldout", True)):
            rows.append(
                _row(
                    sampler=sampler,
                    adversary=adversary,
                    prefix_batches=prefix,
                    selection=sel,
                    valid=valid,
                    epsilon=0.1 * i + (0.3 if sel == "same_data" else 0.0),
                )
            )
    return pd.DataFrame(rows)


VARIANTS_FIGURE = {
    "kind": "train",
    "x": "target_epsilon",
    "series": ["sampler", "adversary", "prefix_batches", "selection"],
    "xlabel": "claimed (Poisson) epsilon",
    "labels": {"sampler": {"shuffle": "full shuffle"}},
    "title": "Shuffling §7 at CPU scale",
}


def test_a_one_x_table_of_many_settings_is_a_dot_chart_whose_legend_fits():
    fig = draw_table(_variants_table(), VARIANTS_FIGURE)
    try:
        assert fits_canvas(fig), "the legend (or a label) lies outside the figure"
        (ax,) = fig.axes
        rows = [t.get_text().replace("\n", " ") for t in ax.get_yticklabels()]
        assert len(rows) == len(VARIANTS) and "full shuffle, batch worst case" in rows
        texts = _texts(fig)
        # one entry per selection rule and one for the claim, not one per variant and rule
        assert len(texts) <= 4, texts
        assert "claimed ε = 0.394" in texts
        # the claim is drawn (a vertical line at 0.394), not a lone point without a marker
        claim = [ln for ln in ax.get_lines() if ln.get_label() == "claimed ε = 0.394"]
        assert claim and list(claim[0].get_xdata()) == [0.394, 0.394]
        # every variant's bound is on the axes
        lo, hi = ax.get_xlim()
        assert lo <= 0 and hi >= 0.8 + 0.3
    finally:
        _close(fig)


def test_a_one_x_dot_chart_of_estimators_names_each_row_like_the_legends():
    """A one-x figure whose only series is the estimator (the tight one-run Fig. 6 at one
    epsilon) has one row per estimator block, named as the line figures' legends name it
    (``estimator_label``: method and what it assumes), not by the block's key."""
    blocks = {
        "fdp_abstention_half": {"family": "gdp"},
        "fdp_abstention_sg_half": {"family": "subsampled_gaussian"},
    }
    table = pd.DataFrame(
        [
            _row(estimator=name, method="fdp_abstention", params=json.dumps(spec), epsilon=0.5)
            for name, spec in blocks.items()
        ]
    )
    fig = draw_table(table, {"kind": "train", "x": "target_epsilon", "series": ["estimator"]})
    try:
        (ax,) = fig.axes
        rows = [t.get_text().replace("\n", " ") for t in ax.get_yticklabels()]
        assert rows == [
            "f-DP in one run (Mahloujifar et al.), assumes GDP",
            "f-DP in one run (Mahloujifar et al.), assumes DP-SGD curve",
        ]
    finally:
        _close(fig)


def test_the_trade_off_legend_fits_and_no_clopper_pearson_curve_is_called_uncorrected():
    from dpaudit.plots.tradeoff import draw_tradeoff, tradeoff_table
    from dpaudit.scores import ScoreFile

    rng = np.random.default_rng(0)
    member = rng.integers(0, 2, 400)
    meta = {
        "experiment": "e",
        "setting": "s",
        "seed": 0,
        "threat_model": "per_step_dot",
        "accountant": "prv",
        "design": "multi_run",
        "claimed_epsilon": 0.394,
        "delta": 1e-5,
        "noise_multiplier": 1.289,
        "sample_rate": 0.01,
        "steps": 100,
    }
    files = [
        ScoreFile(rng.normal(0.5 * member)[:, None], member[:, None], np.zeros((400, 1)), meta)
    ]
    label = "full shuffle, partially informed adversary"  # the CPU config's setting label
    table = tradeoff_table({"s": files}, {"s": label}, [100, 400], 0.95)
    fig = draw_tradeoff(table, "Trade-off curves, full shuffle, partially informed adversary")
    try:
        assert fits_canvas(fig), "the trade-off legend is clipped"
        texts = _texts(fig)
        bounded = [t for t in texts if "Clopper-Pearson" in t]
        assert len(bounded) == 2
        assert not [t for t in bounded if "uncorrected" in t], bounded
        assert all("97.5% per rate" in t and "pointwise" in t for t in bounded)
        assert len([t for t in texts if "raw rates" in t]) == 2
    finally:
        _close(fig)


def test_no_line_of_a_column_other_than_an_epsilon_bound_is_labelled_uncorrected():
    rows = []
    for insert, acc in (("coins", 0.5), ("none", 0.6)):
        for eps in (1, 8):
            for trial in range(4):
                rows.append(
                    _row(
                        estimator="one_run",
                        method="one_run",
                        selection="bonferroni",
                        insert=insert,
                        target_epsilon=eps,
                        claimed_epsilon=eps,
                        trial=trial,
                        test_accuracy=acc + 0.01 * trial,
                        valid=insert == "coins",  # a run without canaries has no valid bound
                    )
                )
    fig_spec = {
        "kind": "train",
        "x": "target_epsilon",
        "y": "test_accuracy",
        "series": ["insert"],
        "claimed": False,
    }
    fig = draw_table(pd.DataFrame(rows), fig_spec)
    try:
        texts = _texts(fig)
        assert "none" in texts and not [t for t in texts if "uncorrected" in t], texts
        dashed = [c for c in fig.axes[0].containers if c.lines[0].get_linestyle() != "-"]
        assert not dashed
    finally:
        _close(fig)


def _one_run_table(claim: float = 8.0) -> pd.DataFrame:
    rows = []
    for m, mean in ((10, 0.3), (100, 0.6), (1000, 0.9)):
        for trial in range(8):
            rows.append(
                _row(
                    estimator="one_run",
                    method="one_run",
                    params=json.dumps({"confidence": 0.95}),
                    selection="bonferroni",
                    m=m,
                    trial=trial,
                    target_epsilon=claim,
                    claimed_epsilon=claim,
                    epsilon=mean + 0.02 * (trial - 3.5),
                )
            )
    return pd.DataFrame(rows)


ONE_RUN_FIGURE = {"kind": "train", "x": "m", "logx": True, "series": ["target_epsilon"]}


def test_a_claim_above_the_axis_is_named_to_three_digits():
    """A calibrated claim (15.9989 for a target of 16) is named as 16, not to six digits."""
    fig = draw_table(_one_run_table(claim=15.9989), ONE_RUN_FIGURE)
    try:
        assert "claimed ε = 16 (above the axis)" in _texts(fig)
    finally:
        _close(fig)


def test_the_y_limits_bracket_the_data_not_a_claim_far_above_it():
    table = _one_run_table(claim=8.0)
    fig = draw_table(table, ONE_RUN_FIGURE)
    try:
        ax = fig.axes[0]
        bottom, top = ax.get_ylim()
        means = table.groupby("m")["epsilon"].mean()
        assert bottom <= 0 and top >= means.max()
        assert means.max() >= 0.5 * top, f"data in the bottom of a 0-{top:.3g} axis"
        texts = _texts(fig)
        assert "claimed ε = 8 (above the axis)" in texts
        # the meaning of the error bars is stated
        assert any(t.startswith("error bars: ±1 s.e.") and "over 8 audits" in t for t in texts)
    finally:
        _close(fig)
    fig = draw_table(_one_run_table(claim=1.5), ONE_RUN_FIGURE)  # a claim near the data: shown
    try:
        bottom, top = fig.axes[0].get_ylim()
        assert top >= 1.5 and "claimed ε" in _texts(fig)
    finally:
        _close(fig)


def test_a_claim_rising_along_x_is_drawn_whole_not_labelled_above_the_axis():
    """The tight one-run Fig. 6 of the issue-28 re-run: x is the target epsilon (2 and 8), the
    bounds reach about 2.1, the claim line runs from 1.99 to 8.00. Its start lies within the
    data's range, so the line was drawn and cut off at the top while the legend read "claimed
    ε = 7.99528 (above the axis)". A claim partly in view is drawn whole, labelled plainly."""
    rows = []
    for eps, mean in ((1.99, 0.6), (8.0, 2.1)):
        for trial in range(8):
            rows.append(
                _row(
                    estimator="one_run",
                    method="one_run",
                    params=json.dumps({"confidence": 0.95}),
                    selection="fixed",
                    trial=trial,
                    target_epsilon=round(eps),
                    claimed_epsilon=eps,
                    epsilon=mean + 0.02 * (trial - 3.5),
                )
            )
    spec = {"kind": "train", "x": "target_epsilon", "series": ["estimator"]}
    fig = draw_table(pd.DataFrame(rows), spec)
    try:
        texts = _texts(fig)
        assert "claimed ε" in texts, texts
        assert not [t for t in texts if "above the axis" in t], texts
        assert fig.axes[0].get_ylim()[1] >= 8.0
    finally:
        _close(fig)


def _selection_table(eps_b: list[float]) -> pd.DataFrame:
    rows = []
    for eps in eps_b:
        for setup in ("ntnv", "ntcv", "etcv"):
            for seed in range(3):
                rows.append(
                    _row(
                        selection="heldout",
                        setup=setup,
                        seed=seed,
                        target_epsilon=eps,
                        claimed_epsilon=eps,
                        claimed_epsilon_papernot_steinke=2.3 * eps,
                        reference_reduced_game_exact=1.07 * eps,
                        reference_reduced_game_rdp=1.5 * eps,
                        epsilon=0.2 * eps + 0.05 * seed,
                    )
                )
    return pd.DataFrame(rows)


SELECTION_FIGURE = {
    "kind": "train",
    "x": "target_epsilon",
    "series": ["setup"],
    "where": {"selection": "heldout"},
    "xlabel": "base budget epsilon_B",
}


@pytest.mark.parametrize("eps_b", [[2.0, 4.0], [4.0]], ids=["two_eps", "one_eps"])
def test_selection_figures_draw_both_claims_and_two_distinct_ceilings(eps_b):
    fig = draw_table(_selection_table(eps_b), SELECTION_FIGURE)
    try:
        ax = fig.axes[0]
        texts = _texts(fig)
        base = [t for t in texts if t.startswith("claim of one training run ε_B")]
        tuned = [t for t in texts if t.startswith("claim of the tuned mechanism ε_U")]
        assert base and tuned, texts
        assert not [t for t in texts if t.startswith("claimed ε")], texts
        lines = {ln.get_label().split(" = ")[0]: ln for ln in ax.get_lines()}
        exact = lines["ceiling: reduced game, exact ε (Sec. 5.1)"]
        rdp = lines["upper bound ε_U-O: reduced game via RDP (Alg. 3)"]
        assert (exact.get_linestyle(), exact.get_marker()) != (
            rdp.get_linestyle(),
            rdp.get_marker(),
        )
        # every line is visible: a lone point has a marker, a shared value is a full line
        for name in (tuned[0].split(" = ")[0], "ceiling: reduced game, exact ε (Sec. 5.1)"):
            line = lines[name]
            assert len(line.get_xdata()) > 1 or line.get_marker() not in ("", "None", None)
        # the data and every claim lie within the axes
        limit = ax.get_xlim()[1] if len(eps_b) == 1 else ax.get_ylim()[1]
        assert limit >= 2.3 * max(eps_b)
        assert fits_canvas(fig)
    finally:
        _close(fig)


def test_the_one_run_figures_get_the_papers_printed_values():
    raw = yaml.safe_load((ROOT / "config" / "cpu" / "one_run.yaml").read_text())
    base = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    raw["estimators"] = {**base.get("estimators", {}), **raw.get("estimators", {})}
    config = validate_config(raw)
    spec = pipeline_params.figure_params(config, "cpu_one_run_fig6")
    printed = {m["where"]["target_epsilon"]: m["paper"] for m in spec["marks"]}
    # Steinke, Nasr, Jagielski (2023), Sec. 4.1: 0.7, 1.2, 1.8, 3.5 at eps = 1, 2, 4, 8
    assert printed == {1: 0.7, 2: 1.2, 4: 1.8, 8: 3.5}
    rows = []
    for eps in (1, 2, 4, 8):
        for trial in range(2):
            rows.append(
                _row(
                    estimator="one_run",
                    method="one_run",
                    selection="bonferroni",
                    target_epsilon=eps,
                    claimed_epsilon=eps,
                    trial=trial,
                    dirac_placement="random",
                    epsilon=0.3 * eps**0.5,
                )
            )
    fig = draw_table(pd.DataFrame(rows), spec)
    try:
        ax = fig.axes[0]
        marks = [ln for ln in ax.get_lines() if ln.get_label().startswith("paper (printed")]
        assert sorted(float(ln.get_ydata()[0]) for ln in marks) == [0.7, 1.2, 1.8, 3.5]
        assert ax.get_ylim()[1] >= 3.5
    finally:
        _close(fig)
    accuracy = pipeline_params.figure_params(config, "cpu_one_run_accuracy")
    assert sorted(m["paper"] for m in accuracy["marks"]) == [0.76, 0.78]


def test_lines_that_differ_only_in_a_later_series_column_get_distinct_colours():
    from matplotlib.colors import to_hex

    rows = []
    for kind, shift in (("mislabeled", 0.0), ("in_distribution", 0.1)):
        table = _one_run_table().assign(type=kind)
        table["epsilon"] += shift
        rows.append(table)
    spec = {**ONE_RUN_FIGURE, "series": ["target_epsilon", "type"]}
    fig = draw_table(pd.concat(rows, ignore_index=True), spec)
    try:
        lines = {c.get_label(): to_hex(c.lines[0].get_color()) for c in fig.axes[0].containers}
        # named by what tells them apart (the one target epsilon is the claim line's)
        assert set(lines) == {"mislabelled records", "in-distribution records"}, lines
        assert len(set(lines.values())) == 2, lines
    finally:
        _close(fig)


def test_the_caption_of_a_one_x_figure_says_it_is_a_dot_chart():
    from dpaudit.plots.captions import caption

    raw = yaml.safe_load((ROOT / "config" / "cpu" / "shuffling.yaml").read_text())
    text = caption(raw["experiments"]["shuffling_variants_cpu"], "shuffling_variants_cpu")
    assert "dot chart" in text and "bars one standard error" in text
    one_run = yaml.safe_load((ROOT / "config" / "cpu" / "one_run.yaml").read_text())
    text = caption(one_run["experiments"]["cpu_one_run_fig6"], "cpu_one_run_fig6")
    assert "dot chart" not in text and "grey diamonds" in text


def test_only_the_tuned_mechanisms_claim_joins_the_main_claim():
    # the Opacus engine's epsilon of every accountant restates the one claim: not drawn
    table = _one_run_table(claim=1.5).assign(
        claimed_epsilon_rdp=1.5, claimed_epsilon_prv=1.45, claimed_epsilon_gdp=1.4
    )
    fig = draw_table(table, ONE_RUN_FIGURE)
    try:
        texts = _texts(fig)
        assert "claimed ε" in texts and not [t for t in texts if "rdp" in t or "ε_B" in t]
    finally:
        _close(fig)
    # a simulated selection game: its main claim is not a training run's budget
    game = _selection_table([2.0, 4.0])
    fig = draw_table(game, {**SELECTION_FIGURE, "kind": "simulate"})
    try:
        texts = _texts(fig)
        assert "claimed ε" in texts
        assert any(t.startswith("claim of the tuned mechanism ε_U") for t in texts)
    finally:
        _close(fig)
