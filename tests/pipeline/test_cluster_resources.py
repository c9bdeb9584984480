"""What jobs ask the scheduler for (dpaudit.pipeline.resources) and where training runs
(dpaudit.training.device.training_device)."""

from __future__ import annotations

import logging

from dpaudit.config import load_schema, validate_config
from dpaudit.pipeline.resources import job_resources, training_resources
from dpaudit.training.device import training_device


def _config(**compute):
    config = {"compute": dict(compute)}
    validate_config(config, load_schema(), require_experiments=False)
    return config


def test_schema_defaults_reach_the_resources():
    config = _config()
    assert training_resources(config) == {"runtime": 240, "mem_mb": 4000, "gpu": 0}
    assert job_resources(config) == {"runtime": 30, "mem_mb": 4000}


def test_config_values_reach_the_resources():
    config = _config(
        training_runtime=17,
        training_mem_mb=1234,
        gpus_per_training_job=2,
        gpu_model="a100",
        job_runtime=5,
        job_mem_mb=321,
    )
    assert training_resources(config) == {
        "runtime": 17,
        "mem_mb": 1234,
        "gpu": 2,
        "gpu_model": "a100",
    }
    assert job_resources(config) == {"runtime": 5, "mem_mb": 321}


def test_gpu_model_without_gpus_asks_for_no_gpu():
    # the plugin would turn gpu_model with gpu=0 into --gpus=a100:0
    res = training_resources(_config(gpu_model="a100"))
    assert res["gpu"] == 0 and "gpu_model" not in res


def test_bad_resource_value_names_the_key():
    import pytest

    from dpaudit.config import ConfigError

    with pytest.raises(ConfigError, match="training_mem_mb"):
        _config(training_mem_mb=0)


def test_slurm_job_without_gpu_stays_on_the_cpu():
    env = {"SLURM_JOB_ID": "7"}
    assert training_device("auto", 0, env, cuda_available=True) == "cpu"
    # outside SLURM, auto keeps picking a visible GPU
    assert training_device("auto", 0, {}, cuda_available=True) == "cuda"


def test_gpu_job_uses_the_allocated_gpu():
    env = {"SLURM_JOB_ID": "7", "CUDA_VISIBLE_DEVICES": "3"}
    assert training_device("auto", 1, env, cuda_available=True) == "cuda"


def test_gpu_job_without_visible_gpu_falls_back_to_cpu_with_a_warning(caplog):
    env = {"SLURM_JOB_ID": "7", "CUDA_VISIBLE_DEVICES": ""}
    with caplog.at_level(logging.WARNING):
        assert training_device("auto", 1, env, cuda_available=False) == "cpu"
    assert "no GPU is visible" in caplog.text and "gpus_per_training_job" in caplog.text


def test_named_device_is_kept():
    assert training_device("cuda:1", 0, {"SLURM_JOB_ID": "7"}, cuda_available=False) == "cuda:1"
