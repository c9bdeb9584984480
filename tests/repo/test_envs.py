"""The conda env files pin the same packages, with the same specifiers, as pyproject.toml."""

from __future__ import annotations

import tomllib
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]


def test_envs_agree_with_pyproject():
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    envs = sorted((REPO / "envs").glob("*.yaml"))
    assert envs
    for env in envs:
        spec = yaml.safe_load(env.read_text())
        pip = next(d["pip"] for d in spec["dependencies"] if isinstance(d, dict) and "pip" in d)
        packages = [p for p in pip if p != ".."]
        assert sorted(packages) == sorted(deps), env.name
        assert ".." in pip, f"{env.name} must install dpaudit itself"
        assert any(str(d).startswith("python>=3.11") for d in spec["dependencies"])
