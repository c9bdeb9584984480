"""The logic behind the Snakemake rules (``dpaudit.pipeline``): paths declared once, the files
and parameters of each job, as plain functions of a validated config (no Snakemake needed)."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from dpaudit.config import load_schema, validate_config
from dpaudit.pipeline import params, paths, targets

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def config() -> dict:
    """A small config: a simulate grid (2 settings x 2 seeds), a sharded vectorized training,
    an Opacus training and an analysis with a paper target and a reproduce check."""
    cfg = {
        "experiments": {
            "sim": {
                "kind": "simulate",
                "mechanism": "one_run_gaussian",
                "params": {"sigma": 2.0, "delta": 1.0e-5},
                "grid": {"m": [1000, 2000]},
                "seeds": [3, 1],
                "estimators": ["one_run"],
                "figure": {"x": "m"},
                "paper_target": "tiny/sim_fig",
            },
            "vec": {
                "kind": "train",
                "design": "one_run",
                "shards": 2,
                "seeds": [0, 1],
                "dataset": {"name": "synthetic", "n_train": 200, "canary_pool": 100},
                "model": {"name": "logreg"},
                "canaries": {"type": "mislabeled", "m": 50},
                "train": {"target_epsilons": [8], "nonprivate": False, "models_per_shard": 2},
                "estimators": ["one_run"],
            },
            "opa": {
                "kind": "train",
                "seeds": [0],
                "train": {"target_epsilons": [4], "nonprivate": True, "engine": "opacus"},
            },
            "fig9": {
                "kind": "analysis",
                "description": "Fig. 9",
                "analysis": "one_run_randomized_response",
                "params": {"epsilon": 4.0, "delta": 1.0e-5},
                "figure": {"xlabel": "r"},
                "paper_target": "one_run/fig9",
                "reproduce": [{"quantity": "q", "paper": 3.87, "where": {"x": 1}, "column": "y"}],
            },
        },
        "estimators": {"one_run": {"method": "one_run"}},
    }
    validate_config(cfg, load_schema())
    return cfg


# ---- paths -------------------------------------------------------------------------------


def test_path_patterns_are_the_snakemake_patterns():
    assert paths.score_file() == "results/{experiment}/scores/{setting}/seed{seed}.npz"
    assert paths.score_file(shard="{shard}") == (
        "results/{experiment}/scores/{setting}/seed{seed}.shard{shard}.npz"
    )
    assert paths.setting_audit() == "results/{experiment}/audit/{setting}.csv"
    assert paths.audit_table() == "results/{experiment}/audit.csv"
    assert paths.analysis_table() == "results/{experiment}/table.csv"
    assert paths.dataset() == "resources/datasets/{experiment}/{variant}.npz"
    assert paths.figure(ext="png") == "results/{experiment}/figures/figure.png"
    assert paths.paper_target(ext="csv") == "results/{paper}/{figure}.csv"
    assert paths.log("{experiment}", "audit", paths.AUDIT_JOB) == (
        "logs/{experiment}/audit/{setting}.log"
    )
    assert paths.benchmark("simulate", paths.SEED_JOB) == (
        "results/{experiment}/benchmarks/simulate/{setting}/seed{seed}.tsv"
    )


def test_paths_with_values():
    assert paths.score_file("sim", "m1000", 3) == "results/sim/scores/m1000/seed3.npz"
    assert paths.score_file("v", "eps8", 0, 1) == "results/v/scores/eps8/seed0.shard1.npz"
    assert paths.setting_audit("sim", "m1000") == "results/sim/audit/m1000.csv"
    assert paths.figure("t", paths.EPS_FIGURE, "pdf") == (
        "results/t/figures/eps_empirical_vs_claimed.pdf"
    )
    assert paths.reproduction("md") == "results/reproduction.md"


@pytest.mark.parametrize("shard", [None, 2])
def test_score_file_paths_parse_back(shard):
    path = paths.score_file("exp_1", "eps0.5", 12, shard)
    want = {"experiment": "exp_1", "setting": "eps0.5", "seed": "12"}
    want["shard"] = None if shard is None else str(shard)
    assert paths.parse_score_file(path) == want
    assert paths.parse_score_file(f"/some/workdir/{path}") == want


@pytest.mark.parametrize(
    "bad", ["results/x/audit.csv", "results/x/scores/s/seedA.npz", "results/x/scores/seed0.npz"]
)
def test_a_path_that_is_not_a_score_file_is_named(bad):
    with pytest.raises(ValueError, match=re.escape(bad)):
        paths.parse_score_file(bad)


def test_group_by_seed_keeps_order_and_shards():
    files = [paths.score_file("v", "eps8", seed, shard) for seed in (5, 0) for shard in (0, 1)]
    assert paths.group_by_seed(files) == [files[:2], files[2:]]
    one = [paths.score_file("s", "m1", seed) for seed in (2, 10, 1)]
    assert paths.group_by_seed(one) == [[p] for p in one]


def test_group_by_seed_refuses_two_settings():
    files = [paths.score_file("s", "m1", 0), paths.score_file("s", "m2", 1)]
    with pytest.raises(ValueError, match="more than one setting"):
        paths.group_by_seed(files)


def test_rules_declare_no_path_literals():
    """Every output, log and benchmark path of the rules comes from dpaudit.pipeline.paths."""
    literal = re.compile(r"""["'](?:results|logs|resources)/""")
    offenders = []
    for path in sorted([REPO / "Snakefile", *REPO.glob("rules/*.smk")]):
        found = [
            n for n, line in enumerate(path.read_text().splitlines(), 1) if literal.search(line)
        ]
        if found:
            offenders.append(f"{path.relative_to(REPO)}: lines {found}")
    assert not offenders, offenders


