"""Shards end to end: designs, threat models, claimed epsilon, recomputation and resuming."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dpaudit.data.synthetic import make_synthetic
from dpaudit.scores import read, write
from dpaudit.training.canary_scores import check_finite_scores
from dpaudit.training.job import JobId
from dpaudit.training.shard import run_shard
from dpaudit.training.vectorized import TrainingDiverged, TrainingInterrupted


@pytest.fixture(scope="module")
def data():
    d = make_synthetic(n_train=300, n_test=100, n_features=20, n_classes=4, seed=0)
    d["x_canary"], d["y_canary"] = d["x_test"][:60], d["y_test"][:60]
    return d


def _run(data, design="one_run", tm="black_box_loss", ctype="random_input", eps=None, **kw):
    canaries = {"type": ctype, "m": 40, "k": 4, "scale": 6.0, **kw.pop("canaries", {})}
    train = {"epochs": 4, "batch_size": 50, "lr": 0.5, "models_per_shard": 3, **kw.pop("train", {})}
    job_id = JobId("t", "eps4" if eps else "nonprivate", 0, kw.pop("shard", 0))
    spec = {
        "design": design,
        "threat_model": tm,
        "model": {"name": "mlp", "hidden": [16]},
        "canaries": canaries,
        "train": train,
        "target_epsilon": eps,
    }
    return run_shard(data, job_id, spec, **kw)


CASES = [
    ("one_run", "black_box_loss", "random_input", {}),
    ("one_run", "black_box_logit", "random_input", {}),
    ("one_run", "white_box_dot", "random_input", {}),
    ("one_run", "white_box_dot", "dirac", {}),
    ("lidp", "black_box_loss", "mislabeled", {"pool_size": 40}),
    (
        "lidp",
        "black_box_loss",
        "clipbkd",
        {"first_component": 10, "last_component": 20, "label": 1, "scale": 4.0},
    ),
    ("lidp", "final_model_cosine", "random_gradient", {}),
    ("lidp", "per_step_dot", "random_gradient", {}),
]


@pytest.mark.parametrize(("design", "tm", "ctype", "extra"), CASES)
def test_designs_and_threat_models_give_signal_without_noise(data, design, tm, ctype, extra):
    """Positive control: without noise, included canaries score higher on average (all trials
    pooled) in every design and threat model; the score-file layout follows the design."""
    out = _run(data, design, tm, ctype, canaries=extra, train={"models_per_shard": 4, "epochs": 30})
    sf = out.score_file
    mem = sf.membership.astype(bool)
    if design == "lidp":
        assert sf.score.shape == (4, 8)
        assert (sf.membership[:, :4] == 1).all() and (sf.membership[:, 4:] == 0).all()
        assert all(len(set(r)) == 8 for r in sf.canary_id)
    else:
        assert sf.score.shape == (4, 40)
        assert 0 < mem.mean() < 1
    assert sf.score[mem].mean() > sf.score[~mem].mean()
    assert sf.meta["design"] == design and sf.meta["threat_model"] == tm
    assert sf.meta["claimed_epsilon"] is None and sf.meta["sampler"] == "poisson"
    # issue 36, item 1: the declared inclusion law of the design's draws
    assert sf.meta["inclusion_probability"] == ("fixed" if design == "lidp" else 0.5)
    if tm == "per_step_dot":
        assert out.observations["step_dots"].shape == (4, 8, sf.meta["steps"])
        assert sf.meta["steps"] == 30 * 6  # 6 steps per epoch: round((300 + 4) / 50)


def test_multi_run_single_target(data):
    sf = _run(data, "multi_run", "white_box_dot", "dirac", train={"models_per_shard": 6}).score_file
    assert sf.score.shape == (6, 1) and (sf.canary_id == 0).all()
    assert 0 < sf.membership.mean() < 1
    assert sf.meta["inclusion_probability"] == 0.5  # the target's fair coin (issue 36, item 1)


def test_zero_out_neighbouring(data):
    """Zero-out: OUT trials hold a zero-gradient record instead of the target, so every model's
    dataset has the same size, and the target's signal is still there."""
    out = _run(
        data,
        "multi_run",
        "per_step_dot",
        "random_gradient",
        canaries={"neighbouring": "zero_out"},
        train={"models_per_shard": 8, "sampler": "shuffle", "epochs": 2},
    )
    sf = out.score_file
    assert sf.meta["neighbouring"] == "zero_out" and sf.meta["sample_rate"] == 50 / 301
    mem = sf.membership[:, 0].astype(bool)
    assert 0 < mem.sum() < 8
    obs = out.observations["step_dots"]
    assert np.isfinite(obs).all() and obs.shape == (8, 1, 12)
    with pytest.raises(ValueError, match="zero_out needs gradient canaries"):
        _run(data, canaries={"neighbouring": "zero_out"})


