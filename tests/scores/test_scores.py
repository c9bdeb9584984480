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
    with pytest.raises(ScoreFileError, match="'membership' must hold booleans.*got dtype <U1"):
        make(n_trials=1, n=2, membership=np.array([["a", "b"]]))


def test_empty_and_corrupt_files(tmp_path):
    empty = tmp_path / "empty.npz"
    empty.write_bytes(b"")
    with pytest.raises(ScoreFileError, match="empty.npz: the file is empty"):
        scores.read(empty)
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"not a zip")
    with pytest.raises(ScoreFileError, match=r"junk.npz: not a score file \(not a zip archive"):
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
        scores.concat([a, make(n=6, meta={**META, "seed": 5})])
    with pytest.raises(ScoreFileError, match="'setting'"):
        scores.concat([a, make(meta={**META, "setting": "eps2", "seed": 5})])


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


def _raw_npz(path, **arrays):
    """A score file written with NumPy alone (any dtype), bypassing dpaudit's checks."""
    meta = arrays.pop("meta", np.array(json.dumps({**META, "format_version": 2})))
    base = {
        "score": np.zeros((2, 3)),
        "membership": np.array([[0, 1, 0]], dtype=np.int8),
        "canary_id": np.array([[0, 1, 2]]),
    }
    np.savez(path, **{**base, **arrays}, meta=meta)
    return path


def test_concat_rejects_the_same_file_or_run_twice(tmp_path):
    a = scores.write(tmp_path / "a.npz", make())
    sf = scores.read(a)
    # the same path, and the same file under another spelling of its path
    for other in (a, tmp_path / "." / "a.npz"):
        with pytest.raises(ScoreFileError, match=r"a.npz: the same score file as .*a.npz"):
            scores.concat([sf, scores.read(other)])
    # a copy: another path, the same (experiment, setting, seed)
    copy = tmp_path / "copy.npz"
    copy.write_bytes(a.read_bytes())
    with pytest.raises(ScoreFileError, match=r"copy.npz: the same run as .*a.npz .*seed 3\)"):
        scores.concat([sf, scores.read(copy)])
    # shards of one seed differ in 'shard' and stack; the same shard twice does not
    s0 = make(meta={**META, "shard": 0})
    s1 = make(meta={**META, "shard": 1})
    assert scores.concat([s0, s1]).n_trials == 4
    with pytest.raises(ScoreFileError, match="seed 3, shard 0"):
        scores.concat([s0, make(meta={**META, "shard": 0})])


def test_lidp_bound_rejects_the_same_file_twice(tmp_path, capsys):
    from dpaudit.cli import main

    a = scores.write(tmp_path / "a.npz", make(meta={**META, "design": "lidp"}))
    assert main(["lidp-bound", str(a), str(a)]) == 2
    err = capsys.readouterr().err
    assert "dpaudit lidp-bound: error:" in err and "a.npz: the same score file as" in err


@pytest.mark.parametrize(
    ("meta", "match"),
    [
        (np.array(7), r"array 'meta' must be one string \(JSON text\), got dtype int64"),
        (np.array(["{}", "{}"]), r"array 'meta' must be one string .*shape \(2,\)"),
        (np.array("[1, 2]"), "metadata must be a JSON object"),
        (np.array("{"), "metadata is not valid JSON"),
    ],
)
def test_bad_meta_names_the_file_and_key(tmp_path, meta, match):
    path = _raw_npz(tmp_path / "m.npz", meta=meta)
    with pytest.raises(ScoreFileError, match=f"m.npz: {match}"):
        scores.read(path)


@pytest.mark.parametrize(
    ("key", "value", "match"),
    [
        ("score", np.full((2, 3), "1.0"), r"array 'score' must hold integers.*got dtype <U3"),
        ("score", np.full((2, 3), "abc"), r"array 'score' must hold .*\(strings\)"),
        ("score", np.zeros((2, 3), dtype=complex), r"array 'score' must hold .*complex128"),
        ("score", np.zeros((2, 3, 1)), r"array 'score' must be 2-D .*\(2, 3, 1\)"),
        ("membership", np.full((1, 3), "1"), r"array 'membership' must hold .*<U1"),
        ("canary_id", np.full((1, 3), "x"), r"array 'canary_id' must hold .*<U1"),
        ("canary_id", np.array([[0.0, np.nan, 2.0]]), r"canary_id is nan at trial 0, canary 1"),
        ("canary_id", np.array([[0.0, 1.5, 2.0]]), r"canary_id is 1.5 at trial 0, canary 1"),
        ("canary_id", np.array([[0.0, 1.0, np.inf]]), r"canary_id is inf at trial 0, canary 2"),
    ],
)
def test_malformed_arrays_name_the_file_and_key(tmp_path, key, value, match):
    path = _raw_npz(tmp_path / "bad.npz", **{key: value})
    with pytest.raises(ScoreFileError, match=f"bad.npz: {match}"):
        scores.read(path)


def test_whole_float_canary_ids_are_read_as_integers(tmp_path):
    path = _raw_npz(tmp_path / "f.npz", canary_id=np.array([[0.0, 1.0, 2.0]]))
    back = scores.read(path)
    assert back.canary_id.dtype == np.int64 and back.canary_id[1].tolist() == [0, 1, 2]