# ---- targets -----------------------------------------------------------------------------


def test_kind_pattern(config):
    assert targets.kind_pattern(config, "simulate") == "sim"
    assert targets.kind_pattern(config, "train", "simulate") == "sim|vec|opa"
    empty = targets.kind_pattern({"experiments": {}}, "train")
    assert re.fullmatch(empty, "anything") is None and re.fullmatch(empty, "") is None


def test_score_files_of_a_setting_seed_by_seed(config):
    assert targets.setting_score_files(config, "sim", "m1000") == [
        "results/sim/scores/m1000/seed3.npz",
        "results/sim/scores/m1000/seed1.npz",
    ]
    assert targets.setting_score_files(config, "vec", "eps8") == [
        "results/vec/scores/eps8/seed0.shard0.npz",
        "results/vec/scores/eps8/seed0.shard1.npz",
        "results/vec/scores/eps8/seed1.shard0.npz",
        "results/vec/scores/eps8/seed1.shard1.npz",
    ]


@pytest.mark.parametrize(("experiment", "setting"), [("sim", "m2000"), ("vec", "eps8")])
def test_the_audit_script_recovers_the_seed_groups(config, experiment, setting):
    """The audit job's input, grouped from its paths, is the list of files of each seed."""
    seeds = config["experiments"][experiment]["seeds"]
    want = [targets.seed_score_files(config, experiment, setting, seed) for seed in seeds]
    got = paths.group_by_seed(targets.setting_score_files(config, experiment, setting))
    assert got == want


def test_audit_files(config):
    assert targets.audit_files(config, "sim") == [
        "results/sim/audit/m1000.csv",
        "results/sim/audit/m2000.csv",
    ]


def test_tables_and_figures_by_kind(config):
    assert targets.main_table(config, "fig9") == "results/fig9/table.csv"
    assert targets.main_table(config, "sim") == "results/sim/audit.csv"
    assert targets.figure_files(config, "opa")["png"] == (
        "results/opa/figures/eps_empirical_vs_claimed.png"
    )
    assert targets.figure_files(config, "sim")["pdf"] == "results/sim/figures/figure.pdf"


def test_paper_targets(config):
    assert targets.target_pattern(config, 0) == "one_run|tiny"
    assert targets.target_pattern(config, 1) == "fig9|sim_fig"
    assert targets.paper_target_inputs(config, "tiny", "sim_fig") == {
        "pdf": "results/sim/figures/figure.pdf",
        "png": "results/sim/figures/figure.png",
        "table": "results/sim/audit.csv",
    }
    with pytest.raises(ValueError, match=r"no experiment publishes 'tiny/fig9'; allowed: \["):
        targets.paper_target_inputs(config, "tiny", "fig9")


def test_reproduction_inputs_and_params(config):
    # the merged table reads each reproduced experiment's checks, which read its table
    assert targets.reproduction_inputs(config) == ["results/fig9/reproduction.csv"]
    assert targets.reproduced_pattern(config) == "fig9"
    got = params.reproduction_part_params(config, "fig9", "config/x.yaml")
    assert got == {
        "checks": config["experiments"]["fig9"]["reproduce"],
        "config": "config/x.yaml",
        "table": "results/fig9/table.csv",
    }
    assert list(got) == ["checks", "config", "table"]  # canonical: keys sorted