def test_partially_informed_shard(data):
    out = _run(
        data,
        "multi_run",
        "per_step_dot",
        "random_gradient",
        canaries={"neighbouring": "zero_out", "adversary": "partially_informed"},
        train={"models_per_shard": 4, "sampler": "shuffle", "epochs": 1, "noise_multiplier": 0.5},
    )
    assert out.score_file.meta["adversary"] == "partially_informed"
    o = out.observations["step_dots"][:, 0] * 50  # B <g~, v^>: about -C in most batches
    assert np.median(o) < -0.5
    with pytest.raises(ValueError, match="partially_informed"):
        _run(
            data,
            "multi_run",
            "per_step_dot",
            "random_gradient",
            canaries={"adversary": "partially_informed"},
        )


@pytest.mark.parametrize(
    "adversary,prefix", [("natural", None), ("partially_informed", 2), ("batch_worst_case", None)]
)
def test_likelihood_ratio_statistic_scores_the_observations(data, adversary, prefix):
    """canaries.statistic likelihood_ratio: the score is the adversary's log ratio
    (dpaudit.likelihood_ratios, tested against its definition) of B o_t / C, per epoch."""
    from dpaudit.likelihood_ratios import log_likelihood_ratio

    train = {
        "models_per_shard": 4,
        "sampler": "batch_then_shuffle",
        "epochs": 2,
        "noise_multiplier": 0.7,
        "max_grad_norm": 2.0,
    }
    canaries = {"neighbouring": "zero_out", "adversary": adversary}
    lr = {"statistic": "likelihood_ratio", "prefix_batches": prefix}
    args = (data, "multi_run", "per_step_dot", "random_gradient")
    out = _run(*args, canaries={**canaries, **lr}, train=train)
    sf = out.score_file
    assert (sf.meta["statistic"], sf.meta["prefix_batches"]) == ("likelihood_ratio", prefix)
    x = out.observations["step_dots"][:, 0] * 50 / 2.0
    want = log_likelihood_ratio(x, 0.7, adversary, 6, 50, prefix)
    np.testing.assert_allclose(sf.score[:, 0], want, rtol=1e-12)
    summed = _run(*args, canaries=canaries, train=train)  # the same runs, statistic sum
    np.testing.assert_allclose(summed.score_file.score[:, 0], x.sum(1) * 2.0 / 50)


def test_likelihood_ratio_statistic_bad_input(data):
    lr_canaries = {"neighbouring": "zero_out", "statistic": "likelihood_ratio"}
    with pytest.raises(ValueError, match="noise multiplier"):
        _run(
            data,
            "multi_run",
            "per_step_dot",
            "random_gradient",
            canaries=lr_canaries,
            train={"sampler": "shuffle"},
        )
    with pytest.raises(ValueError, match="needs threat_model per_step_dot"):
        _run(data, "multi_run", "white_box_dot", "random_gradient", canaries=lr_canaries)
    with pytest.raises(ValueError, match="prefix_batches: needs canaries.statistic"):
        _run(data, "multi_run", "per_step_dot", "random_gradient", canaries={"prefix_batches": 2})
    with pytest.raises(ValueError, match="whole epochs"):
        _run(
            data,
            "multi_run",
            "per_step_dot",
            "random_gradient",
            canaries=lr_canaries,
            train={"steps": 7, "noise_multiplier": 1.0},
        )
    with pytest.raises(ValueError, match="'batch_worst_case' needs design multi_run"):
        _run(
            data,
            "multi_run",
            "per_step_dot",
            "random_gradient",
            canaries={"adversary": "batch_worst_case"},
        )