def test_text_file_and_directory_are_not_score_files(tmp_path):
    text = tmp_path / "notes.npz"
    text.write_text("epsilon,valid\n1.0,True\n")
    with pytest.raises(ScoreFileError) as info:
        scores.read(text)
    assert "notes.npz: not a score file (not a zip archive" in str(info.value)
    assert "allow_pickle" not in str(info.value)
    npy = tmp_path / "array.npz"
    np.save(open(npy, "wb"), np.zeros(3))
    with pytest.raises(ScoreFileError, match=r"array.npz: not a score file \(not a zip archive"):
        scores.read(npy)
    with pytest.raises(ScoreFileError, match="is a directory"):
        scores.read(tmp_path)


@pytest.mark.parametrize(
    ("over", "match"),
    [
        ({"format_version": 99}, "format_version 99 is newer than this dpaudit reads"),
        ({"format_version": "2"}, "'format_version' must be an integer >= 1, got '2'"),
        ({"claimed_epsilons": [1.0]}, r"'claimed_epsilons' must be a JSON object of numbers"),
        ({"claimed_epsilons": {"rdp": "1.5"}}, r"'claimed_epsilons.rdp' must be a number or null"),
        ({"references": {"lower": "x"}}, r"'references.lower' must be a number or null, got 'x'"),
    ],
)
def test_meta_extras_name_the_file_and_key(tmp_path, over, match):
    meta = np.array(json.dumps({**META, "format_version": 2, **over}))
    path = _raw_npz(tmp_path / "x.npz", meta=meta)
    with pytest.raises(ScoreFileError, match=f"x.npz: .*{match}"):
        scores.read(path)


def test_concat_averages_test_accuracy_over_every_model_and_the_audit_reports_it():
    from dpaudit.audit import run_estimator

    a = make(n_trials=2, meta={**META, "test_accuracy": 0.5, "test_accuracy_per_model": [0.4, 0.6]})
    b = make(
        n_trials=3,
        meta={**META, "seed": 4, "test_accuracy": 0.8, "test_accuracy_per_model": [0.8] * 3},
    )
    both = scores.concat([a, b])
    assert both.meta["test_accuracy"] == pytest.approx((0.4 + 0.6 + 3 * 0.8) / 5)
    rows = run_estimator(both, "one_run", {"method": "one_run"})
    assert len(rows) and (rows["test_accuracy"] == both.meta["test_accuracy"]).all()
    assert "test_accuracy" not in run_estimator(make(), "one_run", {"method": "one_run"})


@pytest.mark.parametrize(
    ("over", "match"),
    [
        ({"claimed_epsilon": float("nan")}, r"'claimed_epsilon' must be .*got NaN"),
        ({"claimed_epsilon": True}, r"'claimed_epsilon' must be .*got true"),
        ({"claimed_epsilon": -1.0}, r"'claimed_epsilon' must be .*got -1.0"),
        ({"delta": False}, r"'delta' must be a number in \[0, 1\), got false"),
        ({"delta": float("nan")}, r"'delta' must be a number in \[0, 1\), got NaN"),
        ({"format_version": None}, r"lacks required key\(s\) \['format_version'\]"),
        ({"references": {"x": float("nan")}}, r"'references.x' must be a number or null, got nan"),
    ],
)
def test_issue36_item5_metadata_is_not_accepted_silently(tmp_path, over, match):
    """Issue 36, item 5: a NaN claim is not "no claim", JSON ``true`` is not claim 1 nor
    ``false`` delta 0, and a file's missing ``format_version`` is not filled in: each is an
    error naming the file and the key."""
    meta = {**META, "format_version": 2, **over}
    if over.get("format_version", 2) is None:
        del meta["format_version"]
    path = _raw_npz(tmp_path / "x.npz", meta=np.array(json.dumps(meta)))
    with pytest.raises(ScoreFileError, match=f"x.npz: metadata .*{match}"):
        scores.read(path)
    # in memory a ScoreFile still gets the current format_version; a bool is no claim there
    assert make().meta["format_version"] == scores.FORMAT_VERSION
    if "claimed_epsilon" in over or "delta" in over:
        with pytest.raises(ScoreFileError, match=match.split(" must")[0]):
            make(meta={**META, **over})


