"""File helpers: atomic writes flushed to disk, YAML reading that names file and line."""

from __future__ import annotations

import os

import pytest

from dpaudit import io


def test_atomic_path_fsyncs_the_file_before_the_rename_and_the_directory_after(
    tmp_path, monkeypatch
):
    events: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        target = os.readlink(f"/proc/self/fd/{fd}") if os.path.exists("/proc/self/fd") else "?"
        events.append(("fsync", target))
        real_fsync(fd)

    def replace(src, dst):
        events.append(("replace", str(dst)))
        real_replace(src, dst)

    monkeypatch.setattr(io.os, "fsync", fsync)
    monkeypatch.setattr(io.os, "replace", replace)
    target = tmp_path / "out.json"
    io.write_json(target, {"a": 1})
    assert target.read_text() == '{\n  "a": 1\n}\n'
    kinds = [kind for kind, _ in events]
    assert kinds == ["fsync", "replace", "fsync"]
    if os.path.exists("/proc/self/fd"):
        assert ".out.json." in events[0][1] and events[0][1].endswith(".tmp")  # the temp file
        assert events[2][1] == str(tmp_path)  # the directory, after the rename


def test_atomic_path_leaves_nothing_on_failure(tmp_path):
    target = tmp_path / "out.csv"
    with pytest.raises(RuntimeError), io.atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("killed")
    assert list(tmp_path.iterdir()) == []


def test_read_yaml_names_the_file_line_and_column(tmp_path):
    good = tmp_path / "good.yaml"
    good.write_text("a: 1\nb: [2, 3]\n")
    assert io.read_yaml(good) == {"a": 1, "b": [2, 3]}
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: 1\nb: [2, 3\nc: 4\n")
    with pytest.raises(ValueError, match=r"bad.yaml: not valid YAML \(line \d+, column \d+: "):
        io.read_yaml(bad)
    tabs = tmp_path / "tabs.yaml"
    tabs.write_text("a:\n\t- 1\n")
    with pytest.raises(ValueError, match=r"tabs.yaml: not valid YAML \(line 2, column 1: "):
        io.read_yaml(tabs)
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"\xff\xfe\x00junk")
    with pytest.raises(ValueError, match=r"bin.yaml: not a text file"):
        io.read_yaml(binary)
    with pytest.raises(FileNotFoundError, match="gone.yaml"):
        io.read_yaml(tmp_path / "gone.yaml")


def test_atomic_path_onto_a_directory_names_it(tmp_path):
    with pytest.raises(IsADirectoryError, match="is a directory") as info, io.atomic_path(
        tmp_path
    ):
        pass
    assert info.value.filename == str(tmp_path)
    assert list(tmp_path.parent.glob(f".{tmp_path.name}.*.tmp")) == []