def test_dirac_white_box_score_is_telescoped_coordinate(data):
    out = _run(data, "one_run", "white_box_dot", "dirac", train={"noise_multiplier": 1.0})
    r, sf = out.result, out.score_file
    diff = (r.flat("params0") - r.flat("params")).double().numpy()
    from dpaudit.canaries.gradient_space import dirac

    _, coords = dirac(40, diff.shape[1], 1.0, 0)
    np.testing.assert_allclose(sf.score, 1.0 * diff[:, coords], rtol=1e-6)


def test_claimed_epsilon_is_the_poisson_accountants(data):
    for sampler in ("poisson", "shuffle"):
        sf = _run(data, eps=4.0, train={"sampler": sampler, "accountant": "prv"}).score_file
        assert abs(sf.meta["claimed_epsilon"] - 4.0) < 0.05
        assert sf.meta["accountant"] == "opacus_prv_poisson"
        assert sf.meta["sampler"] == sampler
        assert sf.meta["noise_multiplier"] > 0


def test_models_recomputable_from_a_smaller_shard(data):
    big = _run(data, train={"models_per_shard": 3, "noise_multiplier": 1.0}).score_file
    small = _run(data, train={"models_per_shard": 1, "noise_multiplier": 1.0}).score_file
    np.testing.assert_array_equal(small.membership[0], big.membership[0])
    np.testing.assert_allclose(small.score[0], big.score[0], rtol=1e-4, atol=1e-5)
    other = _run(data, shard=1, train={"models_per_shard": 1, "noise_multiplier": 1.0}).score_file
    assert not np.array_equal(other.membership[0], big.membership[0])


def test_killed_shard_resumes_to_identical_score_file(data, tmp_path):
    ckpt = tmp_path / "ckpt.pt"
    full = _run(data, tm="white_box_dot", eps=4.0)
    write(tmp_path / "full.npz", full.score_file)

    def kill(step):
        if step == 7:
            raise TrainingInterrupted("simulated kill")

    with pytest.raises(TrainingInterrupted):
        _run(
            data,
            tm="white_box_dot",
            eps=4.0,
            train={"checkpoint_every_s": 0.0},
            checkpoint=ckpt,
            step_hook=kill,
        )
    assert torch.load(ckpt, weights_only=True)["step"] == 6
    resumed = _run(
        data, tm="white_box_dot", eps=4.0, train={"checkpoint_every_s": 0.0}, checkpoint=ckpt
    )
    write(tmp_path / "resumed.npz", resumed.score_file)
    assert (tmp_path / "full.npz").read_bytes() == (tmp_path / "resumed.npz").read_bytes()
    assert read(tmp_path / "resumed.npz").n_trials == 3


def test_rerun_after_a_config_change_discards_the_killed_jobs_checkpoint(data, tmp_path, caplog):
    """A job killed at step 7 leaves a checkpoint; the rerun with a changed learning rate trains
    from step 0 (the stale checkpoint is discarded with a log line) and matches a fresh run."""
    ckpt = tmp_path / "scores.npz.ckpt"

    def kill(step):
        if step == 7:
            raise TrainingInterrupted("simulated kill")

    with pytest.raises(TrainingInterrupted):
        _run(data, train={"checkpoint_every_s": 0.0}, checkpoint=ckpt, step_hook=kill)
    seen = []
    with caplog.at_level("INFO", logger="dpaudit"):
        rerun = _run(data, train={"lr": 0.4}, checkpoint=ckpt, step_hook=seen.append)
    assert seen[0] == 1 and len(seen) == rerun.score_file.meta["steps"]
    assert any(str(ckpt) in m and "different run" in m for m in caplog.messages)
    fresh = _run(data, train={"lr": 0.4})
    np.testing.assert_array_equal(rerun.score_file.score, fresh.score_file.score)


