"""results/reproduction.{md,csv}: the paper's value, ours, the difference, and whether the
reference value is printed in the paper or our own computation (dpaudit/reproduction.py)."""

from __future__ import annotations

import pandas as pd
import pytest

from dpaudit import reproduction


@pytest.fixture
def table() -> pd.DataFrame:
    return pd.DataFrame(
        {"setting": ["a", "a", "b"], "epsilon": [1.0, 2.0, 5.0], "sigma": [0.9, 0.9, 0.7]}
    )


def test_check_combines_the_selected_rows(table):
    row = reproduction.check(
        table, {"quantity": "q", "paper": 1.4, "where": {"setting": "a"}}, "exp"
    )
    assert row["ours"] == pytest.approx(1.5)
    assert row["difference"] == pytest.approx(0.1)
    assert row["agrees"] is False  # default tolerance 0.01
    assert row["rows"] == 2
    assert row["source"] == "printed"


def test_values_not_printed_in_the_paper_are_marked(table):
    printed = reproduction.check(
        table, {"quantity": "printed", "paper": 5.0, "where": {"setting": "b"}}, "exp"
    )
    ours = reproduction.check(
        table,
        {
            "quantity": "computed",
            "paper": 0.7,
            "column": "sigma",
            "where": {"setting": "b"},
            "source": "ours",
        },
        "exp",
    )
    md = reproduction.to_markdown(pd.DataFrame([printed, ours]))
    lines = {line.split(" | ")[1]: line for line in md.splitlines() if line.startswith("| exp")}
    assert "| 5 |" in lines["printed"] and "5*" not in lines["printed"]
    assert "| 0.7* |" in lines["computed"]
    assert "not printed in the paper" in md


def test_unknown_column_names_the_columns(table):
    with pytest.raises(KeyError, match="columns"):
        reproduction.check(table, {"quantity": "q", "paper": 1, "where": {"nope": 1}}, "exp")


# ---- qualitative claims ------------------------------------------------------------------------


def _claims_table():
    import pandas as pd

    rows = []
    for m, eps in [(10, 0.2), (100, 0.8), (1000, 1.1), (5000, 1.2)]:
        for seed in (0, 1):
            rows.append({"estimator": "one_run", "m": m, "seed": seed, "epsilon": eps})
            rows.append({"estimator": "fdp", "m": m, "seed": seed, "epsilon": eps + 0.1})
    for n, eps in [(0, 1.0), (1000, 0.7), (10000, 0.3)]:
        rows.append({"estimator": "bb", "m": n, "seed": 0, "epsilon": eps})
    return pd.DataFrame(rows)


@pytest.mark.parametrize(
    ("where", "claim", "holds"),
    [
        ({"estimator": "one_run"}, {"test": "increasing", "x": "m", "concave": True}, True),
        ({"estimator": "one_run"}, {"test": "decreasing", "x": "m"}, False),
        ({"estimator": "bb"}, {"test": "decreasing", "x": "m"}, True),
        ({"estimator": "bb"}, {"test": "increasing", "x": "m"}, False),
        ({"estimator": "one_run"}, {"test": "flat", "x": "m"}, False),
        ({"estimator": "one_run", "m": 5000}, {"test": "flat", "x": "seed"}, True),
        ({"estimator": "one_run"}, {"test": "not_monotone", "x": "m"}, False),
        ({"estimator": "fdp"}, {"test": "at_least", "than": {"estimator": "one_run"}}, True),
        ({"estimator": "one_run"}, {"test": "at_least", "than": {"estimator": "fdp"}}, False),
        ({"estimator": "one_run"}, {"test": "at_most", "value": 1.2}, True),
    ],
)
def test_claims_hold_or_not(where, claim, holds):
    row = reproduction.check(
        _claims_table(), {"quantity": "q", "claim": claim, "where": where}, "exp"
    )
    assert row["agrees"] is holds
    assert row["source"] == "claim" and row["measured"]


def test_an_increase_with_growing_increments_is_not_diminishing_returns():
    import pandas as pd

    table = pd.DataFrame({"m": [1, 2, 3], "epsilon": [0.0, 0.1, 0.5]})
    spec = {"quantity": "q", "claim": {"test": "increasing", "x": "m", "concave": True}}
    assert reproduction.check(table, spec, "e")["agrees"] is False
    spec["claim"]["concave"] = False
    assert reproduction.check(table, spec, "e")["agrees"] is True


def test_diminishing_returns_are_slopes_along_x_or_log_x():
    import pandas as pd

    # an uneven grid whose increments grow (0.1, 0.2, 0.3)
    table = pd.DataFrame({"m": [10, 50, 1000, 10000], "epsilon": [0.0, 0.1, 0.3, 0.6]})
    spec = {"quantity": "q", "claim": {"test": "increasing", "x": "m", "concave": True}}
    # per unit of m: 0.1 / 40, 0.2 / 950, 0.3 / 9000, shrinking
    assert reproduction.check(table, spec, "e")["agrees"] is True
    spec["claim"]["logx"] = True  # per decade of m: 0.14, 0.15, 0.3, growing
    row = reproduction.check(table, spec, "e")
    assert row["agrees"] is False and "per factor of m" in row["claim"]
    table["epsilon"] = [0.0, 0.35, 0.6, 0.7]  # per decade: 0.50, 0.19, 0.10
    assert reproduction.check(table, spec, "e")["agrees"] is True
    table["m"] = [0, 50, 1000, 10000]
    with pytest.raises(ValueError, match="logx"):
        reproduction.check(table, spec, "e")


