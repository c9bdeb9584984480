"""Downloader (checksums, mirrors, retries, atomicity) and the raw-format loaders.

Small files are written in the data sets' real formats (dpaudit.data.fixtures); torchvision parses
the image files. The real Location-30 archive comes from the shared data folder (the
``shared_data`` fixture of conftest.py): its tests skip on a fresh clone, fail in CI if missing.
"""

from __future__ import annotations

import functools
import hashlib
import http.server
import io
import os
import tarfile
import threading
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from dpaudit.data import fixtures, tabular, vision
from dpaudit.data.download import (
    ChecksumError,
    DownloadError,
    fetch,
    file_digest,
    mirror_sources,
    try_order,
)
from dpaudit.opacus_import import import_torchvision

REPO = Path(__file__).resolve().parents[2]
LOCATION_SHA256 = "927203f85a868f8ee17a0ded1dc61699efe602167beabe34fbf45b4b1de94b33"
UPSTREAM = "https://example.invalid/files/payload.bin"  # never contacted: a mirror replaces it


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".part"))


@pytest.fixture
def payload(tmp_path: Path) -> tuple[Path, bytes]:
    d = tmp_path / "mirror"
    d.mkdir()
    data = os.urandom(3 * 1024 * 1024 + 17)  # > one 1 MiB chunk
    (d / "payload.bin").write_bytes(data)
    return d, data


# ------------------------------------------------------------------ fetch: mirrors


def test_fetch_from_directory_mirror(tmp_path, payload):
    mirror, data = payload
    dest = tmp_path / "out" / "payload.bin"
    got = fetch(UPSTREAM, dest, _sha(data), mirror=str(mirror))
    assert got == dest and dest.read_bytes() == data
    assert _leftovers(dest.parent) == []


def test_fetch_from_file_url_mirror(tmp_path, payload):
    mirror, data = payload
    dest = tmp_path / "out" / "payload.bin"
    fetch(UPSTREAM, dest, _sha(data), mirror=mirror.as_uri() + "/")
    assert dest.read_bytes() == data


def test_fetch_from_http_mirror(tmp_path, payload):
    mirror, data = payload
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(mirror))
    handler.log_message = lambda *a, **k: None  # type: ignore[method-assign]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        dest = tmp_path / "out" / "payload.bin"
        fetch(UPSTREAM, dest, _sha(data), mirror=base)
        assert dest.read_bytes() == data
        # an http 404 from the first mirror falls through to the second
        dest2 = tmp_path / "out2" / "payload.bin"
        fetch(UPSTREAM, dest2, _sha(data), mirror=[f"{base}/nowhere", base])
        assert dest2.read_bytes() == data
        with pytest.raises(DownloadError, match="404"):
            fetch(
                UPSTREAM,
                tmp_path / "out3" / "payload.bin",
                _sha(data),
                mirror=f"{base}/nowhere",
                attempts=1,
            )
    finally:
        server.shutdown()
        server.server_close()


def test_fetch_md5_and_upstream_url_list(tmp_path, payload):
    """A list of upstream URLs (torchvision's MNIST mirrors) is tried in order; md5 works."""
    mirror, data = payload
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "payload.bin").write_bytes(b"corrupt")
    dest = tmp_path / "out" / "payload.bin"
    urls = [(tmp_path / "bad" / "payload.bin").as_uri(), (mirror / "payload.bin").as_uri()]
    fetch(urls, dest, hashlib.md5(data).hexdigest(), "md5")
    assert dest.read_bytes() == data


def test_subdir_is_preferred_and_flat_layout_still_works(tmp_path):
    m = tmp_path / "m"
    (m / "MNIST").mkdir(parents=True)
    (m / "MNIST" / "f.gz").write_bytes(b"mnist")
    (m / "f.gz").write_bytes(b"flat")
    assert mirror_sources(str(m), "f.gz", "MNIST") == [str(m / "MNIST" / "f.gz"), str(m / "f.gz")]
    assert mirror_sources(str(m), "f.gz", "FashionMNIST") == [str(m / "f.gz")]
    dest = tmp_path / "out" / "f.gz"
    fetch("https://x.invalid/f.gz", dest, _sha(b"flat"), mirror=str(m), subdir="Missing")
    assert dest.read_bytes() == b"flat"
    url_sources = mirror_sources("file:///srv/m/", "a b.tgz", "loc")
    assert url_sources == ["file:///srv/m/loc/a%20b.tgz", "file:///srv/m/a%20b.tgz"]


# ------------------------------------------------------------------ fetch: failures