def test_diverged_training_names_the_job_and_the_trial(data):
    with pytest.raises(TrainingDiverged) as err:
        _run(data, train={"lr": 1e30})
    msg = str(err.value)
    assert "experiment 't', setting 'nonprivate', seed 0, shard 0" in msg
    assert "trial 0" in msg and "step" in msg and "learning rate" in msg
    assert "<memory>" not in msg


def test_non_finite_scores_name_the_job():
    with pytest.raises(TrainingDiverged, match=r"setting 's', seed 3: .*trial 0, canary 2 is nan"):
        check_finite_scores(
            np.array([[0.0, 1.0, np.nan]]), "experiment 'e', setting 's', seed 3", 5
        )
    check_finite_scores(np.zeros((2, 3)), "job", 5)  # finite: no error


def test_bad_configs(data):
    with pytest.raises(ValueError, match="unknown design"):
        _run(data, design="two_run")
    with pytest.raises(ValueError, match="does not apply"):
        _run(data, tm="final_model_cosine", ctype="random_input")
    with pytest.raises(ValueError, match="unknown key"):
        _run(data, train={"epoch": 3})
    with pytest.raises(ValueError, match="canary pool"):
        d = dict(data)
        d["x_canary"] = d["x_canary"][:0]
        _run(d, ctype="in_distribution")
    with pytest.raises(ValueError, match="plain SGD"):
        _run(data, train={"momentum": 0.9})
    with pytest.raises(ValueError, match="unknown sampler"):
        _run(data, train={"sampler": "random"})
    with pytest.raises(ValueError, match="not a class"):
        _run(
            data,
            "lidp",
            ctype="clipbkd",
            canaries={"first_component": 10, "last_component": 20, "label": 9},
        )


def test_cli_train_shard_writes_score_file_and_removes_checkpoint(tmp_path, capsys):
    from dpaudit.cli import main

    run = tmp_path / "run.yaml"
    run.write_text(
        "design: one_run\nthreat_model: black_box_loss\nmodel: {name: logreg}\n"
        "canaries: {type: random_input, m: 20, scale: 6.0}\n"
        "train: {epochs: 1, batch_size: 100, models_per_shard: 2}\ntarget_epsilon: 8\n"
    )
    out = tmp_path / "s.npz"
    rc = main(
        [
            "train-shard",
            "--run",
            str(run),
            "--data",
            "synthetic",
            "--out",
            str(out),
            "--no-progress",
        ]
    )
    assert rc == 0
    sf = read(out)
    assert sf.score.shape == (2, 20) and abs(sf.meta["claimed_epsilon"] - 8) < 0.1
    assert not (tmp_path / "s.npz.ckpt").exists()
    bad = tmp_path / "bad.yaml"
    bad.write_text("desgn: one_run\n")
    capsys.readouterr()
    assert main(["train-shard", "--run", str(bad), "--data", "synthetic", "--out", str(out)]) == 2
    assert f"{bad}: unknown key(s) ['desgn']" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("design", "tm", "ctype"),
    [
        ("one_run", "black_box_loss", "random_input"),
        ("lidp", "final_model_cosine", "random_gradient"),
        ("multi_run", "white_box_dot", "dirac"),
    ],
)
def test_score_files_are_accepted_by_the_estimators_of_their_design(data, design, tm, ctype):
    """Every estimator of config/config.yaml that applies to the design runs on a shard."""
    from pathlib import Path

    import yaml

    from dpaudit import estimators
    from dpaudit.audit import audit

    specs = yaml.safe_load((Path(__file__).parents[2] / "config" / "config.yaml").read_text())
    specs = {
        n: s
        for n, s in specs["estimators"].items()
        if design in estimators.get(s["method"]).designs
    }
    assert specs
    sf = _run(data, design, tm, ctype, train={"models_per_shard": 6}).score_file
    rows = audit([sf], specs)
    assert set(rows["estimator"]) == set(specs)
    assert (rows["epsilon"] >= 0).all()


