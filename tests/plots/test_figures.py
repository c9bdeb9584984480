"""Every figure of config/test.yaml, rendered as the pipeline renders it: display names only (no
internal identifier in a legend), nothing outside the canvas; and the pieces of the style
(labels, colours, uncorrected and control styles, the paper's printed values, captions)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from dpaudit.audit import run_estimator
from dpaudit.config import ConfigError, validate_config
from dpaudit.pipeline import params as pipeline_params
from dpaudit.pipeline import paths
from dpaudit.pipeline.params import estimator_block
from dpaudit.pipeline.settings import applicable_estimators, setting_columns, train_settings
from dpaudit.pipeline.targets import figure_name
from dpaudit.plots.captions import caption
from dpaudit.plots.eps import draw_empirical_vs_claimed
from dpaudit.plots.labels import estimator_label, internal_names, short_title, value_label
from dpaudit.plots.lines import draw_table
from dpaudit.plots.style import METHOD_COLORS, PALETTE, STYLE, fits_canvas
from dpaudit.scores import ScoreFile
from dpaudit.tables import add_setting_columns

ROOT = Path(__file__).resolve().parents[2]


def _score_file(exp: dict, name: str, setting: str, target: float | None) -> ScoreFile:
    """A score file of the experiment's design whose members score higher (a leaky run)."""
    rng = np.random.default_rng(len(setting))
    design = exp["design"]
    if design == "one_run":
        member = rng.integers(0, 2, (1, exp["canaries"]["m"]))
    elif design == "lidp":
        k = exp["canaries"]["k"]
        member = np.tile(np.r_[np.ones(k), np.zeros(k)], (64, 1))
    else:
        member = rng.integers(0, 2, (400, 1))
    score = 2.0 * member + rng.normal(size=member.shape)
    meta = {
        "experiment": name,
        "setting": setting,
        "seed": 0,
        "design": design,
        "threat_model": exp["threat_model"],
        "claimed_epsilon": target,
        "delta": exp["train"]["delta"],
        "accountant": exp["train"]["accountant"],
    }
    ids = np.broadcast_to(np.arange(member.shape[1]), member.shape)
    return ScoreFile(score, member, ids, meta)


def _audit_table(config: dict, name: str) -> pd.DataFrame:
    """The experiment's audit table on made-up score files, every estimator the pipeline runs."""
    exp = config["experiments"][name]
    frames = []
    for setting, target in train_settings(exp).items():
        sf = _score_file(exp, name, setting, target)
        for est in applicable_estimators(config, name):
            frames.append(run_estimator(sf, est, estimator_block(config, est)))
    table = pd.concat(frames, ignore_index=True)
    return add_setting_columns(table, setting_columns(exp))


def _test_config() -> dict:
    return validate_config(yaml.safe_load((ROOT / "config" / "test.yaml").read_text()))


def _legend_texts(fig) -> list[str]:
    legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend()]
    return [t.get_text() for legend in legends for t in legend.get_texts()]


def _check(fig) -> None:
    texts = _legend_texts(fig)
    assert texts, "a figure without a legend"
    bad = {t: internal_names(t) for t in texts if internal_names(t)}
    assert not bad, f"internal identifiers in legend labels: {bad}"
    labels = [ax.get_xlabel() for ax in fig.axes] + [ax.get_ylabel() for ax in fig.axes]
    assert not [t for t in labels if internal_names(t)], labels
    assert fits_canvas(fig), "something is drawn outside the canvas"


TEST_EXPERIMENTS = sorted(_test_config()["experiments"])


@pytest.mark.parametrize("name", TEST_EXPERIMENTS)
def test_every_figure_of_the_test_config_reads_without_internal_names(name):
    import matplotlib.pyplot as plt

    config = _test_config()
    table = _audit_table(config, name)
    fig_params = pipeline_params.figure_params(config, name)
    fig = draw_empirical_vs_claimed(table, fig_params)
    try:
        _check(fig)
    finally:
        plt.close(fig)
    if figure_name(config, name) != paths.EPS_FIGURE:
        fig = draw_table(table, fig_params)
        try:
            _check(fig)
        finally:
            plt.close(fig)


@pytest.mark.slow
def test_the_check_catches_an_internal_name_and_a_legend_off_the_canvas():
    import matplotlib.pyplot as plt

    config = _test_config()
    table = _audit_table(config, "tiny")
    fig = draw_empirical_vs_claimed(table, {"estimator_labels": {"one_run": "one_run"}})
    with pytest.raises(AssertionError, match="internal identifiers"):
        _check(fig)
    plt.close(fig)
    fig = draw_empirical_vs_claimed(table, {})
    assert fits_canvas(fig)
    fig.text(0.98, 0.5, "a long note running past the right edge of the figure")
    assert not fits_canvas(fig)
    plt.close(fig)