def test_the_config_label_names_files_relative_to_the_working_directory(tmp_path):
    inside = tmp_path / "config" / "cpu" / "a.yaml"
    label = params.config_label([str(inside), str(inside), "/elsewhere/b.yaml"], str(tmp_path))
    assert label == "config/cpu/a.yaml, b.yaml"


def test_all_targets(config):
    assert targets.all_targets(config) == [
        *(f"results/sim/scores/{s}/seed{seed}.npz" for s in ("m1000", "m2000") for seed in (3, 1)),
        "results/sim/audit.csv",
        "results/sim/figures/figure.pdf",
        "results/sim/figures/figure.png",
        "results/sim/figures/roc.pdf",
        "results/sim/figures/roc.png",
        *(f"results/vec/scores/eps8/seed{seed}.shard{k}.npz" for seed in (0, 1) for k in (0, 1)),
        "results/vec/audit.csv",
        "results/vec/figures/eps_empirical_vs_claimed.pdf",
        "results/vec/figures/eps_empirical_vs_claimed.png",
        "results/vec/figures/roc.pdf",
        "results/vec/figures/roc.png",
        "results/opa/scores/eps4/seed0.shard0.npz",
        "results/opa/scores/nonprivate/seed0.shard0.npz",
        "results/opa/audit.csv",
        "results/opa/figures/eps_empirical_vs_claimed.pdf",
        "results/opa/figures/eps_empirical_vs_claimed.png",
        "results/opa/figures/roc.pdf",
        "results/opa/figures/roc.png",
        "results/fig9/table.csv",
        "results/fig9/figures/figure.pdf",
        "results/fig9/figures/figure.png",
        "results/tiny/sim_fig.pdf",
        "results/tiny/sim_fig.png",
        "results/tiny/sim_fig.csv",
        "results/one_run/fig9.pdf",
        "results/one_run/fig9.png",
        "results/one_run/fig9.csv",
        "results/reproduction.md",
        "results/reproduction.csv",
    ]


def test_issue37_an_entry_point_experiment_targets_its_conformance_table(config):
    """issue 37, Done when: the report shows the conformance table beside the bounds: an
    experiment trained by train.entry_point (train block, grid or points) targets its
    conformance table, beside its audit table; no other experiment does."""
    assert targets.entry_point_experiments(config) == []
    assert not [t for t in targets.all_targets(config) if "conformance" in t]
    for where in ("train", "grid", "points"):
        cfg = copy.deepcopy(config)
        exp = cfg["experiments"]["opa"]
        spec = "my_module:train"
        if where == "train":
            exp["train"]["entry_point"] = spec
        elif where == "grid":
            exp.setdefault("grid", {})["train.entry_point"] = [spec]
        else:
            exp["points"] = [{"train.entry_point": spec}]
        assert targets.entry_point_experiments(cfg) == ["opa"]
        assert targets.entry_point_pattern(cfg) == "opa"
        got = targets.all_targets(cfg)
        assert paths.conformance_table("opa") == "results/opa/conformance.csv" in got


def test_no_reproduction_target_without_checks(config):
    del config["experiments"]["fig9"]
    assert not [t for t in targets.all_targets(config) if "reproduction" in t]


def test_run_targets():
    dag = SimpleNamespace(targetfiles={"b.csv", "a.csv"}, targetrules=[SimpleNamespace(name="x")])
    assert targets.run_targets(dag) == ["a.csv", "b.csv", "x"]
    assert targets.run_targets(SimpleNamespace(targetfiles=None, targetrules=[])) == ["all"]


# ---- params ------------------------------------------------------------------------------


def test_simulate_params_of_one_setting(config):
    assert params.simulate_params(config, "sim", "m2000") == {
        "mechanism": "one_run_gaussian",
        "params": {"delta": 1.0e-5, "m": 2000, "sigma": 2.0},
    }


def test_train_params_are_the_run_spec_of_one_setting(config):
    """What a training job gets: the setting's target epsilon (None without noise) and the
    train block without the keys that choose settings."""
    spec = params.train_params(config, "opa", "eps4")
    assert spec["target_epsilon"] == 4
    assert params.train_params(config, "opa", "nonprivate")["target_epsilon"] is None
    assert spec["train"]["engine"] == "opacus"
    assert not {"target_epsilons", "nonprivate"} & set(spec["train"])
    assert set(spec) == {"design", "threat_model", "model", "canaries", "train", "target_epsilon"}
    with pytest.raises(ValueError, match=r"'opa' has no setting 'eps5'"):
        params.train_params(config, "opa", "eps5")