def _streamed_npz(path, arrays, chunk=1 << 20):
    """An .npz written member by member: an ndarray as it is, a (shape, dtype) pair as that
    many zero bytes behind its .npy header (deflated in chunks, never held in memory)."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, spec in arrays.items():
            with zf.open(f"{name}.npy", "w", force_zip64=True) as fh:
                if isinstance(spec, np.ndarray):
                    np.lib.format.write_array(fh, spec, allow_pickle=False)
                    continue
                shape, dtype, data_bytes = spec
                header = {
                    "descr": np.lib.format.dtype_to_descr(np.dtype(dtype)),
                    "fortran_order": False,
                    "shape": shape,
                }
                np.lib.format.write_array_header_1_0(fh, header)
                for start in range(0, data_bytes, chunk):
                    fh.write(bytes(min(chunk, data_bytes - start)))
    return path


def test_issue36_item11_npz_members_are_size_checked_before_they_are_inflated(
    tmp_path, monkeypatch
):
    """Issue 36, item 11: a 329 KB npz inflating to 300 MB was decompressed before its shape
    was checked. The zip and .npy headers are checked first: a member whose shape disagrees
    with 'score', one whose header declares more data than it holds, and arrays inflating to
    more than MAX_INFLATION times the file (above INFLATE_FREE_BYTES, lowered here so that
    the bomb stays small) are refused, naming the file and the member, before NumPy reads any."""
    meta = np.array(json.dumps({**META, "format_version": 2}))

    def no_inflating(*args, **kwargs):
        raise AssertionError("numpy.load was called: the archive is inflated")

    n = 2_000_000  # 16 MB of float64 zeros: about 16 KB deflated
    bomb = _streamed_npz(
        tmp_path / "bomb.npz",
        {
            "score": ((1, n), "<f8", 8 * n),
            "membership": ((1, n), "i1", n),
            "canary_id": ((1, n), "i1", n),
            "meta": meta,
        },
    )
    assert bomb.stat().st_size < 100_000
    mismatch = _streamed_npz(
        tmp_path / "shape.npz",
        {
            "score": np.zeros((1, 3)),
            "membership": ((1, n), "i1", n),
            "canary_id": np.arange(3)[None],
            "meta": meta,
        },
    )
    forged = _streamed_npz(
        tmp_path / "forged.npz",
        {
            "score": ((1, 10**12), "<f8", 24),  # declares 8 TB, holds 24 bytes
            "membership": np.zeros((1, 3), np.int8),
            "canary_id": np.arange(3)[None],
            "meta": meta,
        },
    )
    monkeypatch.setattr(scores, "INFLATE_FREE_BYTES", 2**20)
    monkeypatch.setattr(np, "load", no_inflating)
    with pytest.raises(
        ScoreFileError,
        match=r"bomb\.npz: member 'score\.npy' inflates to 16,000,128 bytes .*more than 50 "
        r"times the file",
    ):
        scores.read(bomb)
    with pytest.raises(
        ScoreFileError, match=r"shape\.npz: 'membership' has shape \(1, 2000000\) but 'score' has"
    ):
        scores.read(mismatch)
    with pytest.raises(
        ScoreFileError,
        match=r"forged\.npz: member 'score\.npy' holds 152 bytes, but its \.npy header declares "
        r"\(1, 1000000000000\) of float64",
    ):
        scores.read(forged)
    monkeypatch.undo()  # numpy.load back, the default limits: dpaudit's own files still read
    sf = make(n_trials=3, n=1000)
    assert scores.read(scores.write(tmp_path / "ok.npz", sf)).n_canaries == 1000


def test_issue36_item1_inclusion_law_defaults_to_a_fair_coin_and_round_trips(tmp_path):
    """Issue 36, item 1: a file declares its inclusion law (``inclusion_probability``); one
    without the key (every file written before it) declares a fair coin."""
    assert make().inclusion_probability == scores.FAIR_COIN
    for law in (0.0, 0.25, 1, scores.FIXED_INCLUSION):
        sf = make(meta={**META, scores.INCLUSION_KEY: law})
        back = scores.read(scores.write(tmp_path / "s.npz", sf))
        assert back.inclusion_probability == law


@pytest.mark.parametrize("law", [1.5, -0.1, float("nan"), True, None, "coin", [0.5]])
def test_issue36_item1_bad_inclusion_law_names_the_file_and_key(law):
    """Issue 36, item 1: a law that is not a probability or "fixed" is an error naming it."""
    with pytest.raises(ScoreFileError, match=r"<memory>: metadata 'inclusion_probability' must"):
        make(meta={**META, scores.INCLUSION_KEY: law})


def test_one_run_meta_is_the_head_every_one_run_producer_writes():
    """Issue 38 (one owner per fact): the format version, identity, design and fair coins of a
    one-run score file come from :func:`dpaudit.scores.one_run_meta`, in that order, for the
    simulated producers and a user's own scores (values and key order as before the merge)."""
    from dpaudit.attach.claim import make_score_file
    from dpaudit.mechanisms.dpsgd_ideal import dpsgd_score_file
    from dpaudit.mechanisms.one_run_ideal import randomized_response_score_file

    head = scores.one_run_meta("e", "s", 4)
    assert head == {
        "format_version": scores.FORMAT_VERSION,
        "experiment": "e",
        "setting": "s",
        "seed": 4,
        "design": "one_run",
        "inclusion_probability": 0.5,
    }
    made = [
        randomized_response_score_file(20, 1.0, seed=4, experiment="e", setting="s"),
        dpsgd_score_file(20, 1.0, 0.1, 3, 1e-5, seed=4, experiment="e", setting="s"),
        make_score_file(
            np.arange(8.0), np.arange(8) % 2, 2.0, delta=1e-5, experiment="e", setting="s", seed=4
        ),
    ]
    for sf in made:
        assert list(sf.meta.items())[: len(head)] == list(head.items())