def _table(valid_of=lambda sel: sel != "grid_max_uncorrected") -> pd.DataFrame:
    rows = []
    for est, method in (("one_run", "one_run"), ("fdp_one_run_gdp", "fdp_one_run")):
        for setting, claimed in (("eps2", 2.0), ("eps4", 4.0), ("nonprivate", np.inf)):
            for sel in ("grid_max_uncorrected", "bonferroni"):
                rows.append(
                    {
                        "setting": setting,
                        "seed": 0,
                        "estimator": est,
                        "method": method,
                        "params": json.dumps({"confidence": 0.95}),
                        "selection": sel,
                        "claimed_epsilon": claimed,
                        "target_epsilon": None if np.isinf(claimed) else claimed,
                        "epsilon": 1.0 if np.isfinite(claimed) else 3.0,
                        "valid": valid_of(sel),
                    }
                )
    return pd.DataFrame(rows)


def test_styles_colours_controls_and_paper_values_of_the_eps_figure():
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_hex

    marks = [{"paper": 1.7, "where": {"target_epsilon": 4}, "column": "epsilon"}]
    fig = draw_empirical_vs_claimed(_table(), {"marks": marks, "title": "T"})
    main, side = fig.axes  # the no-noise control in its own narrow panel
    texts = [t.replace("\n", " ") for t in _legend_texts(fig)]
    assert "One run (Steinke et al.), best of grid (uncorrected)" in texts
    assert "Tight f-DP (Xiang et al.), assumes GDP, Bonferroni" in texts  # GDP: labelled
    assert "paper (printed value)" in texts and not [t for t in texts if "noise" in t]
    assert main.get_ylabel() == "ε lower bound (95% confidence)"
    lines = {line.get_label(): line for line in main.get_lines()}
    star = lines["paper (printed value)"]
    assert list(star.get_xdata()) == [4.0] and list(star.get_ydata()) == [1.7]
    styles = {c.get_label().replace("\n", " "): c.lines[0] for c in main.containers}
    dashed = styles["One run (Steinke et al.), best of grid (uncorrected)"]
    assert dashed.get_linestyle() == "--" and dashed.get_alpha() < 1
    solid = styles["One run (Steinke et al.), Bonferroni"]
    assert solid.get_linestyle() == "-" and solid.get_alpha() is None
    colours = {to_hex(line.get_color()) for line in main.get_lines()}
    assert {METHOD_COLORS["one_run"].lower(), METHOD_COLORS["fdp_one_run"].lower()} <= colours
    # the no-noise control: one marker per line, in its style (issue 36, item 12, below)
    assert len(side.containers) == 4
    assert [c.lines[0].get_ydata()[0] for c in side.containers] == [3.0] * 4
    plt.close(fig)


def test_line_figure_labels_markers_controls_and_paper_values():
    import matplotlib.pyplot as plt

    rows = []
    for est, order in (("lidp_wilson1", 1), ("lidp_wilson2", 2)):
        for n in (256, 1024):
            for K in ("1", "sqrt_n"):
                rows.append(
                    {
                        "estimator": est,
                        "method": "lidp",
                        "params": json.dumps(
                            {"interval": "wilson", "order": order, "confidence": 0.9}
                        ),
                        "n": n,
                        "K": K,
                        "epsilon": 0.5,
                        "valid": True,
                        "claimed_epsilon": 2.0,
                    }
                )
    table = pd.DataFrame(rows)
    marks = [{"paper": 0.67, "where": {"n": 1024, "K": "sqrt_n", "estimator": "lidp_wilson2"}}]
    spec = {"kind": "simulate", "x": "n", "series": ["estimator", "K"], "marks": marks}
    fig = draw_table(table, {**spec, "labels": {"K": {"sqrt_n": "LiDP (K = √n)"}}})
    texts = [t.replace("\n", " ") for t in _legend_texts(fig)]
    assert "LiDP, 2nd-order Wilson, LiDP (K = √n)" in texts
    assert "LiDP, 1st-order Wilson, DP baseline (K = 1)" in texts
    assert fig.axes[0].get_ylabel() == "ε lower bound (90% confidence)"
    star = [ln for ln in fig.axes[0].get_lines() if ln.get_label() == "paper (printed value)"]
    assert len(star) == 1 and list(star[0].get_xdata()) == [1024.0]
    plt.close(fig)


