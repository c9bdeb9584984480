"""The false-alarm table of correct trainings over seeds (dpaudit.attach.false_alarms; issue 37,
Done when: "correct scripts are flagged in at most 1 of 20 seeds per check family")."""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from dpaudit.attach.conformance import Check, report
from dpaudit.attach.false_alarms import (
    CERTIFIED,
    FAMILIES,
    false_alarm_table,
    per_seed_verdicts,
)
from dpaudit.audit import audit
from dpaudit.mechanisms.one_run_ideal import randomized_response_score_file

REPO = Path(__file__).resolve().parents[2]
NULL_CONFIG = REPO / "config" / "cpu" / "own_training_null.yaml"
SPEC = {"method": "one_run", "confidence": 0.95, "selections": ["bonferroni"]}


def _seed_file(seed: int, departs: tuple[str, ...], claim: float, measured: float):
    """A score file of one seed: randomized response at epsilon 2 (1000 canaries), the claim
    ``claim``, a conformance report measuring sampling and noise (each departing when named in
    ``departs``) and leaving the other stages unseen."""
    sf = randomized_response_score_file(1000, 2.0, 1e-6, seed=seed, setting="eps2")
    sf.meta["seed"] = seed
    sf.meta["claimed_epsilon"] = claim
    checks = [
        Check(stage, "a check", "m", "c", stage in departs, 0.01, "test")
        for stage in ("sampling", "noise")
    ]
    facts = {"epsilon_estimate": measured, "epsilon_lower": measured - 0.1}
    sf.meta.update(report(checks, 0.01, facts).score_meta())
    return sf


def _table(n: int = 20) -> pd.DataFrame:
    """20 seeds: noise departs in seed 3 only, sampling in seeds 4 and 5, the claim is below the
    mechanism's epsilon 2 (a certified flag within reach) in seed 7 only."""
    departs = {3: ("noise",), 4: ("sampling",), 5: ("sampling",)}
    files = [
        _seed_file(s, departs.get(s, ()), 0.5 if s == 7 else 100.0, 1.5 + s / 100)
        for s in range(n)
    ]
    return audit(files, {"one_run": SPEC})


def test_issue37_done_when_the_false_alarms_are_counted_per_family_against_1_of_20() -> None:
    """Issue 37, Done when point 2: per check family the seeds that flag a (correct) training,
    against the bound of 1 in 20; stages no check measured are counted as unseen, not as
    conforming; the certified bound counts the seeds whose bound exceeds the claim."""
    table = false_alarm_table(_table(), ["setting"])
    assert table["family"].tolist() == list(FAMILIES)
    rows = table.set_index("family")
    assert (rows["seeds"] == 20).all() and (rows["allowed"] == 1).all()
    assert rows.loc["noise", "flagged"] == 1 and rows.loc["noise", "flagged_seeds"] == "3"
    assert rows.loc["noise", "within"]
    assert rows.loc["sampling", "flagged"] == 2 and rows.loc["sampling", "flagged_seeds"] == "4; 5"
    assert not rows.loc["sampling", "within"]
    for stage in ("steps", "sensitivity", "accounting"):
        assert rows.loc[stage, "seen"] == 0 and rows.loc[stage, "flagged"] == 0
        assert math.isnan(rows.loc[stage, "error_probability"])
    assert rows.loc["noise", "seen"] == 20 and rows.loc["noise", "error_probability"] == 0.01
    assert rows.loc[CERTIFIED, "flagged"] == 1 and rows.loc[CERTIFIED, "flagged_seeds"] == "7"
    assert rows.loc[CERTIFIED, "error_probability"] == pytest.approx(0.05)
    assert rows.loc[CERTIFIED, "claimed_epsilon"] == 100.0  # the largest claim of the seeds
    assert (rows["largest_measured_epsilon"] == 1.5 + 19 / 100).all()
    per_seed = per_seed_verdicts(_table(), ["setting"])
    assert len(per_seed) == 20 and per_seed["flagged"].sum() == 1
    assert (rows["largest_bound"] == per_seed["epsilon_lower_bound"].max()).all()


def test_the_bound_allows_floor_of_one_in_twenty() -> None:
    """10 seeds allow no false alarm (floor(10 / 20) = 0): one noise departure is too many."""
    table = false_alarm_table(_table(10), ["setting"]).set_index("family")
    assert (table["allowed"] == 0).all()
    assert not table.loc["noise", "within"] and table.loc["steps", "within"]


def test_a_table_without_a_conformance_report_is_refused_naming_it() -> None:
    """Bad use: the audit table of a training without a conformance report (no
    train.entry_point) gets a clear error naming the table and the missing columns."""
    plain = audit([randomized_response_score_file(100, 2.0, 1e-6, seed=0)], {"one_run": SPEC})
    with pytest.raises(ValueError, match=r"results/x/audit\.csv: no column.*conformance_departs"):
        false_alarm_table(plain, ["setting"], source="results/x/audit.csv")


@pytest.mark.slow
def test_the_null_study_config_dry_runs_to_its_false_alarm_table(tmp_path) -> None:
    """Issue 37, Done when point 2: config/cpu/own_training_null.yaml, with the targets its
    header's command names, plans the 60 trainings (3 correct scripts x 20 seeds), an audit per
    script, the verdict table and the false-alarm table (a dry run, in an empty directory)."""
    header = NULL_CONFIG.read_text().split("\nexperiments:", 1)[0]
    command = " ".join(
        line.lstrip("# ").rstrip("\\ ") for line in header.splitlines() if line.startswith("#  ")
    )
    targets = re.findall(r"results/\S+\.csv", command)
    assert "results/own_training_null_cpu/false_alarms.csv" in targets, command
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile")]
    cmd += ["--directory", str(tmp_path), "--configfile", str(REPO / "config" / "config.yaml")]
    cmd += ["--configfile", str(NULL_CONFIG), "--cores", "1", "-n", "--nolock", *targets]
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    block = done.stdout.split("Job stats:", 1)[1].split("total", 1)[0]
    counts = {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)\s*$", block, re.M)}
    assert counts["train"] == 60 and counts["audit"] == 3, counts
    assert counts["false_alarms"] == 1 and counts["verdict_table"] == 1, counts


def test_the_markdown_table_shows_flagged_of_seen_per_family(tmp_path, capsys) -> None:
    """The doc's table (docs/real_data/own_training.md, "Correct scripts over 20 seeds"),
    regenerated from the CSV the rule writes: flagged / seen per family, '-' for a stage no
    seed measured, '!' where the count exceeds 1 in 20."""
    from dpaudit.attach.false_alarms import main

    alarms = false_alarm_table(_table(), ["setting"])
    path = tmp_path / "false_alarms.csv"
    alarms.rename(columns={"setting": "entry_point"}).to_csv(path, index=False)
    assert main([str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    assert head[:2] == ["entry_point", "seeds"] and head[2 : 2 + len(FAMILIES)] == list(FAMILIES)
    cells = dict(zip(head, (c.strip() for c in lines[2].strip("|").split("|")), strict=True))
    want = {"sampling": "2 / 20 !", "noise": "1 / 20", CERTIFIED: "1 / 20"}
    assert {f: cells[f] for f in FAMILIES} == {f: want.get(f, "-") for f in FAMILIES}
    assert cells["entry_point"] == "`eps2`" and cells["claimed"] == "100.00"