def test_returns_that_eventually_diminish_need_only_the_last_slope_below_an_earlier_one():
    """concave with eventually: true (Steinke et al. 2023, Sec. 4.1: "the impact of the
    additional examples eventually diminishes"): a slow start is allowed, but the last slope
    must fall below the largest earlier one by more than the tolerance."""
    import pandas as pd

    table = pd.DataFrame({"m": [10, 100, 1000, 10000], "epsilon": [0.0, 0.1, 0.6, 0.7]})
    claim = {"test": "increasing", "x": "m", "concave": True, "logx": True}
    spec = {"quantity": "q", "claim": claim, "tolerance": 0.05}
    assert reproduction.check(table, spec, "e")["agrees"] is False  # 0.1 then 0.5: grows
    claim["eventually"] = True  # per decade 0.1, 0.5, 0.1: the last below 0.5
    row = reproduction.check(table, spec, "e")
    assert row["agrees"] is True and "eventually diminish" in row["claim"]
    table["epsilon"] = [0.0, 0.1, 0.3, 0.55]  # 0.1, 0.2, 0.25: never diminishes
    assert reproduction.check(table, spec, "e")["agrees"] is False
    table["epsilon"] = [0.0, 0.3, 0.6, 0.87]  # 0.3, 0.3, 0.27: within the tolerance
    assert reproduction.check(table, spec, "e")["agrees"] is False


def test_claims_get_their_own_section_in_the_markdown():
    import pandas as pd

    table = _claims_table()
    printed = reproduction.check(
        table, {"quantity": "p", "paper": 1.2, "where": {"m": 5000, "estimator": "one_run"}}, "e"
    )
    claim = reproduction.check(
        table,
        {
            "quantity": "c",
            "claim": {"test": "increasing", "x": "m"},
            "where": {"estimator": "one_run"},
        },
        "e",
    )
    md = reproduction.to_markdown(pd.DataFrame([printed, claim]))
    assert "qualitative claims" in md and "epsilon rises with m" in md
    assert "m=10: 0.2, m=100: 0.8" in md


def test_a_claim_on_a_missing_column_names_it():
    with pytest.raises(KeyError, match="'n_train'"):
        reproduction.check(
            _claims_table(), {"quantity": "q", "claim": {"test": "flat", "x": "n_train"}}, "e"
        )


# ---- column against column, row by row; values not comparable ----------------------------------


def _bound_table() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "setup": ["a", "a", "b", "b"],
            "epsilon": [0.5, 1.9, 0.4, 0.6],
            "claimed": [1.0, 1.0, 3.0, 3.0],
        }
    )


@pytest.mark.parametrize(
    ("where", "test", "holds"),
    [
        # the mean of setup a (1.2) is below its claim (1.0)? no: and one row (1.9) exceeds it
        ({"setup": "a"}, "at_most", False),
        ({"setup": "b"}, "at_most", True),
        ({"setup": "b"}, "at_least", False),
        # pooled means 0.85 vs 2.0 would pass a comparison of means; row 2 still fails
        ({}, "at_most", False),
    ],
)
def test_column_than_compares_every_row_with_its_own(where, test, holds):
    spec = {
        "quantity": "bound below the claim",
        "claim": {"test": test, "column_than": "claimed"},
        "where": where,
        "tolerance": 0.0,
    }
    row = reproduction.check(_bound_table(), spec, "e")
    assert row["agrees"] is holds
    assert row["source"] == "claim" and "claimed" in row["claim"]
    n_fail = {("a", "at_most"): 1, ("b", "at_most"): 0, ("b", "at_least"): 2, (None, "at_most"): 1}
    assert f"{n_fail[(where.get('setup'), test)]} of" in row["measured"]


def test_column_than_worst_row_within_the_tolerance_holds():
    spec = {
        "quantity": "q",
        "claim": {"test": "at_most", "column_than": "claimed"},
        "where": {"setup": "a"},
        "tolerance": 0.9,
    }
    row = reproduction.check(_bound_table(), spec, "e")
    assert row["agrees"] is True and row["difference"] == pytest.approx(0.9)


def test_column_than_with_a_missing_value_fails_and_an_unknown_column_is_named():
    table = _bound_table().assign(claimed=[1.0, float("nan"), 3.0, 3.0])
    spec = {"quantity": "q", "claim": {"test": "at_most", "column_than": "claimed"}}
    assert reproduction.check(table, spec, "e")["agrees"] is False
    spec["claim"]["column_than"] = "nope"
    with pytest.raises(KeyError, match="'nope'"):
        reproduction.check(table, spec, "e")


