"""What a bound assumes, kept apart from whether it is valid (issue 30, points 1, 6 and 9).

An f-DP test of a one-parameter null family (mu-GDP, Laplace) turned into an (epsilon, delta)
bound holds only for mechanisms whose trade-off curve has the family's shape: on randomized
response (honestly 1-DP) the GDP tests report epsilon 3.6 at 95%. Such rows carry
``assumes`` and decide no verdict or headline unless the score file declares that family; the
defaults run the family-free bounds; ``dpaudit audit --json`` states the joint confidence of
its maximum and prints infinity as "inf".
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from dpaudit import estimators, scores
from dpaudit.audit import audit
from dpaudit.cli import main
from dpaudit.config import ConfigError, load_config_file, validate_config
from dpaudit.mechanisms.one_run_ideal import gaussian_score_file, randomized_response_score_file
from dpaudit.pipeline.params import estimator_block
from dpaudit.pipeline.settings import applicable_estimators
from dpaudit.scores import ScoreFile
from dpaudit.verdict import (
    ASSUMES,
    FLAGGED,
    NO_CLAIM,
    NOT_A_BOUND,
    SMALLER_DELTA,
    add_verdicts,
    usable_for_verdict,
    verdict_table,
)

REPO = Path(__file__).resolve().parents[2]
GDP_TESTS = {
    "fdp_one_run_gdp": {"method": "fdp_one_run", "family": "gdp", "selections": ["bonferroni"]},
    "fdp_abstention_gdp": {
        "method": "fdp_abstention",
        "family": "gdp",
        "selections": ["bonferroni"],
    },
}


def _default_config() -> dict:
    return validate_config(load_config_file(REPO / "config" / "config.yaml"))


# ---- the old behaviour: a GDP row refuting an honest non-Gaussian mechanism ----------------


def test_gdp_rows_on_randomized_response_are_labelled_and_decide_no_verdict():
    """Randomized response at eps = 1 is honestly 1-DP; the GDP tests' valid rows exceed 1
    (so the old verdict flagged it) and now read 'no verdict: assumes a gdp trade-off'."""
    table = add_verdicts(
        audit([randomized_response_score_file(1000, 1.0, 1e-5, seed=0)], GDP_TESTS)
    )
    assert len(table) == 2
    assert table["valid"].all() and (table["epsilon"] > 1.0).all()  # the bounds themselves
    assert (table["assumes"] == "gdp").all()
    assert (table["verdict"] == ASSUMES.format(family="gdp")).all()
    assert (table["exceeds_claim"] == 0).all()
    assert verdict_table(table.assign(impl="rr"), ["impl"]).empty  # no usable row to combine


def test_at_delta_zero_the_infinite_gdp_bound_decides_no_verdict():
    table = add_verdicts(audit([randomized_response_score_file(1000, 1.0, 0.0, seed=0)], GDP_TESTS))
    row = table.set_index("estimator").loc["fdp_one_run_gdp"]
    assert math.isinf(row["epsilon"]) and bool(row["valid"])
    assert row["verdict"] == ASSUMES.format(family="gdp") and row["exceeds_claim"] == 0


def test_a_file_that_declares_the_family_admits_its_rows():
    """The idealised Gaussian mechanism declares ``tradeoff_family: gdp``: there the GDP rows
    decide the verdict (an honest claim: not flagged)."""
    sf = gaussian_score_file(1000, 2.0, 1e-5, seed=0)
    assert sf.meta["tradeoff_family"] == "gdp"
    table = add_verdicts(audit([sf], GDP_TESTS))
    assert (table["tradeoff_family"] == "gdp").all()
    assert (table["verdict"] == "not flagged: no evidence at 1,000 canaries").all()
    # a declared family admits only its own rows
    laplace = {"l": {"method": "fdp_one_run", "family": "laplace", "selections": ["bonferroni"]}}
    assert add_verdicts(audit([sf], laplace))["verdict"].tolist() == [
        ASSUMES.format(family="laplace")
    ]


def test_an_unknown_declared_family_is_an_error_naming_the_file(tmp_path):
    sf = randomized_response_score_file(100, 1.0, seed=0)
    sf.meta["tradeoff_family"] = "gaussian"
    path = scores.write(tmp_path / "odd.npz", sf)
    with pytest.raises(scores.ScoreFileError, match=r"odd\.npz: meta tradeoff_family 'gaussian'"):
        audit([scores.read(path)], {"o": {"method": "one_run"}})


@pytest.mark.parametrize(
    ("method", "family", "delta", "want"),
    [
        ("one_run", None, 1e-5, ""),
        ("multi_run_cp", None, 1e-5, ""),
        ("lidp", None, 1e-5, ""),
        ("attack_metrics", None, 1e-5, ""),
        ("gdp_fit", None, 1e-5, "gdp"),
        ("fdp_one_run", None, 1e-5, "gdp"),  # the schema's default family
        ("fdp_one_run", "laplace", 0.0, "laplace"),
        ("fdp_one_run", "subsampled_gaussian", 1e-5, "subsampled_gaussian"),
        ("fdp_one_run", "approx_dp", 1e-5, "approx_dp_delta>0"),  # Theorem 1, finding 1
        ("fdp_one_run", "approx-dp", 0.0, ""),  # pure DP: no family assumed
        ("fdp_one_run", "approx_dp", None, "approx_dp_delta>0"),  # delta not known yet
        ("fdp_abstention", "approx_dp", 1e-5, ""),  # the recursion holds for every f
        ("fdp_abstention", "gdp", 1e-5, "gdp"),
        ("fdp_abstention", "subsampled_gaussian", 1e-5, "subsampled_gaussian_steps"),
    ],
)
def test_what_each_method_assumes(method, family, delta, want):
    assert estimators.assumes(method, family, delta) == want
    assert want == "" or want in estimators.ASSUMPTIONS


def test_the_approx_dp_rows_of_the_tight_audit_assume_independent_delta_events():
    sf = randomized_response_score_file(400, 1.0, 1e-5, seed=1)
    spec = {"method": "fdp_one_run", "family": "approx_dp", "selections": ["bonferroni"]}
    row = add_verdicts(audit([sf], {"a": spec})).iloc[0]
    assert row["assumes"] == "approx_dp_delta>0"
    assert row["verdict"] == ASSUMES.format(family="approx_dp_delta>0")
    pure = add_verdicts(audit([sf], {"a": {**spec, "delta": 0.0}})).iloc[0]
    assert pure["assumes"] == ""  # pure DP, family-free, but at delta 0 < the claim's 1e-5
    assert pure["verdict"] == SMALLER_DELTA


def test_verdict_rules_on_a_hand_made_table():
    t = pd.DataFrame(
        {
            "claimed_epsilon": [1.0, 1.0, 1.0, np.inf, None, 1.0],
            "epsilon": [2.0, 2.0, 2.0, 5.0, 5.0, 2.0],
            "valid": [True, True, True, True, True, False],
            "assumes": ["", "gdp", "gdp", "", "", "gdp"],
            "tradeoff_family": ["", "", "gdp", "", "", ""],
            "confidence": [0.95] * 6,
        }
    )
    v = add_verdicts(t)
    assert list(v["verdict"]) == [
        FLAGGED,
        ASSUMES.format(family="gdp"),
        FLAGGED,  # the file declares a Gaussian mechanism: its GDP rows may refute the claim
        NO_CLAIM,  # the noise-free control: claimed epsilon inf
        NO_CLAIM,
        NOT_A_BOUND,
    ]
    assert list(usable_for_verdict(t)) == [True, False, True, False, False, False]
    # a CSV reads an empty 'assumes' as NaN: still family-free
    csv = pd.read_csv(pd.io.common.StringIO(t.to_csv(index=False)))
    assert list(add_verdicts(csv)["verdict"]) == list(v["verdict"])


def test_nonprivate_rows_read_no_privacy_claimed():
    """A run without a guarantee (claimed_epsilon null in the file: inf in the table) gets no
    verdict; it read 'consistent with the claim' before."""
    sf = randomized_response_score_file(400, 4.0, 1e-5, seed=0)
    sf.meta["claimed_epsilon"] = None
    table = add_verdicts(audit([sf], {"o": {"method": "one_run", "selections": ["bonferroni"]}}))
    assert math.isinf(table["claimed_epsilon"].iloc[0])
    assert table["verdict"].tolist() == [NO_CLAIM] and NO_CLAIM == "no verdict: no privacy claimed"


# ---- defaults: the family-free bounds ---------------------------------------------------------


def test_default_config_experiments_run_family_free_bounds():
    """Every train experiment of the default config runs only family-free bounds; a simulated
    experiment may add a family's tests only when its mechanism declares that family."""
    config = _default_config()
    declared = {"one_run_gaussian": "gdp"}  # gaussian_score_file's meta tradeoff_family
    checked = 0
    for name, exp in config["experiments"].items():
        if exp["kind"] not in ("train", "simulate"):
            continue
        allowed = {"", declared.get(exp.get("mechanism"), "")}
        for est in applicable_estimators(config, name):
            assert estimators.block_assumes(config["estimators"][est]) in allowed, (name, est)
            checked += 1
    assert checked
    assert gaussian_score_file(10, 2.0, 1e-5, seed=0).meta["tradeoff_family"] == "gdp"