def test_library_labels():
    assert estimator_label({"method": "lidp", "interval": "wilson", "order": 2}) == (
        "LiDP, 2nd-order Wilson"
    )
    assert estimator_label({"method": "fdp_one_run", "family": "laplace"}) == (
        "Tight f-DP (Xiang et al.), assumes Laplace"
    )
    assert estimator_label({"method": "one_run", "label": "Mine"}) == "Mine"
    assert value_label("selection", "grid_max_uncorrected") == "best of grid"
    assert value_label("threat_model", "worst_case") == "worst case"
    assert value_label("m", 1000) == "m = 1000"
    assert value_label("target_epsilon", 4.0) == "ε = 4"
    assert value_label("K", "sqrt_n", {"K": {"sqrt_n": "√n"}}) == "√n"
    assert internal_names("lidp_wilson1: sqrt_n") == ["lidp_wilson1", "sqrt_n"]


def test_the_style_file_holds_the_palette():
    text = STYLE.read_text()
    assert all(c.lstrip("#") in text for c in PALETTE)
    assert set(METHOD_COLORS.values()) <= set(PALETTE)


def test_an_estimator_label_in_the_config_reaches_the_figure_not_the_audit():
    config = _test_config()
    raw = yaml.safe_load((ROOT / "config" / "test.yaml").read_text())
    raw["estimators"]["one_run"]["label"] = "Steinke et al., Thm 3.1"
    labelled = validate_config(raw)
    assert estimator_block(labelled, "one_run") == estimator_block(config, "one_run")
    names = pipeline_params.figure_params(labelled, "tiny")["estimator_labels"]
    assert names["one_run"] == "Steinke et al., Thm 3.1"
    raw["estimators"]["one_run"]["label"] = 3
    with pytest.raises(ConfigError, match="label"):
        validate_config(raw)


def test_captions_say_what_which_paper_figure_and_what_to_look_for():
    config = validate_config(yaml.safe_load((ROOT / "config" / "config.yaml").read_text()))
    for name, exp in config["experiments"].items():
        text = caption(exp, name)
        assert "Look for" in text and "Paper:" in text, name
    lidp = caption(config["experiments"]["lidp_gaussian"], "lidp_gaussian")
    assert "Fig. 3 of Pillutla et al." in lidp
    title = pipeline_params.figure_params(config, "lidp_gaussian")["title"]
    assert title == "LiDP Fig. 3 left, reduced"


def test_the_audit_table_gets_display_names_beside_the_ids():
    import pandas as pd

    from dpaudit.plots.labels import add_label_columns, internal_names

    table = pd.DataFrame(
        {
            "estimator": ["one_run", "lidp_wilson2"],
            "selection": ["bonferroni", "heldout"],
            "threat_model": ["white_box_dot", "black_box_loss"],
            "epsilon": [1.0, 2.0],
        }
    )
    out = add_label_columns(table, {"one_run": "One run (Steinke et al.)"})
    assert list(out.columns) == [
        "estimator", "estimator_label", "selection", "selection_label",
        "threat_model", "threat_model_label", "epsilon",
    ]  # fmt: skip
    assert out["estimator_label"][0] == "One run (Steinke et al.)"
    assert out["selection_label"].tolist() == ["Bonferroni", "held-out threshold"]
    assert not internal_names(" ".join(out["threat_model_label"]))
    assert list(out["epsilon"]) == [1.0, 2.0]


def test_an_analysis_table_draws_its_own_se_column_and_reference_line():
    """LiDP Table 1's figure: error bars from the table's ``factor_se`` column and the
    ``reference_no_gain`` line at 1 (an analysis table has one row per point, so the generic
    bars over repeated rows would be none)."""
    import matplotlib.pyplot as plt

    table = pd.DataFrame(
        {
            "order": [2, 4, 2, 4],
            "factor": [1.5, 1.3, 0.4, 0.5],
            "factor_se": [0.2, 0.1, 0.05, float("nan")],
            "label": ["digits linear"] * 2 + ["digits MLP"] * 2,
            "canary": ["poisoning"] * 4,
            "reference_no_gain": [1.0] * 4,
        }
    )
    spec = {"kind": "analysis", "x": "order", "y": "factor", "series": ["label", "canary"]}
    fig = draw_table(table, spec)
    try:
        ax = fig.axes[0]
        bars = [c for c in ax.containers if c.has_yerr]
        assert len(bars) == 2
        segs = np.concatenate([c.lines[2][0].get_segments() for c in bars])
        heights = sorted(round(float(s[1, 1] - s[0, 1]), 6) for s in segs)
        assert heights == [0.0, 0.1, 0.2, 0.4]  # 2 x SE; an undefined SE draws none
        labels = [h.get_label() for h in ax.get_lines()]
        assert "factor 1: no trials saved" in labels
        ref = ax.get_lines()[labels.index("factor 1: no trials saved")]
        assert set(ref.get_ydata()) == {1.0}
        legend_texts = [
            t.get_text() for lg in fig.legends + [ax.get_legend()] if lg for t in lg.texts
        ]
        assert any("factor_se" in t for t in legend_texts)
    finally:
        plt.close(fig)


