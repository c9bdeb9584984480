"""No failure of the downloader deletes or overwrites a file the user placed (issue 30, point 2).

The data root may be the mirror folder itself, or hold the user's own copy; a mistyped checksum
(Purchase-100 has none pinned) must then leave that file byte-identical and say what to fix.
Small archives in the real format come from dpaudit.data.fixtures, as in test_data_download.py.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import replace

import pytest

from dpaudit.data import download, fixtures, tabular
from dpaudit.data.download import ChecksumError, fetch

WRONG = "0123456789abcdef" * 4  # a well-formed but wrong SHA-256
UPSTREAM = "https://example.invalid/files/payload.bin"  # never contacted: a mirror replaces it


@pytest.fixture
def mirror(tmp_path, monkeypatch):
    """A Location-format mirror with sub-folder layout, and the fixture's row count."""
    m = tmp_path / "mirror"
    info = fixtures.make_mirror(m, "location", n_train=70, n_test=20, seed=5)
    monkeypatch.setitem(
        tabular.TABULAR_DATASETS, "location", replace(tabular.TABULAR_DATASETS["location"], rows=90)
    )
    return m, info["checksums"]["dataset_location.tgz"]


def _no_temporaries(folder) -> bool:
    return not [p for p in folder.iterdir() if p.name.startswith(".") and ".part" in p.name]


def test_mirror_folder_as_data_root_survives_a_wrong_sha256(mirror):
    m, good = mirror
    archive = m / "location" / "dataset_location.tgz"
    before = archive.read_bytes()
    with pytest.raises(ChecksumError) as err:
        tabular.load_tabular("location", m, m, sha256=WRONG)  # root == mirror
    assert archive.read_bytes() == before  # byte-identical, not deleted
    msg = str(err.value)
    assert str(archive) in msg and WRONG in msg and good in msg
    assert "experiments.<experiment>.dataset.sha256" in msg and "delete" in msg
    assert "No such file" not in msg
    assert _no_temporaries(archive.parent)
    # the right checksum then works on the same, untouched file
    assert tabular.load_tabular("location", m, m, sha256=good)["x"].shape == (90, 446)


def test_users_own_copy_is_not_deleted_even_when_the_mirror_has_the_right_file(tmp_path, mirror):
    m, good = mirror
    own = tmp_path / "root" / "location" / "dataset_location.tgz"
    own.parent.mkdir(parents=True)
    own.write_bytes(b"the user's own, different archive")
    with pytest.raises(ChecksumError) as err:
        tabular.load_tabular("location", tmp_path / "root", m, sha256=good)
    assert own.read_bytes() == b"the user's own, different archive"
    msg = str(err.value)
    assert str(own) in msg and good in msg
    assert hashlib.sha256(b"the user's own, different archive").hexdigest() in msg
    assert "dataset.sha256" in msg and "left as it is" in msg


def test_pinned_checksum_mismatch_names_the_override_key(tmp_path, mirror):
    m, _ = mirror
    with pytest.raises(ChecksumError) as err:
        tabular.load_tabular("location", tmp_path / "root", m)  # the real pinned SHA-256
    msg = str(err.value)
    assert "override: dataset.sha256" in msg and tabular.TABULAR_DATASETS["location"].sha256 in msg
    assert not (tmp_path / "root" / "location" / "dataset_location.tgz").exists()


def test_a_file_placed_during_the_download_is_not_overwritten(tmp_path, monkeypatch):
    """The verified download goes in with os.link, which fails on an existing file; that file
    is then checked like a pre-existing one and kept."""
    src = tmp_path / "mirror"
    src.mkdir()
    (src / "payload.bin").write_bytes(b"good bytes")
    dest = tmp_path / "out" / "payload.bin"
    real_copy = download._copy_source

    def copy_then_user_writes(source, fh, algorithm, timeout):
        digest = real_copy(source, fh, algorithm, timeout)
        dest.write_bytes(b"placed meanwhile")
        return digest

    monkeypatch.setattr(download, "_copy_source", copy_then_user_writes)
    good = hashlib.sha256(b"good bytes").hexdigest()
    with pytest.raises(ChecksumError, match="left as it is"):
        fetch(UPSTREAM, dest, good, mirror=str(src))
    assert dest.read_bytes() == b"placed meanwhile"
    assert sorted(os.listdir(dest.parent)) == ["payload.bin"]


def test_mirror_mismatch_message_names_the_key_and_both_checksums(tmp_path):
    src = tmp_path / "mirror"
    src.mkdir()
    (src / "payload.bin").write_bytes(b"bytes")
    dest = tmp_path / "out" / "payload.bin"
    with pytest.raises(ChecksumError) as err:
        fetch(UPSTREAM, dest, WRONG, mirror=str(src), checksum_key="config key x.sha256")
    msg = str(err.value)
    assert WRONG in msg and hashlib.sha256(b"bytes").hexdigest() in msg
    assert "config key x.sha256" in msg and str(src / "payload.bin") in msg
    assert (src / "payload.bin").read_bytes() == b"bytes" and not dest.exists()


def test_a_part_file_left_by_a_killed_fetch_is_removed_by_the_next(tmp_path):
    from dpaudit.io import _host

    src = tmp_path / "mirror"
    src.mkdir()
    (src / "payload.bin").write_bytes(b"good bytes")
    dest = tmp_path / "out" / "payload.bin"
    dest.parent.mkdir()
    stale = dest.parent / f".payload.bin.dpaudit-{_host()}-{2**22 + 7}-abc12345.part"
    stale.write_bytes(b"go")  # its writer (a pid above any pid_max) is gone
    fetch(UPSTREAM, dest, hashlib.sha256(b"good bytes").hexdigest(), mirror=str(src))
    assert sorted(os.listdir(dest.parent)) == ["payload.bin"]
