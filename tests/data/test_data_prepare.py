"""prepare_dataset: deterministic subsets, two-class variants, canary pool, the standard .npz."""

from __future__ import annotations

import hashlib
import json
import sys
import types
import zipfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from dpaudit.data import fixtures, tabular
from dpaudit.data.prepare import (
    ARRAY_KEYS,
    PreparedDataError,
    load_prepared,
    prepare_dataset,
    write_npz,
)

REPO = Path(__file__).resolve().parents[2]




def _digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def mnist_mirror(tmp_path_factory):
    m = tmp_path_factory.mktemp("mirror")
    info = fixtures.make_mirror(m, "mnist", n_train=120, n_test=80, seed=11)
    return m, info["checksums"]


@pytest.fixture
def location_mirror(tmp_path, monkeypatch):
    m = tmp_path / "mirror"
    info = fixtures.make_mirror(m, "location", n_train=240, n_test=60, seed=12)
    monkeypatch.setitem(
        tabular.TABULAR_DATASETS,
        "location",
        replace(tabular.TABULAR_DATASETS["location"], rows=300),
    )
    return m, info["checksums"]["dataset_location.tgz"]


def _mnist(tmp_path, mirror, checksums, out="d.npz", **params):
    out = tmp_path / out
    prepare_dataset(
        "mnist", {"checksums": checksums, **params}, str(tmp_path / "root"), str(mirror), str(out)
    )
    return out


def test_mnist_standard_file(tmp_path, mnist_mirror):
    m, ck = mnist_mirror
    out = _mnist(tmp_path, m, ck, seed=1, n_train=50, n_test=30, canary_pool=20)
    arrays, meta = load_prepared(out)
    assert set(np.load(out).files) == {*ARRAY_KEYS, "meta"}
    assert arrays["x_train"].shape == (50, 1, 28, 28) and arrays["x_train"].dtype == np.float32
    assert arrays["y_train"].dtype == np.int64
    assert arrays["x_test"].shape[0] == 30 and arrays["x_canary"].shape[0] == 20
    assert 0.0 <= arrays["x_train"].min() and arrays["x_train"].max() <= 1.0
    assert meta["dataset"] == "mnist" and meta["num_classes"] == 10
    assert meta["n_train"] == 50 and meta["input_shape"] == [1, 28, 28]
    assert {s["file"] for s in meta["sources"]} == set(ck)
    # canaries come from the test split and are disjoint from the test set
    assert not set(arrays["canary_index"]) & set(arrays["test_index"])
    assert arrays["canary_index"].max() < 80 and arrays["train_index"].max() < 120
    # the values are the source images at those positions (torchvision's parse, scaled)
    from dpaudit.data.vision import load_vision

    src = load_vision("mnist", tmp_path / "root", str(m), ck)
    np.testing.assert_array_equal(
        arrays["x_canary"], src["x_test"][arrays["canary_index"]].astype(np.float32) / 255
    )
    np.testing.assert_array_equal(arrays["y_train"], src["y_train"][arrays["train_index"]])


def test_prepare_is_deterministic_byte_for_byte(tmp_path, mnist_mirror):
    m, ck = mnist_mirror
    p = dict(seed=7, n_train=20, n_test=5, canary_pool=8, classes=[3, 8])
    a = _mnist(tmp_path, m, ck, "a.npz", **p)
    b = _mnist(tmp_path, m, ck, "b.npz", **p)
    assert _digest(a) == _digest(b)
    c = _mnist(tmp_path, m, ck, "c.npz", **{**p, "seed": 8})
    assert _digest(a) != _digest(c)
    ia, _ = load_prepared(a)
    ic, _ = load_prepared(c)
    assert not np.array_equal(ia["train_index"], ic["train_index"])


def test_streams_are_independent(tmp_path, mnist_mirror):
    """Changing n_train changes neither the canary pool nor the test set."""
    m, ck = mnist_mirror
    a, _ = load_prepared(_mnist(tmp_path, m, ck, "a.npz", seed=3, n_train=30, canary_pool=15))
    b, _ = load_prepared(_mnist(tmp_path, m, ck, "b.npz", seed=3, n_train=60, canary_pool=15))
    np.testing.assert_array_equal(a["canary_index"], b["canary_index"])
    np.testing.assert_array_equal(a["test_index"], b["test_index"])
    assert not np.array_equal(a["train_index"], b["train_index"][:30])