def test_one_run_engine_divergence_names_the_job(data):
    """The Opacus one-model engine (run_setting): a NaN score names the job, not '<memory>'."""
    from dpaudit.training.opacus_engine import run_setting

    with pytest.raises(TrainingDiverged, match="experiment 'e', setting 's', seed 1: .*lr"):
        run_setting(
            data,
            JobId("e", "s", 1),
            {
                "model": {"name": "mlp", "hidden": [16]},
                "canaries": {"type": "random_input", "m": 20, "scale": 6.0},
                "train": {
                    "epochs": 2,
                    "batch_size": 50,
                    "lr": 1e30,
                    "max_grad_norm": 1.0,
                    "delta": 1e-5,
                },
                "target_epsilon": None,
            },
            device="cpu",
        )


def test_no_canary_control_trains_on_the_data_alone(data):
    """canaries.insert none: every canary OUT, the sample rate of the data alone, and the
    model does not depend on the canaries at all (m = 10 or 40 Dirac canaries: the same
    models, so the same accuracy); with coins the canaries change the models."""
    none10 = _run(
        data, tm="white_box_dot", ctype="dirac", eps=4.0, canaries={"m": 10, "insert": "none"}
    )
    none40 = _run(data, tm="white_box_dot", ctype="dirac", eps=4.0, canaries={"insert": "none"})
    coins = _run(data, tm="white_box_dot", ctype="dirac", eps=4.0)
    assert none40.score_file.membership.sum() == 0
    assert none40.score_file.meta["sample_rate"] == 50 / 300  # n_nominal = n_train
    assert coins.score_file.meta["sample_rate"] == 50 / 320  # + m/2 expected canaries
    for k in none10.result.params:
        assert torch.equal(none10.result.params[k], none40.result.params[k])
    assert none40.score_file.meta["canaries_inserted"] == "none"
    assert none40.score_file.meta["inclusion_probability"] == 0.0  # all OUT (issue 36, item 1)
    assert not torch.equal(none40.result.params["1.weight"], coins.result.params["1.weight"])
    with pytest.raises(ValueError, match="canaries.insert: none .* design one_run"):
        _run(data, design="lidp", ctype="mislabeled", canaries={"pool_size": 40, "insert": "none"})


def test_low_gradient_placement_puts_dirac_canaries_where_the_data_does_not_reach(data):
    """canaries.dirac_placement: low_gradient: the Dirac canaries sit on the coordinates of
    least data gradient at the shard's initialisations (here the weights of two features that
    are 0 in every record: exactly no data gradient), recorded in the meta; the data-only drift
    of those coordinates is then zero, so without noise an OUT canary's score is exactly 0 and
    an IN canary's positive."""
    from dpaudit.training.dirac_placement import data_gradient_mass
    from dpaudit.training.vectorized import model_seeds

    d = {k: v.copy() for k, v in data.items()}
    for key in ("x_train", "x_test", "x_canary"):
        d[key][:, :2] = 0.0  # features 0 and 1: constant -> 2 x 16 first-layer weights
    out = _run(
        d,
        tm="white_box_dot",
        ctype="dirac",
        canaries={"m": 20, "dirac_placement": "low_gradient"},
        train={"noise_multiplier": 0.0, "models_per_shard": 2},
    )
    sf = out.score_file
    coords = np.array(sf.meta["dirac_coordinates"])
    hidden_in = (np.arange(16)[:, None] * 20 + np.arange(2)[None, :]).ravel()  # weight[:, :2]
    assert set(coords) <= set(hidden_in.tolist()) and len(set(coords)) == 20

    def model_fn():
        from dpaudit.models import build_for_data

        return build_for_data({"name": "mlp", "hidden": [16]}, (20,), 4)

    seeds = [model_seeds(0, "nonprivate", 0, j) for j in range(2)]
    mass = data_gradient_mass(model_fn, d["x_train"], d["y_train"], 1.0, seeds)
    assert (mass[coords] == 0).all()
    member = sf.membership.astype(bool)
    assert np.abs(sf.score[~member]).max() == 0.0 and (sf.score[member] > 0).all()
