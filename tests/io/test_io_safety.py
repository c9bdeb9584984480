"""Atomic writes under failure: a full disk names the destination, a SIGKILLed writer's
temporary file is cleaned by the next write (issue 30, point 9)."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dpaudit import io

REPO = Path(__file__).resolve().parents[2]


def _temporaries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith((".tmp", ".part")))


def test_disk_full_during_the_write_names_the_destination_and_removes_the_temporary(
    tmp_path, monkeypatch
):
    target = tmp_path / "out" / "audit.json"
    io.write_json(target, {"old": 1})
    real_write_text = Path.write_text

    def full_disk(self, data, *args, **kwargs):
        real_write_text(self, data[:3], *args, **kwargs)  # part of it reached the disk
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_text", full_disk)
    with pytest.raises(OSError) as err:
        io.write_json(target, {"new": 2})
    assert err.value.errno == errno.ENOSPC
    assert str(target) in str(err.value) and "No space left on device" in str(err.value)
    assert _temporaries(target.parent) == []
    monkeypatch.undo()
    assert json.loads(target.read_text()) == {"old": 1}  # the previous output is intact


@pytest.mark.parametrize("stage", ["_fsync_file", "replace"])
def test_disk_full_at_flush_or_rename_names_the_destination(tmp_path, monkeypatch, stage):
    def fail(*args, **kwargs):
        raise OSError(errno.EDQUOT if stage == "replace" else errno.ENOSPC, "quota or disk")

    if stage == "replace":
        monkeypatch.setattr(io.os, "replace", fail)
    else:
        monkeypatch.setattr(io, stage, fail)
    target = tmp_path / "table.csv"
    with pytest.raises(OSError) as err:
        with io.atomic_path(target) as tmp:
            tmp.write_text("a,b\n1,2\n")
    assert str(target) in str(err.value)
    assert err.value.errno in (errno.ENOSPC, errno.EDQUOT)
    assert list(tmp_path.iterdir()) == []


WRITER = textwrap.dedent(
    """
    import sys, time
    from dpaudit.io import atomic_path
    with atomic_path(sys.argv[1]) as tmp:
        with open(tmp, "w") as fh:
            fh.write("half of the output")
            fh.flush()
        print("written", flush=True)
        time.sleep(120)
    """
)


def test_a_writer_killed_with_sigkill_leaves_a_temporary_the_rerun_removes(tmp_path):
    target = tmp_path / "scores" / "seed0.json"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(target)], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert proc.stdout.readline().strip() == "written"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    left = _temporaries(target.parent)
    assert len(left) == 1 and not target.exists()
    assert left[0].startswith(f".{target.name}.dpaudit-") and f"-{proc.pid}-" in left[0]
    io.write_json(target, {"complete": True})  # the rerun
    assert json.loads(target.read_text()) == {"complete": True}
    assert _temporaries(target.parent) == []


def test_temporaries_of_live_writers_other_hosts_and_other_files_are_kept(tmp_path):
    target = tmp_path / "out.json"
    host = io._host()
    keep = [
        f".out.json.dpaudit-{host}-{os.getpid()}-abc12345.tmp",  # a live writer (this process)
        f".out.json.dpaudit-otherhost-{os.getpid() + 10**7}-abc12345.tmp",  # another machine
        f".other.json.dpaudit-{host}-{2**22 + 7}-abc12345.tmp",  # another destination
        ".out.json.abc12345.tmp",  # not named by dpaudit
    ]
    for name in keep:
        (tmp_path / name).write_text("x")
    stale = tmp_path / f".out.json.dpaudit-{host}-{2**22 + 7}-abc12345.tmp"  # pid beyond pid_max
    stale.write_text("x")
    io.write_json(target, {"a": 1})
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*keep, "out.json"])


def test_issue36_item9_a_temporary_that_cannot_be_created_names_the_destination(
    tmp_path, monkeypatch
):
    """Issue 36, item 9: the temporary was created outside the guarded block, so a folder
    that is not writable raised a bare PermissionError naming the hidden temporary."""
    target = tmp_path / "scores" / "seed0.shard0.npz"
    target.parent.mkdir()

    def denied(prefix: str, suffix: str, dir: Path):  # what mkstemp raises in such a folder
        raise PermissionError(errno.EACCES, "Permission denied", str(Path(dir, prefix + suffix)))

    monkeypatch.setattr(io.tempfile, "mkstemp", denied)
    for write in (lambda: io.write_json(target, {}), lambda: io.check_writable(target)):
        with pytest.raises(PermissionError) as err:
            write()
        message = str(err.value)
        assert message.startswith(f"[Errno {errno.EACCES}] cannot write {target} ")
        assert f"Permission denied in folder {str(target.parent)!r}" in message
        assert io.TEMP_MARKER not in message  # the hidden temporary is not the user's business
    assert list(target.parent.iterdir()) == []


def test_issue36_item9_a_destination_below_a_file_names_the_destination(tmp_path):
    """Issue 36, item 9: the folder of the output cannot be made (a file stands in its way)."""
    (tmp_path / "results").write_text("not a folder")
    target = tmp_path / "results" / "x" / "audit.csv"
    for write in (lambda: io.write_json(target, {}), lambda: io.check_writable(target)):
        with pytest.raises(NotADirectoryError, match=f"cannot write {target} "):
            write()


def test_issue36_item9_a_training_job_checks_its_score_file_before_training(
    tmp_path, monkeypatch
):
    """Issue 36, item 9: an unwritable score folder was found only after the whole training."""
    from dpaudit.data.synthetic import make_synthetic
    from dpaudit.training import shard
    from dpaudit.training.job import train_job

    def trained(*args, **kwargs):
        raise AssertionError("the training ran before the score file's folder was checked")

    monkeypatch.setattr(shard, "run_shard", trained)
    (tmp_path / "scores").write_text("a file where the score folder should be")
    out = tmp_path / "scores" / "seed0.shard0.npz"
    spec = {
        "design": "one_run",
        "threat_model": "black_box_loss",
        "model": {"name": "mlp", "hidden": [8]},
        "canaries": {"type": "random_input", "m": 12, "scale": 6.0, "seed": 0},
        "train": {
            "engine": "auto",
            "epochs": 1,
            "batch_size": 40,
            "lr": 0.5,
            "max_grad_norm": 1.0,
            "delta": 1e-5,
            "models_per_shard": 2,
        },
        "target_epsilon": 8.0,
    }
    data = make_synthetic(n_train=120, n_test=40, n_features=10, n_classes=3, seed=0)
    with pytest.raises(FileExistsError, match=f"cannot write {out} .File exists: "):
        train_job(data, experiment="e", setting="s", seed=0, shard=0, run_spec=spec, out=out)
