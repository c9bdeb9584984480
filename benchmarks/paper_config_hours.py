"""Core-hours (and GPU-hours at a stated rate) of a paper config from measured per-kind costs.

    python benchmarks/paper_config_hours.py config/paper/X_training.yaml ... \
        --costs costs.json [more.json ...] [--gpu-ms 0.164] [--speedup 150]

``--costs``: the rows ``benchmarks/paper_job_costs.py --json`` wrote (one per kind of job,
seconds per example and step of one model; a tuning kind's per trial); a kind measured in a
later file (a re-run at more ``--steps``) takes that file's row. A rate below zero (a kind
too cheap to resolve: the noise of a job's fixed costs exceeds its steps' time) counts as 0,
and is listed. Every training setting
of the config takes the cost of its kind (:func:`dpaudit.pipeline.miniature.setting_kind`);
its jobs cost :func:`dpaudit.pipeline.preflight.cpu_seconds` each (steps x batch x models x
the rate), and a setting has ``len(seeds) x shards`` jobs. Per experiment it prints the jobs,
the CPU core-hours at the measured rate, and GPU-hours: at ``--gpu-ms`` (a GPU rate, ms per
example and step, where one was measured) and/or the CPU hours divided by ``--speedup`` (an
assumed GPU-over-one-core speed-up, labelled as such).

A tuning kind's measured trial trains K candidate runs (K drawn as the job draws it:
:func:`dpaudit.training.tuning.plan_for_job` with one trial, seed 0, shard 0); its rate is
divided by that K (``paper_job_costs.measured_runs``) to give the rate of one run, which
``cpu_seconds`` multiplies by the runs a job trains (trials x E[K]).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))


def per_run_costs(config: dict[str, Any], rows: list[dict]) -> dict[Any, Any]:
    """Kind -> :class:`~dpaudit.pipeline.preflight.JobCost` of one model (one run)."""
    from paper_job_costs import measured_runs

    from dpaudit.pipeline import miniature
    from dpaudit.pipeline.preflight import JobCost

    kinds = miniature.job_kinds(config)
    first = {jobs[0]: kind for kind, jobs in kinds.items()}
    out = {}
    for row in rows:
        kind = first.get((row["experiment"], row["setting"]))
        if kind is None:
            continue
        runs = measured_runs(config, row["experiment"], row["setting"])
        rate = max(0.0, row["s_per_example_step"] / runs)
        out[kind] = JobCost(row["mb_per_example"], row["intercept_mb"], rate)
    missing = [miniature.describe_kind(k) for k in kinds if k not in out]
    if missing:
        raise ValueError(f"no measured row for the kinds {missing}")
    return out


def experiment_hours(config: dict[str, Any], rows: list[dict]) -> dict[str, dict[str, float]]:
    """Experiment -> settings, jobs, models and CPU core-hours by the measured costs."""
    from dpaudit.pipeline import miniature, preflight
    from dpaudit.pipeline.settings import setting_experiment

    costs = per_run_costs(config, rows)
    out: dict[str, dict[str, float]] = {}
    for name, setting, kind in miniature.training_settings(config):
        block = setting_experiment(config["experiments"][name], setting)
        jobs = len(block["seeds"]) * int(block["shards"])
        cost = costs[kind]
        seconds = preflight.cpu_seconds(config, block, cost)
        e = out.setdefault(name, {"settings": 0, "jobs": 0, "cpu_hours": 0.0, "examples": 0.0})
        e["settings"] += 1
        e["jobs"] += jobs
        e["cpu_hours"] += jobs * seconds / 3600
        # example-steps of one run each: what a GPU rate (ms per example and step) multiplies
        e["examples"] += jobs * preflight.cpu_seconds(
            config, block, dataclasses.replace(cost, s_per_example_step=1.0)
        )
    return out


def main() -> None:
    from paper_job_costs import load_paper

    from dpaudit.pipeline import miniature

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("configs", nargs="+", type=Path)
    ap.add_argument("--costs", type=Path, nargs="+", required=True)
    ap.add_argument("--gpu-ms", type=float, default=None, help="a GPU's ms per example-step")
    ap.add_argument("--speedup", type=float, nargs="*", default=[], help="assumed GPU/core ratio")
    args = ap.parse_args()
    latest: dict[tuple[str, str, str], dict] = {}
    for path in args.costs:
        for row in json.loads(path.read_text()):
            latest[row["config"], row["experiment"], row["setting"]] = {**row, "file": path.name}
    rows = list(latest.values())
    for paper in args.configs:
        config = load_paper(paper)
        mine = [r for r in rows if r["config"] == paper.name]
        costs = per_run_costs(config, mine)
        first = {jobs[0]: kind for kind, jobs in miniature.job_kinds(config).items()}
        for row in mine:
            kind = first[row["experiment"], row["setting"]]
            rate = costs[kind].s_per_example_step
            print(
                f"{paper.name} | {row['experiment']}/{row['setting']} ({row['file']}) | "
                f"{rate * 1e3:.4f} ms per example-step of one run"
                + (" (measured below 0: counted as 0)" if row["s_per_example_step"] < 0 else "")
            )
        total = 0.0
        for name, e in experiment_hours(config, mine).items():
            total += e["cpu_hours"]
            extra = "".join(
                f" | {e['cpu_hours'] / s:,.1f} GPU-h at an assumed {s:g}x" for s in args.speedup
            )
            if args.gpu_ms is not None:
                extra += f" | {e['examples'] * args.gpu_ms / 3.6e6:,.1f} GPU-h at {args.gpu_ms} ms"
            print(
                f"{paper.name} | {name}: {e['settings']:.0f} settings, {e['jobs']:,.0f} jobs, "
                f"{e['cpu_hours']:,.0f} CPU core-hours{extra}"
            )
        extra = "".join(f" | {total / s:,.1f} GPU-h at an assumed {s:g}x" for s in args.speedup)
        print(f"{paper.name} | total {total:,.0f} CPU core-hours{extra}")


if __name__ == "__main__":
    main()