def test_checksum_mismatch_raises_and_leaves_no_file(tmp_path, payload):
    mirror, data = payload
    dest = tmp_path / "out" / "payload.bin"
    wrong = _sha(b"something else")
    with pytest.raises(ChecksumError) as err:
        fetch(UPSTREAM, dest, wrong, mirror=str(mirror))
    msg = str(err.value)
    assert wrong in msg and _sha(data) in msg  # expected and actual
    assert str(mirror / "payload.bin") in msg and "checksum mismatch" in msg
    assert not dest.exists()
    assert _leftovers(dest.parent) == []
    # a local mirror file gives the same bytes every time: read once, never retried
    assert msg.count("checksum mismatch") == 1 and "after 1 try:" in msg
    assert "not retried" in msg


def test_try_order_retries_only_network_sources():
    local, url = "/m/f.gz", "https://h/f.gz"
    assert try_order([local], 3) == [local]
    assert try_order(["file:///m/f.gz"], 3) == ["file:///m/f.gz"]
    assert try_order([local, url], 3) == [local, url, url]
    assert try_order([url, local, "http://g/f.gz"], 5) == [
        url,
        local,
        "http://g/f.gz",
        url,
        "http://g/f.gz",
    ]
    assert try_order([url], 1) == [url]


def test_corrupt_network_download_is_detected_and_retried(tmp_path, payload, monkeypatch):
    """An http(s) source that first delivers corrupt bytes is tried again; one that always does
    is tried ``attempts`` times and reported with both checksums."""
    from dpaudit.data import download

    monkeypatch.setattr(download, "_RETRY_PAUSE", 0.0)
    _, data = payload
    served = []

    class Flaky(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (the http.server API)
            served.append(self.path)
            corrupt = self.path.startswith("/always") or len(served) == 1
            body = data[:-1] + b"x" if corrupt else data
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Flaky)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        dest = tmp_path / "out" / "payload.bin"
        fetch(UPSTREAM, dest, _sha(data), mirror=f"{base}/flaky")
        assert dest.read_bytes() == data and len(served) == 2
        with pytest.raises(ChecksumError) as err:
            fetch(UPSTREAM, tmp_path / "o2" / "payload.bin", _sha(data), mirror=f"{base}/always")
        assert str(err.value).count("checksum mismatch") == 3
        assert _sha(data) in str(err.value) and _sha(data[:-1] + b"x") in str(err.value)
    finally:
        server.shutdown()
        server.server_close()


def test_retry_succeeds_when_first_mirror_corrupt(tmp_path, payload, caplog):
    good, data = payload
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "payload.bin").write_bytes(data[:-1] + bytes([data[-1] ^ 0xFF]))  # differs
    dest = tmp_path / "out" / "payload.bin"
    with caplog.at_level("WARNING", logger="dpaudit.data.download"):
        fetch(UPSTREAM, dest, _sha(data), mirror=[str(bad), str(good)])
    assert dest.read_bytes() == data
    assert any("mismatch" in r.getMessage() and str(bad) in r.getMessage() for r in caplog.records)
    assert _leftovers(dest.parent) == []


def test_missing_everywhere_is_a_download_error_not_checksum(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    dest = tmp_path / "out" / "payload.bin"
    with pytest.raises(DownloadError) as err:
        fetch(UPSTREAM, dest, "0" * 64, mirror=str(empty))
    assert not isinstance(err.value, ChecksumError)
    assert "could not read" in str(err.value) and str(empty / "payload.bin") in str(err.value)
    assert not dest.exists()


def test_existing_good_file_is_kept_and_bad_file_left_alone(tmp_path, payload):
    mirror, data = payload
    dest = tmp_path / "out" / "payload.bin"
    dest.parent.mkdir()
    dest.write_bytes(data)
    empty = tmp_path / "empty"
    empty.mkdir()
    fetch(UPSTREAM, dest, _sha(data), mirror=str(empty))  # no source needed
    fetch(UPSTREAM, dest, _sha(data), mirror=str(tmp_path / "absent"))  # not even resolved
    fetch(UPSTREAM, dest, _sha(data))  # no network contacted either
    assert dest.read_bytes() == data
    # a file with another checksum may be the user's only copy: it is never replaced
    dest.write_bytes(b"stale")
    with pytest.raises(ChecksumError, match="left as it is"):
        fetch(UPSTREAM, dest, _sha(data), mirror=str(mirror))
    assert dest.read_bytes() == b"stale"
    assert _leftovers(dest.parent) == []


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"checksum": "abc"}, "64 hex digits"),
        ({"checksum": "g" * 64}, "64 hex digits"),
        ({"checksum": "0" * 64, "algorithm": "md5"}, "32 hex digits"),
        ({"checksum": "0" * 64, "algorithm": "sha1"}, "unknown checksum algorithm"),
        ({"checksum": "0" * 64, "attempts": 0}, "attempts"),
        ({"checksum": "0" * 64, "mirror": "ftp://host/x"}, "unsupported URL scheme"),
        ({"checksum": "0" * 64, "mirror": []}, "empty"),
    ],
)
def test_bad_inputs(tmp_path, kwargs, match):
    with pytest.raises(ValueError, match=match):
        fetch(UPSTREAM, tmp_path / "x", **kwargs)


