"""The figure-kind registry (dpaudit.pipeline.figure_kinds): one rule and one adapter draw every
kind, its files, inputs, params and caption derived from its entry (issue 38, "for each kind of
change the files it touches, each at most 4": a figure kind is its drawing and its entry)."""

from __future__ import annotations

import logging
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from dpaudit import scores
from dpaudit.pipeline import figure_kinds, paths, targets
from dpaudit.pipeline.figure_kinds import FIGURE_KINDS, FigureKind

REPO = Path(__file__).resolve().parents[2]
CONFIG = {
    "experiments": {
        "sim": {"kind": "simulate", "description": "Gaussian scores: a simulation."},
        "trained": {"kind": "train", "figure": {"title": "Trained"}},
        "table": {"kind": "analysis"},
    }
}


def test_each_experiment_gets_the_kinds_of_its_kind_in_the_default_target():
    assert figure_kinds.kinds_of(CONFIG, "sim") == ["roc"]
    assert figure_kinds.kinds_of(CONFIG, "table") == []
    assert targets.figure_kind_files(CONFIG, "trained") == [
        paths.figure("trained", "roc", "pdf"),
        paths.figure("trained", "roc", "png"),
    ]
    assert targets.figure_kind_files(CONFIG, "table") == []
    assert re.fullmatch(targets.figure_kind_experiments(CONFIG), "sim")
    assert not re.fullmatch(targets.figure_kind_experiments(CONFIG), "table")
    assert re.fullmatch(figure_kinds.kind_pattern(), "roc")
    # the kinds never take the name of a figure of a rule of its own
    own = (paths.FIGURE, paths.EPS_FIGURE, paths.VERDICT_FIGURE, paths.TRADEOFF_FIGURE)
    assert not any(re.fullmatch(figure_kinds.kind_pattern(), name) for name in own)


def test_a_kind_reads_its_score_files_or_audit_table_and_bad_pairs_are_named(monkeypatch):
    monkeypatch.setattr(targets, "score_files", lambda config, exp: [f"{exp}.npz"])
    assert targets.figure_kind_inputs(CONFIG, "roc", "sim") == {"scores": ["sim.npz"]}
    table_kind = FigureKind(("train",), figure_kinds.TABLE, figure_kinds.figure_title, "", print)
    monkeypatch.setitem(FIGURE_KINDS, "from_table", table_kind)
    assert targets.figure_kind_inputs(CONFIG, "from_table", "trained") == {
        "table": paths.audit_table("trained")
    }
    with pytest.raises(ValueError, match="experiments.sim: a simulate experiment has no figure"):
        targets.figure_kind_inputs(CONFIG, "from_table", "sim")
    with pytest.raises(ValueError, match="unknown figure kind 'nope'.*figure_kinds.py"):
        figure_kinds.job_params(CONFIG, "nope", "sim")


def test_params_and_caption_come_from_the_entry():
    assert figure_kinds.job_params(CONFIG, "roc", "trained") == {"title": "Trained"}
    title = figure_kinds.job_params(CONFIG, "roc", "sim")
    assert title == {"title": "Gaussian scores: a simulation"}
    caption = figure_kinds.job_caption(CONFIG, "roc", "sim")
    assert caption.startswith("ROC curves of the membership test of experiment **sim**")


def test_the_adapter_draws_a_kind_through_its_entry(tmp_path, monkeypatch, caplog):
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(0)
    files = []
    for setting, mu in (("low", 0.5), ("high", 2.0)):
        member = (rng.random((1, 500)) < 0.5).astype(np.int8)
        meta = {
            "experiment": "sim",
            "setting": setting,
            "seed": 0,
            "design": "one_run",
            "threat_model": "simulation",
            "claimed_epsilon": mu,
            "delta": 1e-5,
            "accountant": "test",
        }
        sf = scores.ScoreFile(
            rng.normal(size=member.shape) + mu * member, member, np.arange(500)[None], meta
        )
        files.append(paths.score_file("sim", setting, 0))
        scores.write(files[-1], sf)
    outs = [str(tmp_path / "roc.pdf"), str(tmp_path / "roc.png")]
    with caplog.at_level(logging.INFO):
        figure_kinds.draw(
            "roc", SimpleNamespace(scores=files), outs, {"title": "t"}, logging.getLogger("t")
        )
    assert all(Path(p).stat().st_size > 1000 for p in outs)
    assert [r.getMessage().split(":")[0] for r in caplog.records if r.name == "t"] == [
        "low (claimed ε 0.5)",
        "high (claimed ε 2)",
    ]


def test_the_registry_imports_no_matplotlib():
    # the rule's wildcard constraints and params read the registry while the DAG is built
    probe = (
        "import sys\nfrom dpaudit.pipeline import figure_kinds, targets\n"
        "print('matplotlib' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_one_rule_and_one_adapter_draw_every_kind():
    rules = (REPO / "rules" / "figures.smk").read_text()
    assert rules.count("pipeline_figure_kinds.kind_pattern()") == 1
    assert '"../scripts/plot_kind.py"' in rules
    assert not any((REPO / "scripts" / f"plot_{kind}.py").exists() for kind in FIGURE_KINDS)
    assert not any((REPO / "report" / f"{kind}_figure.rst").exists() for kind in FIGURE_KINDS)