def test_an_unknown_setting_names_experiment_and_allowed(config):
    with pytest.raises(
        ValueError, match=r"'sim' has no setting 'm3'; allowed: \['m1000', 'm2000'\]"
    ):
        params.simulate_params(config, "sim", "m3")


def test_params_do_not_depend_on_key_order(config):
    exp = config["experiments"]["fig9"]
    before = (params.analysis_params(config, "fig9"), params.figure_params(config, "fig9"))
    exp["params"] = dict(reversed(list(exp["params"].items())))
    exp["figure"] = dict(reversed(list(exp["figure"].items())))
    after = (params.analysis_params(config, "fig9"), params.figure_params(config, "fig9"))
    assert [list(p) for p in before] == [list(p) for p in after]
    assert before == after
    assert params.figure_params(config, "fig9")["title"] == "Fig. 9"
    assert params.description(config, "sim") == ""


def test_setting_table_and_dataset(config):
    assert params.setting_table(config, "sim") == {"m1000": {"m": 1000}, "m2000": {"m": 2000}}
    assert params.setting_table(config, "opa") == {
        "eps4": {"target_epsilon": 4.0},
        "nonprivate": {"target_epsilon": None},
    }
    assert params.dataset_params(config, "vec", "base")["n_train"] == 200
    assert targets.train_dataset(config, "vec", "eps8") == "resources/datasets/vec/base.npz"


# ---- train grids -----------------------------------------------------------------------------


def _grid_config(**extra) -> dict:
    cfg = {
        "experiments": {
            "g": {
                "kind": "train",
                "design": "one_run",
                "threat_model": "white_box_dot",
                "dataset": {"name": "synthetic", "n_train": 400},
                "model": {"name": "mlp", "hidden": [8]},
                "canaries": {"type": "dirac", "m": 100},
                "train": {"target_epsilons": [2, 8], "nonprivate": True, "steps": 10},
                "grid": {"canaries.m": [10, 100], "dataset.n_train": [200, 400]},
                "estimators": ["one_run"],
                **extra,
            }
        },
        "estimators": {"one_run": {"method": "one_run"}},
    }
    validate_config(cfg, load_schema())
    return cfg


def test_a_train_grid_makes_one_setting_per_point_and_epsilon():
    from dpaudit.pipeline.settings import experiment_settings

    cfg = _grid_config()
    settings = experiment_settings(cfg["experiments"]["g"])
    assert len(settings) == 2 * 2 * 3
    assert settings["m10_n_train200_eps2"] == 2.0
    assert settings["m100_n_train400_nonprivate"] is None
    spec = params.train_params(cfg, "g", "m10_n_train400_eps8")
    assert spec["canaries"]["m"] == 10 and spec["target_epsilon"] == 8.0
    assert "grid" not in spec and "points" not in spec
    # the dataset is prepared once per value of the dataset keys, shared by the other keys
    assert targets.train_dataset(cfg, "g", "m10_n_train200_eps2") == (
        "resources/datasets/g/n_train200.npz"
    )
    assert targets.train_dataset(cfg, "g", "m100_n_train200_nonprivate") == (
        "resources/datasets/g/n_train200.npz"
    )
    assert params.dataset_params(cfg, "g", "n_train400")["n_train"] == 400
    table = params.setting_table(cfg, "g")
    assert table["m100_n_train200_eps8"] == {"m": 100, "n_train": 200, "target_epsilon": 8.0}


def test_train_points_vary_together_and_combine_with_the_grid():
    cfg = _grid_config(
        grid={"canaries.m": [10, 20]},
        points=[
            {"train.steps": 1, "train.noise_multiplier": 0.5},
            {"train.steps": 10, "train.noise_multiplier": 1.5},
        ],
    )
    spec = params.train_params(cfg, "g", "steps10_noise_multiplier1.5_m20_eps2")
    assert spec["train"]["steps"] == 10 and spec["train"]["noise_multiplier"] == 1.5
    assert spec["canaries"]["m"] == 20
    assert len(params.setting_table(cfg, "g")) == 2 * 2 * 3


@pytest.mark.parametrize(
    ("grid", "message"),
    [
        ({"train.target_epsilons": [[1]]}, "grid.train.target_epsilons: the target epsilons"),
        ({"canaries.mm": [1]}, "canaries.*mm"),
        ({"canaries.m": [0]}, "canaries.m"),
        ({"dataset.seed": [0, 1]}, "column 'seed'"),
        ({"model.hidden": [[4]], "train.hidden": [1]}, "hidden"),
        ({"canaries.type": ["dirac", "mislabeled"]}, "canary_pool.*grid point 'typemislabeled'"),
        ({"nothing.m": [1]}, "grid"),
    ],
)
def test_bad_train_grids_are_config_errors_naming_the_key(grid, message):
    from dpaudit.config import ConfigError

    with pytest.raises(ConfigError, match=message):
        _grid_config(grid=grid)