def test_missing_mirror_directory_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope"):
        fetch(UPSTREAM, tmp_path / "x", "0" * 64, mirror=str(tmp_path / "nope"))


# ------------------------------------------------------------------ vision (torchvision parses)


def test_mnist_and_fashionmnist_share_one_mirror(tmp_path):
    """Both use the same file names; the sub-folders keep them apart, the MD5s prove it."""
    m = tmp_path / "mirror"
    mn = fixtures.make_mirror(m, "mnist", n_train=20, n_test=10, seed=1)
    fm = fixtures.make_mirror(m, "fashionmnist", n_train=30, n_test=12, seed=2)
    root = tmp_path / "root"
    a = vision.load_vision("mnist", root, str(m), mn["checksums"])
    b = vision.load_vision("fashionmnist", root, m.as_uri(), fm["checksums"])
    assert a["x_train"].shape == (20, 1, 28, 28) and a["x_test"].shape == (10, 1, 28, 28)
    assert b["x_train"].shape == (30, 1, 28, 28) and b["y_test"].shape == (12,)
    assert a["x_train"].dtype == np.uint8 and a["y_train"].dtype == np.int64
    assert sorted(set(a["y_train"].tolist())) == list(range(10))
    assert b["classes"][0] == "T-shirt/top"
    # torchvision layout: compressed and decompressed files in <root>/<Class>/raw
    assert (root / "MNIST" / "raw" / "train-images-idx3-ubyte").is_file()
    assert (root / "FashionMNIST" / "raw" / "t10k-labels-idx1-ubyte.gz").is_file()
    # the idx header carries the real magic numbers
    raw = (root / "MNIST" / "raw" / "train-images-idx3-ubyte").read_bytes()
    assert int.from_bytes(raw[:4], "big") == 2051
    assert int.from_bytes(raw[4:8], "big") == 20
    raw = (root / "MNIST" / "raw" / "train-labels-idx1-ubyte").read_bytes()
    assert int.from_bytes(raw[:4], "big") == 2049


def test_vision_uses_torchvisions_published_md5_by_default(tmp_path):
    """Without overrides the fake files fail torchvision's real MD5s: nothing is placed."""
    m = tmp_path / "mirror"
    fixtures.make_mirror(m, "mnist", n_train=5, n_test=5)
    root = tmp_path / "root"
    with pytest.raises(ChecksumError, match="f68b3c2dcbeaaa9fbdd348bbdeb94873"):
        vision.load_vision("mnist", root, str(m))
    assert not any(p.is_file() for p in (root / "MNIST" / "raw").iterdir())


def test_vision_resources_come_from_torchvision():
    tvd = import_torchvision().datasets

    res = vision.vision_resources("mnist")
    assert [r.md5 for r in res] == [md5 for _, md5 in tvd.MNIST.resources]
    assert res[0].urls == tuple(m + res[0].filename for m in tvd.MNIST.mirrors)
    (cifar,) = vision.vision_resources("cifar10")
    assert (cifar.urls[0], cifar.md5) == (tvd.CIFAR10.url, tvd.CIFAR10.tgz_md5)
    svhn = vision.vision_resources("svhn")
    assert [r.filename for r in svhn] == ["train_32x32.mat", "test_32x32.mat"]
    with pytest.raises(ValueError, match="unknown vision data set"):
        vision.vision_resources("imagenet")