def test_an_experiment_listing_no_estimators_runs_the_family_free_blocks():
    config = copy.deepcopy(load_config_file(REPO / "config" / "config.yaml"))
    config["experiments"] = {
        "e": {"kind": "simulate", "mechanism": "one_run_rr", "params": {"m": 100, "epsilon": 1.0}}
    }
    config = validate_config(config)
    names = applicable_estimators(config, "e")
    assert "one_run" in names and "fdp_abstention_approx_dp" in names
    assert not {"fdp_one_run_gdp", "fdp_abstention_gdp"} & set(names)
    # GDP blocks alone: listing none would run nothing, an error at validation naming the key
    config["estimators"] = {"g": {"method": "fdp_one_run", "family": "gdp"}}
    with pytest.raises(ConfigError, match=r"experiments\.e\.estimators: not given"):
        validate_config(config)


def test_cli_audit_defaults_are_family_free(tmp_path, capsys):
    from dpaudit.commands.audit import default_methods

    # every family-free method runs, none that assumes a family (a new estimator needs no edit)
    defaults = set(default_methods())
    assert {"attack_metrics", "lidp", "multi_run_cp", "one_run"} <= defaults
    assert not {"fdp_one_run", "fdp_abstention", "gdp_fit"} & defaults
    path = scores.write(tmp_path / "rr.npz", randomized_response_score_file(1000, 1.0, seed=0))
    assert main(["audit", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    ran = {r["estimator"] for r in out["rows"]}
    assert ran == {m for m in defaults if "one_run" in estimators.METHODS[m].designs}
    assert {"attack_metrics", "one_run"} <= ran
    assert {r["assumes"] for r in out["rows"]} == {""}
    # with --config: the config's family-free blocks unless named
    config = str(REPO / "config" / "config.yaml")
    assert main(["audit", str(path), "--config", config, "--json"]) == 0
    names = {r["estimator"] for r in json.loads(capsys.readouterr().out)["rows"]}
    assert "one_run" in names and not names & set(GDP_TESTS)
    gdp_only = tmp_path / "gdp.yaml"
    gdp_only.write_text("estimators:\n  g: {method: fdp_one_run, family: gdp}\n")
    assert main(["audit", str(path), "--config", str(gdp_only)]) == 2
    err = capsys.readouterr().err
    assert "every estimator block assumes a trade-off family ({'g': 'gdp'})" in err
    assert main(["audit", str(path), "--config", str(gdp_only), "--estimator", "g"]) == 0


# ---- dpaudit audit --json: the joint confidence of the maximum, infinity as "inf" -----------


def _null_file(seed: int) -> ScoreFile:
    """A mechanism whose true epsilon is 0: scores independent of membership."""
    rng = np.random.default_rng(seed)
    m = 400
    meta = {
        "format_version": scores.FORMAT_VERSION,
        "experiment": "null",
        "setting": "s",
        "seed": seed,
        "design": "one_run",
        "threat_model": "simulation",
        "claimed_epsilon": 0.5,
        "delta": 1e-5,
        "accountant": "given",
    }
    return ScoreFile(
        score=rng.normal(size=(1, m)),
        membership=rng.integers(0, 2, size=(1, m)),
        canary_id=np.arange(m)[None],
        meta=meta,
    )


def test_cli_json_headline_states_the_joint_confidence_of_its_maximum(tmp_path, capsys):
    paths = [str(scores.write(tmp_path / f"n{i}.npz", _null_file(i))) for i in range(8)]
    assert main(["audit", *paths, "--estimator", "one_run", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    usable = [r for r in out["rows"] if r["valid"] and not r["assumes"]]
    assert out["rows_combined"] == len(usable) == 16  # 8 files x (bonferroni, sample_split)
    assert out["epsilon"] == max(r["epsilon"] for r in usable)
    assert out["joint_confidence"] == pytest.approx(max(0.0, 1 - 16 * 0.05))  # vacuous here
    assert main(["audit", paths[0], "--estimator", "one_run", "--json"]) == 0
    one = json.loads(capsys.readouterr().out)
    assert one["rows_combined"] == 2 and one["joint_confidence"] == pytest.approx(0.9)


def test_cli_json_prints_infinity_as_inf_and_no_gdp_headline(tmp_path, capsys):
    path = scores.write(tmp_path / "rr.npz", randomized_response_score_file(1000, 1.0, seed=0))
    argv = ["audit", str(path), "--estimator", "fdp_one_run", "--estimator", "one_run", "--json"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    out = json.loads(text)  # standard JSON: no bare Infinity / NaN
    assert "Infinity" not in text and "NaN" not in text
    gdp = [r for r in out["rows"] if r["estimator"] == "fdp_one_run"]
    assert gdp and all(r["epsilon"] == "inf" and r["assumes"] == "gdp" for r in gdp)
    one_run = [r["epsilon"] for r in out["rows"] if r["estimator"] == "one_run" and r["valid"]]
    assert out["epsilon"] == max(one_run) < 1.0  # not the GDP rows' infinity


def test_json_rows_representation():
    from dpaudit.commands.audit import json_rows

    frame = pd.DataFrame({"a": [np.inf, -np.inf, np.nan, 1.5], "b": np.arange(4, dtype=np.int64)})
    rows = json_rows(frame)
    assert [r["a"] for r in rows] == ["inf", "-inf", None, 1.5]
    assert json.dumps(rows, allow_nan=False)


# ---- Monte Carlo: no default estimator flags an honest non-Gaussian mechanism ---------------

SEEDS = 20


def _subsampled_gaussian_file(seed: int, q: float = 0.5, sigma: float = 1.0, steps: int = 3):
    """A few-step Poisson-subsampled Gaussian mechanism per canary: at each of ``steps`` steps
    an IN canary is sampled with probability q and adds 1 to a N(0, sigma^2) observation; the
    score is the sum of the observations. Claim: the PLD accountant's epsilon (an upper bound)
    at delta 1e-5. Its trade-off curve is not Gaussian (nor Laplace)."""
    from dpaudit.accounting.dpsgd import epsilon_pld

    rng = np.random.default_rng(seed)
    m = 1000
    member = rng.integers(0, 2, size=m)
    sampled = rng.random((steps, m)) < q
    score = (member * sampled + rng.normal(0.0, sigma, size=(steps, m))).sum(axis=0)
    meta = {
        "format_version": scores.FORMAT_VERSION,
        "experiment": "subsampled_gaussian",
        "setting": "s",
        "seed": seed,
        "design": "one_run",
        "threat_model": "simulation",
        "claimed_epsilon": _pld_epsilon(epsilon_pld, sigma, q, steps),
        "delta": 1e-5,
        "accountant": "pld",
    }
    return ScoreFile(
        score=score[None], membership=member[None], canary_id=np.arange(m)[None], meta=meta
    )


_PLD: dict = {}


def _pld_epsilon(epsilon_pld, sigma: float, q: float, steps: int) -> float:
    key = (sigma, q, steps)
    if key not in _PLD:
        _PLD[key] = epsilon_pld(sigma, q, steps, 1e-5)
    return _PLD[key]


def _default_specs() -> dict[str, dict]:
    """The estimators that run by default on a one-run score file: the default config's
    train experiments' lists and ``dpaudit audit``'s default methods."""
    from dpaudit.commands.audit import estimator_specs

    config = _default_config()
    specs = {
        n: estimator_block(config, n) for n in config["experiments"]["one_run_mlp"]["estimators"]
    }
    for name, spec in estimator_specs([], None).items():
        if estimators.get(spec["method"]).designs.count("one_run"):
            specs[f"cli_{name}"] = spec
    return specs


@pytest.mark.slow
@pytest.mark.parametrize(
    "make",
    [
        lambda seed: randomized_response_score_file(1000, 1.0, 1e-5, seed=seed),
        _subsampled_gaussian_file,
    ],
    ids=["randomized_response_eps1", "subsampled_gaussian_3_steps"],
)
def test_no_default_verdict_flags_an_honest_mechanism_beyond_its_level(make):
    specs = _default_specs()
    table = add_verdicts(pd.concat([audit([make(s)], specs) for s in range(SEEDS)]))
    usable = table[usable_for_verdict(table)]
    assert len(usable) >= 2 * SEEDS  # the default valid rows are there to be checked
    for (est, sel), rows in usable.groupby(["estimator", "selection"]):
        alpha = 1.0 - float(rows["confidence"].iloc[0])
        # each row is flagged with probability <= alpha; allow the binomial's 99.9% quantile
        allowed = stats.binom.ppf(0.999, len(rows), alpha)
        assert rows["exceeds_claim"].sum() <= allowed, (est, sel, rows["epsilon"].max())
    # the GDP tests' rows (not defaults) assume a Gaussian curve: they flag nothing either
    gdp = add_verdicts(pd.concat([audit([make(s)], GDP_TESTS) for s in range(3)]))
    assert (gdp["verdict"] != FLAGGED).all()
