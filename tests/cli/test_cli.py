"""The dpaudit command line."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from dpaudit.cli import main
from dpaudit.estimators import METHODS


def test_one_run_bound_json(capsys):
    code = main(
        [
            "one-run-bound",
            "--m",
            "100000",
            "--r",
            "1510",
            "--correct",
            "1439",
            "--delta",
            "1e-5",
            "--json",
        ]
    )
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["epsilon"] == pytest.approx(2.6759, abs=1e-3)  # Steinke et al. Fig. 10


def test_one_run_bound_text_and_errors(capsys):
    assert (
        main(["one-run-bound", "--m", "100", "--r", "100", "--correct", "100", "--delta", "0"]) == 0
    )
    assert "epsilon >= 3.49" in capsys.readouterr().out
    assert main(["one-run-bound", "--m", "10", "--r", "100", "--correct", "5", "--delta", "0"]) == 2
    assert "r <= m" in capsys.readouterr().err


def test_console_script_module_entry():
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "dpaudit.cli",
            "one-run-bound",
            "--m",
            "1000",
            "--r",
            "1000",
            "--correct",
            "1000",
            "--delta",
            "1e-5",
            "--json",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(out.stdout)["epsilon"] == pytest.approx(5.78, abs=0.01)


def test_audit_command_on_score_files(tmp_path, capsys):
    from dpaudit import scores
    from dpaudit.mechanisms.one_run_ideal import randomized_response_score_file

    path = tmp_path / "rr.npz"
    scores.write(path, randomized_response_score_file(2000, 3.0, 1e-6, seed=0))
    assert main(["audit", str(path), "--estimator", "one_run", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    valid = [r for r in out["rows"] if r["valid"]]
    assert out["epsilon"] == max(r["epsilon"] for r in valid)
    assert 1.0 < out["epsilon"] < 3.0  # eps=3 randomized response: a bound below the truth
    assert main(["audit", str(path)]) == 0
    assert "bonferroni" in capsys.readouterr().out
    assert main(["audit", str(path), "--estimator", "nope"]) == 2
    assert "allowed" in capsys.readouterr().err
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"")
    assert main(["audit", str(bad)]) == 2
    assert "bad.npz: the file is empty" in capsys.readouterr().err


@pytest.mark.parametrize("n_in", [1000, 990, 900])
def test_issue36_item1_audit_gives_no_valid_bound_when_membership_is_not_a_fair_coin(
    tmp_path, capsys, n_in
):
    """Issue 36, item 1: pure N(0, 1) scores with 1000 / 990 / 900 of 1000 IN (b656a52:
    ``one_run bonferroni 3.69 valid`` at 990) give no valid bound above 0.3 from the one-run
    estimators, in the text table (with ``membership_pvalue`` and the note) and in ``--json``
    (headline and rows); the default run stops on attack_metrics' error where no canary is OUT."""
    import numpy as np

    from dpaudit import scores
    from dpaudit.attach import make_score_file

    rng = np.random.default_rng(n_in)
    member = np.zeros(1000, dtype=np.int8)
    member[rng.permutation(1000)[:n_in]] = 1
    path = tmp_path / "noise.npz"
    scores.write(path, make_score_file(rng.standard_normal(1000), member, 1.0, delta=1e-5))
    methods = ("one_run", "fdp_one_run", "fdp_abstention")
    chosen = [arg for method in methods for arg in ("--estimator", method)]
    assert main(["audit", str(path), *chosen, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["epsilon"] <= 0.3 and out["rows_combined"] == 0
    assert not any(r["valid"] and r["epsilon"] > 0.3 for r in out["rows"])
    assert all(r["membership_pvalue"] < 1e-3 for r in out["rows"])
    assert main(["audit", str(path), *chosen]) == 0
    text = capsys.readouterr().out
    assert "membership_pvalue" in text.splitlines()[0]
    assert f"no verdict: membership is not a fair coin ({n_in} of 1000 IN)" in text
    assert " True " not in text  # no row valid
    if n_in == 1000:
        assert main(["audit", str(path)]) == 2
        assert "got 1000 IN and 0 OUT" in capsys.readouterr().err


def _one_line_error(capsys, command: str) -> str:
    """The stderr of a failed command: one line starting 'dpaudit <command>: error: '."""
    err = capsys.readouterr().err
    assert err.startswith(f"dpaudit {command}: error: "), err
    assert "Traceback" not in err and err.count("\n") == 1, err
    return err


@pytest.fixture
def rr_file(tmp_path):
    from dpaudit import scores
    from dpaudit.mechanisms.one_run_ideal import randomized_response_score_file

    return scores.write(tmp_path / "rr.npz", randomized_response_score_file(200, 2.0, 1e-6, seed=0))


def test_audit_config_yaml_errors_name_the_file_and_line(tmp_path, rr_file, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("estimators:\n  one_run: {method: one_run\n")
    assert main(["audit", str(rr_file), "--config", str(bad)]) == 2
    err = _one_line_error(capsys, "audit")
    assert "bad.yaml: not valid YAML (line 3, column 1: " in err
    listing = tmp_path / "list.yaml"
    listing.write_text("- a\n- b\n")
    assert main(["audit", str(rr_file), "--config", str(listing)]) == 2
    assert "list.yaml: a config must be a mapping of keys, got list" in _one_line_error(
        capsys, "audit"
    )
    assert main(["audit", str(rr_file), "--config", str(tmp_path / "gone.yaml")]) == 2
    assert "gone.yaml: No such file or directory" in _one_line_error(capsys, "audit")


def test_issue36_item3_audit_config_imports_nothing_the_config_names(
    tmp_path, rr_file, capsys, monkeypatch
):
    """Issue 36, item 3: ``dpaudit audit --config`` imported the modules of the config's
    ``train.entry_point`` (a module in the working directory ran on audit); it reads the
    estimator blocks only, and still checks them."""
    marker = tmp_path / "imported.txt"
    (tmp_path / "dpaudit_evil_train.py").write_text(
        f"open({str(marker)!r}, 'w').write('ran')\nraise RuntimeError('ran at import')\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    own = {
        "kind": "train",
        "design": "one_run",
        "threat_model": "per_step_dot",
        "canaries": {"type": "dirac", "m": 20},
        "train": {"target_epsilons": [1], "entry_point": "dpaudit_evil_train:train"},
    }
    config = {
        "experiments": {"own": own},
        "estimators": {"one_run": {"method": "one_run", "selections": ["bonferroni"]}},
    }
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(json.dumps(config))
    assert main(["audit", str(rr_file), "--config", str(cfg), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"][0]["estimator"] == "one_run"
    assert not marker.exists() and "dpaudit_evil_train" not in sys.modules
    config["estimators"]["one_run"]["selections"] = ["fixed"]  # cross-key: needs `fixed`
    cfg.write_text(json.dumps(config))
    assert main(["audit", str(rr_file), "--config", str(cfg)]) == 2
    assert "cfg.yaml: " in _one_line_error(capsys, "audit") and not marker.exists()


def test_train_shard_yaml_error_names_the_file(tmp_path, capsys):
    run = tmp_path / "run.yaml"
    run.write_text("design: one_run\ntrain: {steps: 3\n")
    code = main(["train-shard", "--run", str(run), "--data", "synthetic", "--out",
                 str(tmp_path / "s.npz")])
    assert code == 2
    assert "run.yaml: not valid YAML (line 3, column 1: " in _one_line_error(capsys, "train-shard")
    assert not (tmp_path / "s.npz").exists()


def test_train_shard_duplicate_key_names_the_file_and_both_lines(tmp_path, capsys):
    # YAML keeps the last of two equal keys: the run file's first `steps` would vanish silently
    run = tmp_path / "run.yaml"
    run.write_text("design: one_run\ntrain:\n  steps: 3\n  steps: 5\n")
    code = main(["train-shard", "--run", str(run), "--data", "synthetic", "--out",
                 str(tmp_path / "s.npz")])
    assert code == 2
    err = _one_line_error(capsys, "train-shard")
    assert "run.yaml: duplicate key(s) train.steps (lines 3 and 4)" in err
    assert not (tmp_path / "s.npz").exists()


def test_bad_zip_and_unreadable_files_give_one_line(tmp_path, rr_file, capsys):
    raw = rr_file.read_bytes()
    cut = tmp_path / "cut.npz"
    cut.write_bytes(raw[: len(raw) // 2])
    assert main(["audit", str(cut)]) == 2
    assert "cut.npz: not a score file (not a zip archive" in _one_line_error(capsys, "audit")
    # a zip whose member is damaged (CRC mismatch): zipfile.BadZipFile inside np.load
    crc = tmp_path / "crc.npz"
    data = bytearray(raw)
    start = data.index(b"membership.npy")
    data[start + 200] ^= 0xFF  # inside the deflated membership array
    crc.write_bytes(bytes(data))
    assert main(["audit", str(crc)]) == 2
    assert "crc.npz: " in _one_line_error(capsys, "audit")
    # a truncated prepared data set given to train-shard: one line, no traceback
    run = tmp_path / "run.yaml"
    run.write_text("design: one_run\n")
    data_file = tmp_path / "data.npz"
    data_file.write_bytes(raw[: len(raw) - 30])
    code = main(["train-shard", "--run", str(run), "--data", str(data_file), "--out",
                 str(tmp_path / "s.npz")])
    assert code == 2
    assert "data.npz: " in _one_line_error(capsys, "train-shard")


def test_os_errors_name_the_file(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    code = main(["bgm-simulate", "--runs", "2", "--steps", "2", "--sigma", "1", "--out",
                 str(blocker / "sub" / "x.npz")])
    assert code == 2
    # the output it could not write, and why (issue 36, item 9)
    message = _one_line_error(capsys, "bgm-simulate")
    assert f"cannot write {blocker / 'sub' / 'x.npz'} (Not a directory: '{blocker / 'sub'}')" in (
        message
    )


def test_a_bug_shows_its_traceback(monkeypatch, capsys):
    from dpaudit.commands import one_run_bound

    def broken(args):
        raise TypeError("a genuine bug")

    monkeypatch.setattr(one_run_bound, "run", broken)
    code = main(["one-run-bound", "--m", "10", "--r", "1", "--correct", "1", "--delta", "0"])
    assert code == 1
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "in broken" in err
    assert "dpaudit one-run-bound: internal error" in err and "TypeError: a genuine bug" in err


def test_estimator_that_does_not_apply_is_an_error(tmp_path, rr_file, capsys):
    assert main(["audit", str(rr_file), "--estimator", "lidp"]) == 2
    err = _one_line_error(capsys, "audit")
    assert "rr.npz: estimator 'lidp' (method 'lidp', for design(s) ['lidp']) does not apply" in err
    # the registry's one-run methods (a new one-run estimator needs no edit here)
    methods = sorted(name for name, m in METHODS.items() if "one_run" in m.designs)
    assert {"attack_metrics", "fdp_abstention", "fdp_one_run", "one_run"} <= set(methods)
    assert f"design 'one_run'; methods for 'one_run': {methods}" in err
    config = tmp_path / "c.yaml"
    config.write_text("estimators:\n  mine: {method: lidp}\n")
    assert main(["audit", str(rr_file), "--config", str(config)]) == 2
    err = _one_line_error(capsys, "audit")
    assert "rr.npz: none of the estimators ['mine'] applies to this file's design 'one_run'" in err


def test_option_values_are_checked(rr_file, capsys):
    code = main(["fdp-one-run-bound", "--n", "100", "--r", "10", "--wrong", "2", "--family",
                 "gdp", "--q", "5"])
    assert code == 2
    assert "--q applies to --family subsampled-gaussian only" in _one_line_error(
        capsys, "fdp-one-run-bound"
    )
    assert main(["lidp-bound", str(rr_file), "--threshold", "abc"]) == 2
    err = _one_line_error(capsys, "lidp-bound")
    assert "--threshold must be 'heldout', 'in_sample' or a number, got 'abc'" in err


@pytest.mark.parametrize(
    ("command", "estimator", "joint"),
    [("one-run-bound", "one_run", False), ("multi-run-bound", "multi_run_cp", True)],
)
def test_count_bound_commands_share_the_claim_options(command, estimator, joint, capsys):
    """--delta (required), --confidence (the schema's default) and --json come from one helper
    (dpaudit.commands.add_claim_arguments) in every count-based bound command."""
    import argparse

    from dpaudit.commands import add_claim_arguments
    from dpaudit.defaults import estimator_defaults

    own = argparse.ArgumentParser()
    add_claim_arguments(own, estimator, joint=joint)
    got = own.parse_args(["--delta", "1e-5", "--json"])
    default = estimator_defaults(estimator)["confidence"]
    assert (got.delta, got.confidence, got.json) == (1e-5, default, True)
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert f"default: {default} (the config schema's)" in text
    assert ("joint; default" in text) is joint
    assert "--json" in text and "delta of the audited claim" in text
    with pytest.raises(SystemExit):
        main([command, "--confidence", "0.9"])  # --delta is required
    assert "--delta" in capsys.readouterr().err


def test_issue36_item5_json_headline_of_a_file_without_a_claim_is_its_largest_valid_bound(
    tmp_path, capsys
):
    """Issue 36, item 5: ``--help`` promises the largest valid bound as the ``--json``
    headline; on a file without a claim (``claimed_epsilon`` null) it said 0.0 while the table
    showed valid bounds above 1."""
    from dpaudit import scores
    from dpaudit.mechanisms.one_run_ideal import randomized_response_score_file

    sf = randomized_response_score_file(2000, 3.0, 1e-6, seed=0)
    sf.meta["claimed_epsilon"] = None
    path = scores.write(tmp_path / "noclaim.npz", sf)
    assert main(["audit", str(path), "--estimator", "one_run", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    valid = [r["epsilon"] for r in out["rows"] if r["valid"] and not r["assumes"]]
    assert len(valid) == out["rows_combined"] == 2
    assert out["epsilon"] == max(valid) > 1.0
    assert out["joint_confidence"] == pytest.approx(0.9)