def test_two_class_variant(tmp_path, mnist_mirror):
    m, ck = mnist_mirror
    out = _mnist(tmp_path, m, ck, seed=0, classes=[7, 2], canary_pool=4)
    arrays, meta = load_prepared(out)
    from dpaudit.data.vision import load_vision

    src = load_vision("mnist", tmp_path / "root", str(m), ck)
    expect = np.where(src["y_train"][arrays["train_index"]] == 7, 0, 1)
    np.testing.assert_array_equal(arrays["y_train"], expect)
    assert set(arrays["y_train"].tolist()) == {0, 1}
    assert arrays["train_index"].size == int(np.isin(src["y_train"], [7, 2]).sum())
    assert meta["num_classes"] == 2 and meta["classes"] == ["7 - seven", "2 - two"]
    assert meta["source_labels"] == [7, 2]
    n_test_classes = int(np.isin(src["y_test"], [7, 2]).sum())
    assert arrays["y_test"].size + arrays["y_canary"].size == n_test_classes


def test_normalize(tmp_path, mnist_mirror):
    m, ck = mnist_mirror
    arrays, meta = load_prepared(_mnist(tmp_path, m, ck, normalize=True))
    x = arrays["x_train"]  # the whole training split: its own stats -> mean 0, std 1
    assert abs(float(x.mean())) < 1e-4 and abs(float(x.std()) - 1) < 1e-3
    assert len(meta["normalization"]["mean"]) == 1
    arrays, meta = load_prepared(
        _mnist(tmp_path, m, ck, "f.npz", normalize={"mean": [0.5], "std": [0.25]}, n_train=5)
    )
    assert arrays["x_train"].min() >= -2.0 and arrays["x_train"].max() <= 2.0
    assert meta["normalization"] == {"mean": [0.5], "std": [0.25]}


def test_location_prepare(tmp_path, location_mirror):
    m, sha = location_mirror
    params = {"sha256": sha, "seed": 5, "test_fraction": 0.25, "canary_pool": 10, "n_train": 100}
    out = tmp_path / "loc.npz"
    prepare_dataset("location", params, str(tmp_path / "root"), m.as_uri(), str(out))
    arrays, meta = load_prepared(out)
    assert arrays["x_train"].shape == (100, 446)
    assert arrays["x_test"].shape[0] + arrays["x_canary"].shape[0] == 75  # 25% of 300 rows
    rows = np.concatenate([arrays["train_index"], arrays["test_index"], arrays["canary_index"]])
    assert np.unique(rows).size == rows.size and rows.max() < 300  # disjoint file rows
    x, y = tabular.parse_table(tmp_path / "root" / "location" / "dataset_location.tgz", 446, 30)
    np.testing.assert_array_equal(arrays["x_test"], x[arrays["test_index"]].astype(np.float32))
    np.testing.assert_array_equal(arrays["y_canary"], y[arrays["canary_index"]])
    assert meta["num_classes"] == 30 and meta["sources"][0]["sha256"] == sha
    out2 = tmp_path / "loc2.npz"
    prepare_dataset("location", params, str(tmp_path / "root"), m.as_uri(), str(out2))
    assert _digest(out) == _digest(out2)


@pytest.mark.parametrize(
    "params, match",
    [
        ({"n_train": 10_000}, "n_train: asked for 10000"),
        ({"canary_pool": 81}, "canary_pool: asked for 81"),
        ({"n_tran": 5}, r"unknown param\(s\) \['n_tran'\]"),
        ({"classes": [1]}, "classes"),
        ({"classes": [1, 1]}, "classes"),
        ({"classes": [0, 10]}, "classes"),
        ({"seed": -1}, "seed"),
        ({"n_train": 0}, "n_train"),
        ({"n_test": 2.5}, "n_test"),
        ({"normalize": "yes"}, "normalize"),
        ({"test_fraction": 0.2}, "unknown param"),
    ],
)
def test_bad_params(tmp_path, mnist_mirror, params, match):
    m, ck = mnist_mirror
    with pytest.raises(ValueError, match=match):
        _mnist(tmp_path, m, ck, **params)
    assert not (tmp_path / "d.npz").exists()


def test_unknown_dataset_and_purchase_checksum(tmp_path):
    with pytest.raises(ValueError, match="unknown data set 'imagenet'"):
        prepare_dataset("imagenet", {}, str(tmp_path), None, str(tmp_path / "o.npz"))
    with pytest.raises(ValueError, match="sha256"):
        prepare_dataset("purchase", {}, str(tmp_path), str(tmp_path), str(tmp_path / "o.npz"))
    with pytest.raises(ValueError, match="test_fraction"):
        prepare_dataset(
            "location",
            {"test_fraction": 1.0},
            str(tmp_path),
            str(tmp_path),
            str(tmp_path / "o.npz"),
        )


