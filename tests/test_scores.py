"""The score-file contract: round trip, determinism, and errors that name file and row."""

from __future__ import annotations

import json
import zipfile

import numpy as np
import pytest

from dpaudit import scores
from dpaudit.scores import ScoreFile, ScoreFileError

META = {
    "experiment": "e",
    "setting": "eps1",
    "seed": 3,
    "design": "one_run",
    "threat_model": "black_box_loss",
    "claimed_epsilon": 1.0,
    "delta": 1e-5,
    "accountant": "opacus_rdp",
}


def make(n_trials=2, n=5, **over) -> ScoreFile:
    rng = np.random.default_rng(0)
    kw = dict(
        score=rng.normal(size=(n_trials, n)),
        membership=rng.integers(0, 2, size=(n_trials, n)),
        canary_id=np.tile(np.arange(n), (n_trials, 1)),
        meta=dict(META),
    )
    kw.update(over)
    return ScoreFile(**kw)


def test_round_trip_and_numpy_only_reading(tmp_path):
    sf = make()
    path = scores.write(tmp_path / "s.npz", sf)
    back = scores.read(path)
    np.testing.assert_array_equal(back.score, sf.score)
    np.testing.assert_array_equal(back.membership, sf.membership)
    assert back.meta["seed"] == 3 and back.meta["format_version"] == scores.FORMAT_VERSION
    with np.load(path) as z:  # readable without dpaudit
        assert json.loads(z["meta"].item())["setting"] == "eps1"
        assert z["score"].shape == (2, 5)
    assert len(back.to_frame()) == 10


def test_same_content_same_bytes(tmp_path):
    a = scores.write(tmp_path / "a.npz", make())
    b = scores.write(tmp_path / "b.npz", make())
    assert a.read_bytes() == b.read_bytes()


def test_write_is_atomic(tmp_path, monkeypatch):
    target = tmp_path / "s.npz"

    def boom(*args, **kwargs):
        raise RuntimeError("killed")

    monkeypatch.setattr(np.lib.format, "write_array", boom)
    with pytest.raises(RuntimeError):
        scores.write(target, make())
    assert not target.exists()
    assert list(tmp_path.iterdir()) == []


def test_nan_names_file_and_row(tmp_path):
    sf = make()
    path = scores.write(tmp_path / "bad.npz", sf)
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
    arr = sf.score.copy()
    arr[1, 3] = np.nan
    bad = tmp_path / "nan.npz"
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(bad, "w") as dst:
        for name in names:
            if name == "score.npy":
                with dst.open(name, "w") as fh:
                    np.lib.format.write_array(fh, arr)
            else:
                dst.writestr(name, src.read(name))
    with pytest.raises(ScoreFileError, match=r"nan\.npz: score is NaN at trial 1, canary 3"):
        scores.read(bad)


def test_inf_and_membership_errors():
    score = np.zeros((1, 4))
    score[0, 2] = np.inf
    with pytest.raises(ScoreFileError, match="inf at trial 0, canary 2"):
        make(n_trials=1, n=4, score=score)
    with pytest.raises(
        ScoreFileError, match="membership must be 0 or 1, got 2 at trial 0, canary 1"
    ):
        make(n_trials=1, n=3, membership=np.array([[0, 2, 1]]))
    with pytest.raises(ScoreFileError, match="numeric 0/1"):
        make(n_trials=1, n=2, membership=np.array([["a", "b"]]))


def test_empty_and_corrupt_files(tmp_path):
    empty = tmp_path / "empty.npz"
    empty.write_bytes(b"")
    with pytest.raises(ScoreFileError, match="empty.npz: the file is empty"):
        scores.read(empty)
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"not a zip")
    with pytest.raises(ScoreFileError, match="junk.npz: not a readable score file"):
        scores.read(junk)
    with pytest.raises(ScoreFileError, match="no scores"):
        make(
            n_trials=1,
            n=0,
            score=np.zeros((1, 0)),
            membership=np.zeros((1, 0)),
            canary_id=np.zeros((1, 0)),
        )


def test_meta_checks():
    meta = dict(META)
    del meta["delta"]
    with pytest.raises(ScoreFileError, match="lacks required key"):
        make(meta=meta)
    with pytest.raises(ScoreFileError, match="design"):
        make(meta={**META, "design": "two_run"})
    with pytest.raises(ScoreFileError, match="delta"):
        make(meta={**META, "delta": 2.0})
    sf = make(meta={**META, "claimed_epsilon": None})
    assert sf.claimed_epsilon == float("inf")


def test_concat():
    a, b = make(n_trials=2), make(n_trials=3, meta={**META, "seed": 4})
    both = scores.concat([a, b])
    assert both.n_trials == 5 and both.meta["seed"] == [3, 4]
    with pytest.raises(ScoreFileError, match="canaries per trial"):
        scores.concat([a, make(n=6)])
    with pytest.raises(ScoreFileError, match="'setting'"):
        scores.concat([a, make(meta={**META, "setting": "eps2"})])


def test_constant_rows_are_stored_once_and_broadcast_on_reading(tmp_path):
    n_trials, n = 200, 6
    member = np.tile([1, 1, 1, 0, 0, 0], (n_trials, 1))
    sf = make(n_trials, n, membership=member)
    path = scores.write(tmp_path / "s.npz", sf)
    with np.load(path) as z:  # NumPy alone: one stored row, broadcast by the reader
        assert z["membership"].shape == (1, n) and z["canary_id"].shape == (1, n)
        assert z["score"].shape == (n_trials, n)
    back = scores.read(path)
    assert back.membership.shape == back.canary_id.shape == (n_trials, n)
    np.testing.assert_array_equal(back.membership, member)
    np.testing.assert_array_equal(back.canary_id, sf.canary_id)
    # rows that differ are stored in full
    varied = make(n_trials, n)
    with np.load(scores.write(tmp_path / "v.npz", varied)) as z:
        assert z["membership"].shape == (n_trials, n)
    np.testing.assert_array_equal(scores.read(tmp_path / "v.npz").membership, varied.membership)


def test_float32_scores(tmp_path):
    sf = make(3, 4, meta={**META, "score_dtype": "float32"})
    path = scores.write(tmp_path / "s.npz", sf)
    with np.load(path) as z:
        assert z["score"].dtype == np.float32
    back = scores.read(path)
    assert back.score.dtype == np.float64
    np.testing.assert_array_equal(back.score, sf.score.astype(np.float32).astype(np.float64))
    big = make(1, 2, score=[[1e300, 0.0]], meta={**META, "score_dtype": "float32"})
    with pytest.raises(ScoreFileError, match="overflows float32 at trial 0, canary 0"):
        scores.write(tmp_path / "big.npz", big)
    assert not (tmp_path / "big.npz").exists()
    with pytest.raises(ScoreFileError, match="score_dtype.*allowed.*float64.*float32"):
        make(meta={**META, "score_dtype": "float16"})
