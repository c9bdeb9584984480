"""The checks before a SLURM run submits anything (dpaudit.pipeline.cluster): a status command
that cannot answer and a request no node of its partition meets are reported with their cause,
instead of a run that waits forever. The real cluster's version is in
tests/workflow/test_slurm_cluster.py."""

from __future__ import annotations

import subprocess

import pytest

from dpaudit.pipeline.cluster import (
    Node,
    Request,
    parse_gres,
    parse_sinfo,
    parse_time_limit,
    preflight_problems,
    request_problems,
    status_command_problem,
)

SINFO = "cpu*|2|22900|(null)|infinite\ngpu|16|128000|gpu:a100:4(S:0-1)|2-00:00:00\n"


def req(rule="train", partition=None, cpus=1, mem_mb=1000, gpus=0, gpu_model=None, runtime=60):
    return Request(rule, partition, cpus, mem_mb, gpus, gpu_model, runtime)


def fake_run(answers):
    """A subprocess.run that answers each command (by its program) with (returncode, stdout,
    stderr), or raises the exception given."""

    def run(argv, **kwargs):
        answer = answers[argv[0]]
        if isinstance(answer, BaseException):
            raise answer
        code, out, err = answer
        return subprocess.CompletedProcess(argv, code, out, err)

    return run


def test_time_limits_in_minutes():
    assert parse_time_limit("infinite") is None
    assert parse_time_limit("30") == 30
    assert parse_time_limit("30:01") == 31
    assert parse_time_limit("4:00:00") == 240
    assert parse_time_limit("2-00:00:00") == 2 * 24 * 60
    assert parse_time_limit("1-12") == 36 * 60


def test_gres_counts_gpus_per_model():
    assert parse_gres("(null)") == {}
    assert parse_gres("gpu:2") == {None: 2}
    assert parse_gres("gpu:a100:4(S:0-1),gpu:v100:2") == {"a100": 4, "v100": 2, None: 6}


def test_sinfo_keeps_the_default_mark():
    parts = parse_sinfo(SINFO)
    assert set(parts) == {"cpu*", "gpu"}
    assert parts["gpu"] == [Node(16, 128000, {"a100": 4, None: 4}, 2880)]


def test_requests_that_fit_give_no_problem():
    parts = parse_sinfo(SINFO)
    ok = [
        req(cpus=2, mem_mb=22900),
        req(partition="gpu", cpus=8, gpus=2, gpu_model="a100", runtime=2880),
        req(rule="audit", mem_mb=None, runtime=None),
    ]
    assert request_problems(ok, parts) == []


@pytest.mark.parametrize(
    ("request_", "named"),
    [
        (req(mem_mb=16000 * 2), "compute.training_mem_mb"),
        (req(cpus=4), "compute.threads_per_training_job"),
        (req(gpus=1), "compute.gpus_per_training_job"),
        (req(partition="gpu", gpus=1, gpu_model="h100"), "compute.gpu_model"),
        (req(partition="gpu", runtime=3000), "compute.training_runtime"),
        (req(rule="audit", mem_mb=10**6), "compute.job_mem_mb"),
    ],
)
def test_a_request_no_node_meets_names_the_config_key(request_, named):
    [problem] = request_problems([request_], parse_sinfo(SINFO))
    assert named in problem and "pend forever" in problem and f"rule {request_.rule}" in problem


def test_unknown_partition_and_no_default_are_reported():
    [problem] = request_problems([req(partition="bigmem")], parse_sinfo(SINFO))
    assert "'bigmem' does not exist" in problem
    [problem] = request_problems([req()], parse_sinfo("gpu|16|128000|(null)|infinite\n"))
    assert "no default partition" in problem


def test_one_line_per_rule():
    problems = request_problems(
        [req(cpus=9), req(cpus=9), req(rule="audit", cpus=9)], parse_sinfo(SINFO)
    )
    assert len(problems) == 2


def test_sacct_without_accounting_is_reported_with_the_fix():
    run = fake_run({"sacct": (1, "", "Slurm accounting storage is disabled\n")})
    problem = status_command_problem("sacct", run)
    assert "accounting storage is disabled" in problem and "squeue" in problem


def test_status_command_missing_hanging_or_unknown():
    assert "not installed" in status_command_problem(
        "squeue", fake_run({"squeue": FileNotFoundError()})
    )
    hung = fake_run({"squeue": subprocess.TimeoutExpired("squeue", 60)})
    assert "did not answer" in status_command_problem("squeue", hung)
    assert "allowed" in status_command_problem("qstat", fake_run({}))
    assert status_command_problem("squeue", fake_run({"squeue": (0, "12\n", "")})) is None


def test_preflight_collects_every_problem():
    run = fake_run({"squeue": (0, "", ""), "sinfo": (0, SINFO, "")})
    assert preflight_problems([req()], "squeue", run) == []
    run = fake_run(
        {
            "squeue": (1, "", "slurm_load_jobs error: Unable to contact slurm controller"),
            "sinfo": (1, "", "Unable to contact slurm controller"),
        }
    )
    problems = preflight_problems([req()], "squeue", run)
    assert len(problems) == 2 and all("contact slurm controller" in p for p in problems)