def test_synthetic_dispatch(tmp_path, monkeypatch):
    calls = []

    def make_synthetic(**kw):
        calls.append(kw)
        rng = np.random.default_rng(kw["seed"])
        return {
            "x_train": rng.normal(size=(6, 3)),
            "y_train": np.arange(6) % 2,
            "x_test": rng.normal(size=(4, 3)),
            "y_test": np.arange(4) % 2,
        }

    fake = types.ModuleType("dpaudit.data.synthetic")
    fake.make_synthetic = make_synthetic
    monkeypatch.setitem(sys.modules, "dpaudit.data.synthetic", fake)
    out = tmp_path / "s.npz"
    prepare_dataset("synthetic", {"seed": 4, "d": 3}, str(tmp_path), None, str(out))
    assert calls == [{"seed": 4, "d": 3}]
    arrays, meta = load_prepared(out)
    assert arrays["x_train"].dtype == np.float32 and arrays["x_train"].shape == (6, 3)
    assert arrays["x_canary"].shape == (0, 3) and arrays["y_canary"].shape == (0,)
    assert meta["dataset"] == "synthetic" and meta["num_classes"] == 2
    assert meta["params"] == {"seed": 4, "d": 3}


def test_write_npz_is_atomic_and_reproducible(tmp_path):
    out = tmp_path / "x.npz"
    arrays = {"b": np.arange(3), "a": np.ones((2, 2), np.float32), "meta": np.array("{}")}
    write_npz(out, arrays)
    first = out.read_bytes()
    write_npz(out, dict(reversed(list(arrays.items()))))
    assert out.read_bytes() == first
    with np.load(out) as z:
        assert z.files == ["a", "b", "meta"] and json.loads(z["meta"].item()) == {}
    with pytest.raises(ValueError):
        write_npz(out, {"o": np.array([object()], dtype=object)})
    assert out.read_bytes() == first  # a failed write leaves the old file intact
    assert [p.name for p in tmp_path.iterdir()] == ["x.npz"]


def test_load_prepared_rejects_other_files(tmp_path):
    p = tmp_path / "s.npz"
    np.savez(p, score=np.zeros(3))
    with pytest.raises(ValueError, match="not a prepared data set"):
        load_prepared(p)


def _synthetic_file(tmp_path: Path, name: str = "ds.npz") -> Path:
    out = tmp_path / name
    prepare_dataset("synthetic", {"n_train": 40, "n_test": 20}, str(tmp_path), None, str(out))
    return out


def _member_data_offset(path: Path, member: str) -> int:
    """Offset of the first data byte of ``member`` in the (stored, uncompressed) zip file."""
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo(member)
    raw = path.read_bytes()
    h = info.header_offset
    name_len = int.from_bytes(raw[h + 26 : h + 28], "little")
    extra_len = int.from_bytes(raw[h + 28 : h + 30], "little")
    return h + 30 + name_len + extra_len