# ------------------------------------------------------- issue 36, item 12: the figures' defects


def _default_config() -> dict:
    return validate_config(yaml.safe_load((ROOT / "config" / "config.yaml").read_text()))


def _one_run_mlp_table() -> pd.DataFrame:
    """The default config's one_run_mlp audit table on made-up bounds: its three estimator
    blocks (one run and f-DP with abstention, three selection rules each; the attack metrics),
    five target epsilons and the no-noise control."""
    config = _default_config()
    exp = config["experiments"]["one_run_mlp"]
    rows = []
    for est in exp["estimators"]:
        block = config["estimators"][est]
        for sel in block.get("selections") or [""]:
            for target in [*exp["train"]["target_epsilons"], None]:
                claimed = np.inf if target is None else float(target)
                rows.append(
                    {
                        "setting": "nonprivate" if target is None else f"eps{target}",
                        "seed": 0,
                        "estimator": est,
                        "method": block["method"],
                        "params": json.dumps(block),
                        "selection": sel,
                        "claimed_epsilon": claimed,
                        "epsilon": 0.5 if target is None else 0.1 * claimed,
                        "valid": sel != "grid_max_uncorrected" and est != "attack_metrics",
                    }
                )
    return pd.DataFrame(rows)


def _hue(colour: str) -> float:
    import colorsys

    from matplotlib.colors import to_rgb

    return 360 * colorsys.rgb_to_hsv(*to_rgb(colour))[0]


