"""A score file is checked against the run its path names before the audit uses it (issue 30).

Copying a valid ``eps4`` score file over the ``nonprivate`` one gave exit 0 and an audit table
with every eps4 row twice and no nonprivate row.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from dpaudit import scores
from dpaudit.audit import audit_setting
from dpaudit.pipeline.paths import group_by_seed, parse_score_file, score_file
from dpaudit.scores import ScoreFile, ScoreFileError, check_identity

SPECS = {"one_run": {"method": "one_run", "selections": ["bonferroni"]}}


def _file(setting: str, seed: int = 0, shard: int | None = None) -> ScoreFile:
    rng = np.random.default_rng(seed)
    member = rng.integers(0, 2, 100)
    meta = {
        "experiment": "exp",
        "setting": setting,
        "seed": seed,
        "design": "one_run",
        "threat_model": "simulation",
        "claimed_epsilon": 4.0,
        "delta": 1e-5,
        "accountant": "none",
    }
    if shard is not None:
        meta["shard"] = shard
    return ScoreFile(rng.normal(size=100)[None] + member, member[None], np.arange(100)[None], meta)


def _audit(paths: list[str]):
    """The audit job of scripts/audit.py on these paths."""
    expected = {path: parse_score_file(path) for path in paths}
    return audit_setting(group_by_seed(paths), SPECS, expected)


def test_copied_score_file_is_an_error_naming_file_field_and_values(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    eps4, nonprivate = score_file("exp", "eps4", 0), score_file("exp", "nonprivate", 0)
    for path, setting in ((eps4, "eps4"), (nonprivate, "nonprivate")):
        scores.write(path, _file(setting))
    assert set(_audit([nonprivate])["setting"]) == {"nonprivate"}  # the honest file passes
    shutil.copy(eps4, nonprivate)
    with pytest.raises(ScoreFileError) as err:
        _audit([nonprivate])
    message = str(err.value)
    assert message.startswith(nonprivate)
    assert "metadata 'setting' is 'eps4', but the pipeline expects 'nonprivate'" in message


@pytest.mark.parametrize(
    ("expect", "field"),
    [
        ({"experiment": "other"}, "experiment"),
        ({"seed": "1"}, "seed"),
        ({"shard": "2"}, "shard"),
    ],
)
def test_each_identity_field_is_checked(expect, field):
    sf = _file("eps4", seed=0, shard=1)
    ok = {"experiment": "exp", "setting": "eps4", "seed": "0", "shard": "1"}
    check_identity(sf, "f.npz", **ok)  # wildcards are strings: seed "0" matches 0
    with pytest.raises(ScoreFileError, match=f"f.npz: metadata '{field}' is"):
        check_identity(sf, "f.npz", **{**ok, **expect})


def test_a_file_without_shard_metadata_is_shard_0():
    """The Opacus engine writes seed<N>.shard0.npz without a "shard" key: its only shard."""
    sf = _file("eps4")  # no "shard" key
    check_identity(sf, "f.npz", experiment="exp", setting="eps4", seed=0, shard="0")
    with pytest.raises(
        ScoreFileError, match="metadata 'shard' is None, but the pipeline expects '1'"
    ):
        check_identity(sf, "f.npz", experiment="exp", setting="eps4", seed=0, shard="1")


def test_figure_readers_check_the_path_too(tmp_path, monkeypatch):
    # the ROC and trade-off figure jobs read score files themselves (the figure kinds through
    # dpaudit/pipeline/figure_kinds.py, scripts/plot_tradeoff.py): a copied file is the same
    # error there
    from dpaudit.pipeline.paths import read_score_file

    monkeypatch.chdir(tmp_path)
    eps4, nonprivate = score_file("exp", "eps4", 0), score_file("exp", "nonprivate", 0)
    for path, setting in ((eps4, "eps4"), (nonprivate, "nonprivate")):
        scores.write(path, _file(setting))
    assert read_score_file(nonprivate).meta["setting"] == "nonprivate"
    shutil.copy(eps4, nonprivate)
    with pytest.raises(ScoreFileError, match="metadata 'setting' is 'eps4'"):
        read_score_file(nonprivate)
    repo = Path(__file__).resolve().parents[2]
    for script in ("dpaudit/pipeline/figure_kinds.py", "scripts/plot_tradeoff.py"):
        text = (repo / script).read_text()
        assert "read_score_file(path)" in text and "scores.read(" not in text, script