def test_a_train_experiment_with_figure_x_gets_the_line_figure_and_publishes_it():
    cfg = _grid_config(figure={"x": "m"}, paper_target="p/fig")
    assert targets.figure_name(cfg, "g") == paths.FIGURE
    assert re.fullmatch(targets.line_figure_pattern(cfg), "g")
    assert targets.paper_target_inputs(cfg, "p", "fig")["pdf"] == "results/g/figures/figure.pdf"
    everything = targets.all_targets(cfg)
    assert "results/g/figures/figure.png" in everything
    assert "results/g/figures/eps_empirical_vs_claimed.png" in everything  # still drawn
    plain = _grid_config()
    assert targets.figure_name(plain, "g") == paths.EPS_FIGURE
    assert not re.fullmatch(targets.line_figure_pattern(plain), "g")


def test_figure_where_selects_rows_and_names_a_missing_column():
    import pandas as pd

    from dpaudit.plots.lines import select_rows

    table = pd.DataFrame({"selection": ["a", "b", "c"], "m": [1, 2, 3]})
    assert list(select_rows(table, {"selection": ["a", "c"]})["m"]) == [1, 3]
    assert list(select_rows(table, {"m": 2})["selection"]) == ["b"]
    with pytest.raises(ValueError, match="no column 'k'"):
        select_rows(table, {"k": 1})


def test_models_per_seed_counts_every_job_of_a_seed():
    """shards x train.models_per_shard; the Opacus engine trains one model per job (the LiDP
    trials and the trade-off runs the config check allows are counted from it)."""
    from dpaudit.pipeline.settings import models_per_seed

    vectorised = {"shards": 3, "train": {"engine": "auto", "models_per_shard": 4}}
    assert models_per_seed(vectorised) == 12
    opacus = {"shards": 1, "train": {"engine": "opacus", "models_per_shard": 16}}
    assert models_per_seed(opacus) == 1


def _yaml_order_names(block: dict) -> set[str]:
    """The grid point (train) or setting (simulate) names as b656a52 made them: the keys in
    the order of the config file (a point's, then the grid's)."""
    import itertools

    from dpaudit.pipeline.settings import setting_text

    grid = block.get("grid") or {}
    names = set()
    for point in block.get("points") or [{}]:
        for values in itertools.product(*grid.values()):
            merged = {**point, **dict(zip(grid, values, strict=True))}
            parts = [f"{k.rsplit('.', 1)[-1]}{setting_text(v)}" for k, v in merged.items()]
            names.add("_".join(parts))
    return names


def _reversed_keys(block: dict) -> dict:
    """``block`` with the keys of its grid and of each point in the reverse order."""
    out = dict(block)
    if block.get("grid"):
        out["grid"] = dict(reversed(list(block["grid"].items())))
    if block.get("points"):
        out["points"] = [dict(reversed(list(p.items()))) for p in block["points"]]
    return out


SHIPPED = sorted(
    p
    for d in ("", "cpu", "paper")
    for p in (REPO / "config" / d).glob("*.yaml")
    if p.name != "schema.yaml"
)


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(REPO)))
def test_issue36_item7_setting_names_do_not_depend_on_the_order_of_keys(path):
    """Issue 36, item 7: ``grid: {n, K}`` named ``n1024_K1`` and ``grid: {K, n}`` ``K1_n1024``,
    so a reordered YAML (or the key-sorted config the report was built from) named other files.
    The canonical order keeps every shipped config's names (and dataset variants) as they were."""
    import yaml

    from dpaudit.pipeline.settings import data_variants, experiment_settings, train_points

    config = yaml.safe_load(path.read_text())
    validate_config(config, load_schema(), cross_checks=False)
    blocks = {
        name: block
        for name, block in (config.get("experiments") or {}).items()
        if block["kind"] in ("train", "simulate")
    }
    for name, block in blocks.items():
        before = _yaml_order_names(block)
        if block["kind"] == "train":
            assert set(train_points(block)) == before, name
        else:  # a simulate experiment without grid or points is one setting, "base"
            assert set(experiment_settings(block)) == {n or "base" for n in before}, name
        reordered = _reversed_keys(block)
        settings = experiment_settings(block)
        assert list(experiment_settings(reordered).items()) == list(settings.items()), name
        if block["kind"] == "train":
            assert data_variants(reordered) == data_variants(block), name