@pytest.mark.parametrize("damage", ["truncated", "empty", "text", "flipped_byte"])
def test_load_prepared_names_a_damaged_file_and_the_fix(tmp_path, damage):
    """A truncated or corrupt prepared data set gives an error naming the file and saying to
    delete it and rerun (not a bare BadZipFile / EOFError / allow_pickle hint)."""
    out = _synthetic_file(tmp_path)
    raw = out.read_bytes()
    if damage == "truncated":
        out.write_bytes(raw[: len(raw) // 2])
    elif damage == "empty":
        out.write_bytes(b"")
    elif damage == "text":
        out.write_bytes(b"x_train,y_train\n1,2\n")
    else:  # one bit of the training inputs: only the CRC-32 can tell
        i = _member_data_offset(out, "x_train.npy") + 200
        out.write_bytes(raw[:i] + bytes([raw[i] ^ 1]) + raw[i + 1 :])
    with pytest.raises(PreparedDataError) as err:
        load_prepared(out)
    msg = str(err.value)
    assert msg.startswith(f"{out}: ") and f"delete {out} and rerun" in msg
    assert "allow_pickle" not in msg
    if damage == "flipped_byte":
        assert "x_train.npy" in msg and "CRC" in msg


def test_load_prepared_rejects_bad_contents(tmp_path):
    out = _synthetic_file(tmp_path)
    with np.load(out) as z:
        good = {k: z[k] for k in z.files}
    cases = [
        (
            "x_test",
            lambda a: np.where(np.arange(a.shape[0])[:, None] == 3, np.nan, a),
            "x_test row 3",
        ),
        ("y_train", lambda a: np.where(np.arange(a.size) == 5, 10, a), "y_train row 5 is 10"),
        ("y_train", lambda a: a - 1, "outside"),
        ("meta", lambda a: np.array("{not json"), "'meta' is not valid JSON"),
        ("meta", lambda a: np.array("[1, 2]"), "not a JSON object"),
        ("x_test", lambda a: a[:, :5], "records of shape"),
    ]
    for key, change, match in cases:
        bad = tmp_path / "bad.npz"
        write_npz(bad, {**good, key: change(good[key]).astype(good[key].dtype)})
        with pytest.raises(PreparedDataError, match=match) as err:
            load_prepared(bad)
        assert str(err.value).startswith(f"{bad}: ")
    with pytest.raises(FileNotFoundError, match="absent.npz"):
        load_prepared(tmp_path / "absent.npz")


def test_real_location30_prepare(tmp_path, shared_data):
    """End to end on the real archive (skips without ../shared; fails in CI, see conftest)."""
    shared = shared_data
    params = {"seed": 0, "test_fraction": 0.5, "canary_pool": 1000, "n_train": 2000}
    outs = [tmp_path / "a.npz", tmp_path / "b.npz"]
    for out in outs:
        prepare_dataset(
            "location", params, str(tmp_path / "root"), str(shared / "data" / "location"), str(out)
        )
    assert _digest(outs[0]) == _digest(outs[1])
    arrays, meta = load_prepared(outs[0])
    assert arrays["x_train"].shape == (2000, 446)
    assert arrays["x_canary"].shape == (1000, 446) and arrays["x_test"].shape == (1505, 446)
    assert meta["num_classes"] == 30 and set(np.unique(arrays["y_train"])) <= set(range(30))
    two = {**params, "classes": [7, 19], "canary_pool": 100, "n_train": None}
    # mirror=None: the verified archive already in root is reused, no network needed
    prepare_dataset("location", two, str(tmp_path / "root"), None, str(tmp_path / "t.npz"))
    t, tmeta = load_prepared(tmp_path / "t.npz")
    # 308 + 254 records carry file labels "8" and "20"
    assert t["y_train"].size + t["y_test"].size + t["y_canary"].size == 308 + 254
    assert tmeta["classes"] == ["8", "20"] and set(t["y_train"].tolist()) == {0, 1}


def test_cli_prepare_data(tmp_path, location_mirror, capsys):
    from dpaudit.cli import main

    m, sha = location_mirror
    out = tmp_path / "cli.npz"
    args = [
        "prepare-data",
        "--name",
        "location",
        "--root",
        str(tmp_path / "root"),
        "--mirror",
        str(tmp_path / "elsewhere"),
        "--mirror",
        str(m),
        "--out",
        str(out),
    ]
    (tmp_path / "elsewhere").mkdir()
    params = json.dumps({"sha256": sha, "n_train": 20, "canary_pool": 5})
    assert main([*args, "--params", params, "--json"]) == 0
    meta = json.loads(capsys.readouterr().out)
    assert meta["n_train"] == 20 and meta["n_canary"] == 5
    bad = json.dumps({"sha256": "0" * 64})
    assert main([*args[:-2], "--out", str(tmp_path / "bad.npz"), "--params", bad]) == 3
    assert "checksum mismatch" in capsys.readouterr().err
    assert not (tmp_path / "bad.npz").exists()
    assert main([*args, "--params", "[1]"]) == 2


# ----------------------------------------------------------------------------- digits (bundled)


def test_digits_prepare_is_real_split_and_reproducible(tmp_path):
    """scikit-learn's bundled digits: a seeded split of the 1797 real images, scaled to [0, 1],
    train/test/canary disjoint, byte-identical when prepared twice."""
    from dpaudit.data.bundled import load_digits

    params = {"seed": 3, "n_train": 500, "n_test": 200, "canary_pool": 50}
    out = tmp_path / "d.npz"
    prepare_dataset("digits", params, str(tmp_path / "root"), None, str(out))
    arrays, meta = load_prepared(out)
    assert arrays["x_train"].shape == (500, 1, 8, 8)
    assert arrays["x_test"].shape == (200, 1, 8, 8) and arrays["x_canary"].shape[0] == 50
    assert 0.0 <= arrays["x_train"].min() and arrays["x_train"].max() == 1.0
    assert meta["num_classes"] == 10 and meta["input_shape"] == [1, 8, 8]
    rows = set(arrays["train_index"]) | set(arrays["test_index"]) | set(arrays["canary_index"])
    assert len(rows) == 750  # file rows, disjoint across the three parts
    src = load_digits()
    i = int(arrays["train_index"][7])
    np.testing.assert_array_equal(arrays["x_train"][7], src["x"][i] / np.float32(16))
    assert arrays["y_train"][7] == src["y"][i]
    out2 = tmp_path / "d2.npz"
    prepare_dataset("digits", params, str(tmp_path / "root"), None, str(out2))
    assert out.read_bytes() == out2.read_bytes()


def test_digits_checksum_mismatch_names_the_file(tmp_path):
    with pytest.raises(ValueError, match="load_digits.*SHA-256"):
        prepare_dataset("digits", {"sha256": "0" * 64}, str(tmp_path), None, str(tmp_path / "x"))


def test_digits_rejects_vision_only_keys(tmp_path):
    with pytest.raises(ValueError, match="normalize"):
        prepare_dataset("digits", {"normalize": True}, str(tmp_path), None, str(tmp_path / "x"))