def test_cifar10_python_tarball(tmp_path, monkeypatch):
    tvd = import_torchvision().datasets

    m = tmp_path / "mirror"
    info = fixtures.make_mirror(m, "cifar10", n_train=25, n_test=8, seed=3)
    md5 = info["member_md5"]
    # torchvision re-checks each extracted batch against its own MD5 list: point it at ours.
    monkeypatch.setattr(
        tvd.CIFAR10,
        "train_list",
        [[f"data_batch_{i}", md5[f"data_batch_{i}"]] for i in range(1, 6)],
    )
    monkeypatch.setattr(tvd.CIFAR10, "test_list", [["test_batch", md5["test_batch"]]])
    monkeypatch.setattr(tvd.CIFAR10, "meta", {**tvd.CIFAR10.meta, "md5": md5["batches.meta"]})
    root = tmp_path / "root"
    d = vision.load_vision("cifar10", root, str(m), info["checksums"])
    assert d["x_train"].shape == (25, 3, 32, 32) and d["x_test"].shape == (8, 3, 32, 32)
    assert d["classes"][-1] == "truck"
    assert (root / "cifar-10-batches-py" / "data_batch_5").is_file()
    assert not [p for p in root.iterdir() if p.name.startswith(".extract")]
    # The NCHW layout matches the pickled channel-major rows.
    import pickle

    with open(root / "cifar-10-batches-py" / "data_batch_1", "rb") as f:
        first = pickle.load(f, encoding="latin1")["data"][0]
    np.testing.assert_array_equal(d["x_train"][0].reshape(-1), first)


def test_svhn_mat(tmp_path, monkeypatch):
    tvd = import_torchvision().datasets

    m = tmp_path / "mirror"
    info = fixtures.make_mirror(m, "svhn", n_train=15, n_test=10, seed=4)
    split_list = {
        k: [url, fn, info["checksums"].get(fn, md5)]
        for k, (url, fn, md5) in tvd.SVHN.split_list.items()
    }
    monkeypatch.setattr(tvd.SVHN, "split_list", split_list)
    d = vision.load_vision("svhn", tmp_path / "root", str(m))
    assert d["x_train"].shape == (15, 3, 32, 32) and d["y_test"].shape == (10,)
    assert 0 in d["y_train"] and d["y_train"].max() <= 9  # label 10 became digit 0


# ------------------------------------------------------------------ tables


def test_location_like_archive_from_mirror(tmp_path, monkeypatch):
    m = tmp_path / "mirror"
    info = fixtures.make_mirror(m, "location", n_train=70, n_test=20, seed=5)
    monkeypatch.setitem(
        tabular.TABULAR_DATASETS, "location", replace(tabular.TABULAR_DATASETS["location"], rows=90)
    )
    sha = info["checksums"]["dataset_location.tgz"]
    d = tabular.load_tabular("location", tmp_path / "root", m.as_uri(), sha256=sha)
    assert d["x"].shape == (90, 446) and d["x"].dtype == np.uint8
    assert sorted(set(d["y"].tolist())) == list(range(30))
    # the pinned (real) checksum rejects the fake archive, and nothing is left behind
    with pytest.raises(ChecksumError, match=LOCATION_SHA256):
        tabular.load_tabular("location", tmp_path / "root2", str(m))
    assert not (tmp_path / "root2" / "location" / "dataset_location.tgz").exists()


def test_table_parser_rejects_malformed(tmp_path):
    p = fixtures.write_shokri_table(
        tmp_path / "t.tgz", "bangkok", np.ones((4, 3)), [1, 2, 1, 2], quote_labels=True
    )
    x, y = tabular.parse_table(p, features=3, classes=2)
    assert x.shape == (4, 3) and y.tolist() == [0, 1, 0, 1]
    with pytest.raises(ValueError, match="columns"):
        tabular.parse_table(p, features=4, classes=2)
    with pytest.raises(ValueError, match="exactly 1..3"):
        tabular.parse_table(p, features=3, classes=3)
    with pytest.raises(ValueError, match="rows"):
        tabular.parse_table(p, features=3, classes=2, rows=5)
    q = fixtures.write_shokri_table(tmp_path / "q.tgz", "b", np.full((2, 3), 2), [1, 2], False)
    with pytest.raises(ValueError, match="0/1"):
        tabular.parse_table(q, features=3, classes=2)
    for i, text in enumerate((b'"1",0,x\n', b"1,0,70000\n")):
        bad = tmp_path / f"bad{i}.tgz"
        with tarfile.open(bad, "w:gz") as tar:
            info = tarfile.TarInfo("bangkok")
            info.size = len(text)
            tar.addfile(info, io.BytesIO(text))
        with pytest.raises(ValueError, match="not a comma-separated table of integers"):
            tabular.parse_table(bad, features=2, classes=1)
    two = tmp_path / "two.tgz"
    with tarfile.open(two, "w:gz") as tar:
        tar.add(p, arcname="a")
        tar.add(q, arcname="b")
    with pytest.raises(ValueError, match="exactly one data file"):
        tabular.parse_table(two, features=3, classes=2)


