"""End to end on a real SLURM (.ci/slurm-up): config/test.yaml through profiles/slurm (with the
CI cluster's profiles/slurm-ci) gives byte-identical score files and tables to a local run, and
the resources of the config reach the sbatch calls.

Needs a running cluster (sinfo answers): CI starts one and sets DPAUDIT_REQUIRE_SLURM=1, which
turns a missing cluster into a failure instead of a skip.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from tests.slurm_run import copy_repo, result_files, snakemake

SLURM_ARGS = ("--profile", "profiles/slurm", "--workflow-profile", "profiles/slurm-ci")


def _cluster_up() -> bool:
    if shutil.which("sinfo") is None:
        return False
    done = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True)
    return done.returncode == 0 and any(s in done.stdout for s in ("idle", "mixed", "allocated"))


@pytest.fixture(scope="module")
def cluster():
    if not _cluster_up():
        if os.environ.get("DPAUDIT_REQUIRE_SLURM") == "1":
            pytest.fail("DPAUDIT_REQUIRE_SLURM=1 but no SLURM cluster answers (run .ci/slurm-up)")
        pytest.skip("no SLURM cluster (start one with .ci/slurm-up as root)")


def sbatch_calls(log: str) -> list[str]:
    """The sbatch command lines the plugin logged (snakemake --verbose)."""
    return [
        line.split("sbatch call: ", 1)[1] for line in log.splitlines() if "sbatch call: " in line
    ]


def sbatch_option(call: str, flag: str) -> str | None:
    """The value of ``flag`` (``-t``, ``--mem``, ``--cpus-per-task=``) in one sbatch call,
    before the wrapped command."""
    head = call.split("--wrap", 1)[0]
    m = re.search(rf"(?:^|\s){re.escape(flag)}(?:\s+|=)(\S+)", head)
    return m.group(1) if m else None


def test_sbatch_option_parsing():
    call = "sbatch --parsable -p cpu -t 120 --mem 8000 --ntasks=1 --cpus-per-task=2 --wrap='x -t 9'"
    assert sbatch_option(call, "-t") == "120"
    assert sbatch_option(call, "--mem") == "8000"
    assert sbatch_option(call, "--cpus-per-task") == "2"
    assert sbatch_option(call, "--gpus") is None


@pytest.mark.slow
def test_test_config_on_slurm_matches_a_local_run(cluster, tmp_path):
    # resources from the config, so that the test sees them arrive (not the schema defaults);
    # a config file, since `--config compute={...}` hands the nested values over as strings
    config = ("--configfile", "config/test.yaml", "compute.yaml")
    compute = ()
    slurm_dir, local_dir = copy_repo(tmp_path / "slurm"), copy_repo(tmp_path / "local")
    for where in (slurm_dir, local_dir):
        (where / "compute.yaml").write_text(
            "compute: {job_runtime: 11, job_mem_mb: 1500, training_runtime: 13, "
            "training_mem_mb: 1700}\n"
        )
    t_slurm, run = snakemake(slurm_dir, *SLURM_ARGS, "--verbose", *compute, *config)
    assert run.returncode == 0, run.stderr[-4000:]
    t_local, local = snakemake(local_dir, "--cores", "2", *compute, *config)
    assert local.returncode == 0, local.stderr[-4000:]
    print(f"config/test.yaml: local {t_local:.0f} s, SLURM {t_slurm:.0f} s")

    calls = sbatch_calls(run.stderr + run.stdout)
    assert 0 < len(calls) <= 12, f"{len(calls)} sbatch jobs"
    for call in calls:
        runtime, mem = int(sbatch_option(call, "-t")), int(sbatch_option(call, "--mem"))
        cpus = int(sbatch_option(call, "--cpus-per-task"))
        assert 1 <= cpus <= 2, call
        # a group job asks for the sum of its rounds' runtimes and the memory of its widest round
        assert any((runtime - 13 * b) % 11 == 0 for b in range(runtime // 13 + 1)), call
        assert mem in (1500, 1700, 3000, 3200, 3400), call

    a, b = result_files(slurm_dir), result_files(local_dir)
    assert sorted(a) == sorted(b)
    assert any(k.endswith(".npz") for k in a) and "reproduction.md" in a
    differ = [k for k in a if a[k] != b[k]]
    assert not differ, f"differ between SLURM and local: {differ[:10]}"