def test_issue36_item12_one_run_mlp_draws_each_estimator_in_a_hue_of_its_own():
    """Issue 36, item 12: one_run_mlp drew six of its seven lines in four similar blues (one
    run in blue, f-DP with abstention in sky blue, one degree of hue apart, each with lighter
    uncorrected lines); the three estimators' hues now lie at least 30 degrees apart."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_hex

    config = _default_config()
    table = _one_run_mlp_table()
    fig = draw_empirical_vs_claimed(table, pipeline_params.figure_params(config, "one_run_mlp"))
    main = fig.axes[0]
    by_estimator: dict[str, set[str]] = {}
    names = pipeline_params.figure_params(config, "one_run_mlp")["estimator_labels"]
    for container in main.containers:
        label = container.get_label().replace("\n", " ")
        est = next(e for e, name in names.items() if label.startswith(name))
        by_estimator.setdefault(est, set()).add(to_hex(container.lines[0].get_color()))
    plt.close(fig)
    assert len(main.containers) == 7
    assert all(len(c) == 1 for c in by_estimator.values()), by_estimator
    hues = sorted(_hue(c.pop()) for c in by_estimator.values())
    gaps = [b - a for a, b in zip(hues, hues[1:], strict=False)] + [360 - hues[-1] + hues[0]]
    assert min(gaps) >= 30, hues


def test_issue36_item12_no_noise_markers_are_named_as_their_legend_entries():
    """Issue 36, item 12: the "no noise" panel of one_run_mlp drew unlabelled markers (small,
    in another style than the lines); each is now its line's marker, colour and size, labelled
    as the legend entry that names it."""
    import matplotlib.pyplot as plt

    config = _default_config()
    fig = draw_empirical_vs_claimed(
        _one_run_mlp_table(), pipeline_params.figure_params(config, "one_run_mlp")
    )
    main, side = fig.axes
    legend = set(_legend_texts(fig))
    lines = {c.get_label(): c.lines[0] for c in main.containers}
    marks = {c.get_label(): c.lines[0] for c in side.containers}
    plt.close(fig)
    assert len(marks) == 7 and set(marks) <= legend
    for label, mark in marks.items():
        line = lines[label]
        assert mark.get_color() == line.get_color() and mark.get_marker() == line.get_marker()
        assert mark.get_markersize() == line.get_markersize()


def test_issue36_item12_titles_end_without_a_stray_full_stop():
    """Issue 36, item 12: one_run_mlp's title ended in the description's full stop."""
    config = _default_config()
    assert pipeline_params.figure_params(config, "one_run_mlp")["title"] == (
        "One-run black-box audit of an MLP trained with DP-SGD on synthetic data"
    )
    for name in config["experiments"]:
        title = pipeline_params.figure_params(config, name)["title"]
        assert not title.endswith(".") or title.endswith(("al.", "Fig.")), (name, title)
    assert short_title("Audits after Steinke et al.") == "Audits after Steinke et al."


def _selection_fig6_table() -> pd.DataFrame:
    rows = []
    for eps_b, eps_uo, eps_u in ((1.0, 1.3, 1.9), (4.0, 5.0, 6.8)):
        for seed in (0, 1):
            rows.append(
                {
                    "setting": f"epsilon_B{eps_b:g}",
                    "seed": seed,
                    "estimator": "multi_run_cp",
                    "method": "multi_run_cp",
                    "params": json.dumps({"confidence": 0.95}),
                    "selection": "heldout",
                    "epsilon_B": eps_b,
                    "claimed_epsilon": eps_uo,
                    "claimed_epsilon_papernot_steinke": eps_u,
                    "claimed_epsilon_exact": eps_uo - 0.2,
                    "epsilon": 0.5 * eps_b,
                    "valid": True,
                }
            )
    return pd.DataFrame(rows)


def test_issue36_item12_selection_fig6_names_each_claim_and_typesets_subscripts(tmp_path):
    """Issue 36, item 12: selection Fig. 6's y label named epsilon_U-O "(grey)" while two grey
    lines shared the name (the legend said "claimed ε" and "... ε_U"), underscores drawn as
    underscores. Now the y label names the audit's bound, the legend names each claim (ε_U-O of
    Algorithm 3, Papernot-Steinke's ε_U), and a written figure typesets every subscript."""
    from dpaudit.plots.lines import plot_table

    config = _default_config()
    spec = pipeline_params.figure_params(config, "selection_fig6_audit")
    fig = draw_table(_selection_fig6_table(), spec)
    texts = [t.replace("\n", " ") for t in _legend_texts(fig)]
    ax = fig.axes[0]
    assert "claim ε_U-O (Algorithm 3, μ_O)" in texts
    assert "claim of the tuned mechanism ε_U (Papernot-Steinke)" in texts
    assert "claimed ε" not in texts
    assert ax.get_ylabel().startswith("audit lower bound ε_L") and "grey" not in ax.get_ylabel()
    import matplotlib.pyplot as plt

    plt.close(fig)
    drawn = draw_table(_selection_fig6_table(), spec)
    plot_table(_selection_fig6_table(), spec, [tmp_path / "fig6.png"])
    from dpaudit.plots.style import typeset_figure

    typeset_figure(drawn)
    from matplotlib.text import Text

    shown = [t.get_text() for t in drawn.findobj(Text) if t.get_text()]
    plt.close(drawn)
    assert not [t for t in shown if "_" in t.replace("_{", "")], shown
    assert any(r"$\varepsilon_{\mathrm{U-O}}$" in t for t in shown)
    assert (tmp_path / "fig6.png").stat().st_size > 1000


def test_issue36_item12_tight_one_run_names_the_paper_and_keeps_accuracy_off_the_epsilon_axis():
    """Issue 36, item 12: tight one run's "ours (f-DP)" meant the paper's method (Xiang et al.),
    and its axis mixed epsilon bounds with the accuracy c/r; the paper's method is named for the
    paper and the accuracy has an axis of its own (the paper's Fig. 12 right axis)."""
    import matplotlib.pyplot as plt

    from dpaudit.analyses import run
    from dpaudit.plots.lines import RIGHT_AXIS_SUFFIX

    config = _default_config()
    spec = pipeline_params.figure_params(config, "tight_fig3_vs_r")
    table = run("tight_one_run_vs_r", {"theta": 1.0, "n": 1000, "rs": [100, 1000]}, {})
    fig = draw_table(table, spec)
    main, right = fig.axes
    texts = [t.replace("\n", " ") for t in _legend_texts(fig)]
    main_labels = [c.get_label() for c in main.containers]
    right_labels = [c.get_label() for c in right.containers]
    plt.close(fig)
    assert "Xiang et al. (f-DP), n=1000" in texts and not [t for t in texts if "ours" in t]
    assert right_labels == ["accuracy c/r" + RIGHT_AXIS_SUFFIX]
    assert not [t for t in main_labels if "accuracy" in t]
    assert "accuracy" not in main.get_ylabel() and "accuracy" in right.get_ylabel()