@pytest.mark.parametrize("damage", ["truncated", "not_a_tar", "empty"])
def test_unreadable_table_archive_is_named(tmp_path, damage):
    """An archive that passed a (wrongly given) checksum but is no tar: named, with the fix."""
    p = fixtures.write_shokri_table(
        tmp_path / "t.tgz", "bangkok", np.ones((400, 3)), [1, 2] * 200, True
    )
    raw = p.read_bytes()
    p.write_bytes({"truncated": raw[: len(raw) // 2], "not_a_tar": b"<html>", "empty": b""}[damage])
    with pytest.raises(ValueError, match="not a readable") as err:
        tabular.parse_table(p, features=3, classes=2)
    assert str(err.value).startswith(f"{p}: ") and "delete it and rerun" in str(err.value)


def test_truncated_decompressed_mnist_file_is_decompressed_again(tmp_path):
    """A decompressed raw file newer than its .gz but cut short is redone, not parsed."""
    m = tmp_path / "mirror"
    info = fixtures.make_mirror(m, "mnist", n_train=20, n_test=10, seed=1)
    root = tmp_path / "root"
    first = vision.load_vision("mnist", root, str(m), info["checksums"])
    plain = root / "MNIST" / "raw" / "train-images-idx3-ubyte"
    whole = plain.read_bytes()
    plain.write_bytes(whole[: len(whole) // 2])  # newer than the .gz: mtime alone trusts it
    again = vision.load_vision("mnist", root, str(m), info["checksums"])
    np.testing.assert_array_equal(first["x_train"], again["x_train"])
    assert plain.read_bytes() == whole


def test_unparseable_vision_files_name_the_folder(tmp_path):
    m = tmp_path / "mirror"
    info = fixtures.make_mirror(m, "mnist", n_train=20, n_test=10, seed=1)
    root = tmp_path / "root"
    vision.load_vision("mnist", root, str(m), info["checksums"])
    plain = root / "MNIST" / "raw" / "t10k-labels-idx1-ubyte"
    plain.write_bytes(bytes(plain.stat().st_size))  # right size, no idx header
    with pytest.raises(vision.RawDataError, match="mnist test") as err:
        vision.load_vision("mnist", root, str(m), info["checksums"])
    assert str(err.value).startswith(f"{root}: ") and "rerun" in str(err.value)


def test_unreadable_cifar_archive_is_named(tmp_path):
    m = tmp_path / "mirror"
    m.mkdir()
    (m / "cifar-10-python.tar.gz").write_bytes(b"not a tar archive")
    md5 = hashlib.md5(b"not a tar archive").hexdigest()
    root = tmp_path / "root"
    with pytest.raises(vision.RawDataError, match="not a readable tar archive") as err:
        vision.load_vision("cifar10", root, str(m), {"cifar-10-python.tar.gz": md5})
    assert str(err.value).startswith(str(root / "cifar-10-python.tar.gz"))


def test_purchase_requires_a_sha256(tmp_path):
    with pytest.raises(ValueError, match="sha256"):
        tabular.load_tabular("purchase", tmp_path, str(tmp_path))


def test_real_location30_archive(shared_data):
    """The real archive: pinned sha256, 5,010 x 446 binary features, 30 classes."""
    shared = shared_data
    archive = shared / "data" / "location" / "dataset_location.tgz"
    assert file_digest(archive) == LOCATION_SHA256
    x, y = tabular.parse_table(archive, features=446, classes=30, rows=5010)
    assert x.shape == (5010, 446) and y.shape == (5010,)
    assert np.unique(y).tolist() == list(range(30))
    assert set(np.unique(x).tolist()) == {0, 1}
    # Class sizes of the real file (file labels "1".."30" -> 0..29): smallest is label "5".
    counts = np.bincount(y, minlength=30)
    assert counts.sum() == 5010 and counts.min() == 97 and counts.argmin() == 4
    assert counts.max() == 308 and counts.argmax() == 7


def test_real_location30_through_the_mirror_path(tmp_path, shared_data):
    shared = shared_data
    d = tabular.load_tabular("location", tmp_path, str(shared / "data"))  # subdir 'location'
    assert d["x"].shape == (5010, 446) and d["sources"][0]["sha256"] == LOCATION_SHA256
    placed = tmp_path / "location" / "dataset_location.tgz"
    assert file_digest(placed) == LOCATION_SHA256