def test_not_comparable_values_are_shown_never_judged(table):
    spec = {"quantity": "q", "paper": 1.5, "where": {"setting": "a"}, "source": "not_comparable"}
    row = reproduction.check(table, spec, "exp")
    assert row["agrees"] is None and row["difference"] == pytest.approx(0.0)
    md = reproduction.to_markdown(pd.DataFrame([row]))
    (line,) = [x for x in md.splitlines() if x.startswith("| exp |")]
    assert "| not comparable |" in line and "| yes |" not in line


def test_schema_takes_column_than_and_not_comparable_and_names_the_key():
    from dpaudit.config import ConfigError, validate_config
    from tests.config.test_config import SCHEMA

    def cfg(check):
        exp = {
            "kind": "analysis",
            "analysis": "one_run_randomized_response",
            "params": {"epsilon": 4.0, "delta": 1.0e-5},
            "reproduce": [check],
        }
        return {"experiments": {"a": exp}}

    column = {"test": "at_most", "column_than": "claimed_epsilon"}
    validate_config(cfg({"quantity": "q", "claim": column}), SCHEMA)
    validate_config(cfg({"quantity": "q", "paper": 1.0, "source": "not_comparable"}), SCHEMA)
    for bad in (
        {"quantity": "q", "claim": {**column, "value": 1.0}},  # one comparison, not two
        {"quantity": "q", "claim": {"test": "at_most", "column_than": 3}},
        {"quantity": "q", "paper": 1.0, "source": "elsewhere"},
    ):
        with pytest.raises(ConfigError, match="reproduce"):
            validate_config(cfg(bad), SCHEMA)


# ---- two configs run one after the other: the reproduction table keeps both ---------------


def _analysis_config(path, name: str, note: str = "") -> None:
    """A config of one closed-form experiment of config/config.yaml with its checks."""
    import yaml

    from tests.workflow.test_pipeline_e2e import REPO

    exp = yaml.safe_load((REPO / "config" / "config.yaml").read_text())["experiments"][name]
    exp.pop("paper_target", None)
    if note:
        exp["reproduce"][0]["note"] = note
    path.write_text(yaml.safe_dump({"experiments": {name: exp}}))


@pytest.mark.slow
def test_two_configs_run_one_after_the_other_keep_both_sections(tmp_path):
    """results/reproduction.md lists every config's experiments, not only the last
    --configfile's (issue 28, item 9); a config rerun with changed checks regenerates its own
    section and keeps the other's."""
    from tests.workflow.test_pipeline_e2e import job_counts, snakemake

    one, two = tmp_path / "fig9.yaml", tmp_path / "table3.yaml"
    _analysis_config(one, "one_run_fig9")
    _analysis_config(two, "selection_table3")
    target = "results/reproduction.md"
    snakemake(tmp_path, target, configfile=one)
    md = (tmp_path / target).read_text()
    assert "## `fig9.yaml`" in md and "One run Fig. 9" in md
    snakemake(tmp_path, target, configfile=two)
    md = (tmp_path / target).read_text()
    # the config just run first, then the other one's section from its file on disk
    assert md.index("## `table3.yaml`") < md.index("## `fig9.yaml`")
    assert "Selection Table 3" in md and "One run Fig. 9" in md
    table = pd.read_csv(tmp_path / "results/reproduction.csv")
    assert list(table["config"]) == ["table3.yaml", "fig9.yaml"]
    assert list(table["experiment"]) == ["selection_table3", "one_run_fig9"]
    # the first config's checks change: its part and the merged table are rebuilt, nothing else
    _analysis_config(one, "one_run_fig9", note="a changed note")
    dry = snakemake(tmp_path, target, "-n", configfile=one)
    assert job_counts(dry.stdout) == {"reproduction_part": 1, "reproduction": 1}
    snakemake(tmp_path, target, configfile=one)
    md = (tmp_path / target).read_text()
    assert "a changed note" in md and "Selection Table 3" in md
    assert md.index("## `fig9.yaml`") < md.index("## `table3.yaml`")


def test_merge_reads_each_part_once_and_names_a_bad_one(tmp_path):
    good = tmp_path / "a" / "reproduction.csv"
    good.parent.mkdir()
    row = {"config": "c.yaml", "experiment": "a", "quantity": "q", "paper": 1.0, "ours": 1.0,
           "difference": 0.0, "agrees": True, "note": "", "source": "printed"}  # fmt: skip
    pd.DataFrame([row]).to_csv(good, index=False)
    table = reproduction.merge_parts([str(good)], [str(good)])
    assert len(table) == 1 and table["note"].iloc[0] == "" and bool(table["agrees"].iloc[0])
    md = reproduction.to_markdown(table)
    assert "## `c.yaml`" in md and "| a | q | 1 | 1 | +0 | yes |  |" in md
    bad = tmp_path / "b" / "reproduction.csv"
    bad.parent.mkdir()
    bad.write_text("x,y\n1,2\n")
    with pytest.raises(ValueError, match=r"b/reproduction.csv: not a reproduction table"):
        reproduction.merge_parts([str(good)], [str(bad)])
