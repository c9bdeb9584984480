"""Run the miniature of paper configs end to end: one job of every kind of training job, its
audit, tables, figures, paper targets, reproduction rows and the report
(:mod:`dpaudit.pipeline.miniature`).

    python benchmarks/paper_miniature.py [config/paper/X_training.yaml ...] \
        [--workdir DIR] [--device cpu|cuda] [--cores N] [--preload FILE.py]

For each config (default: every ``config/paper/*_training.yaml``) it copies the workflow into
``<workdir>/<config stem>/`` with the default config's experiments left out (its other keys,
estimators included, kept), writes small files in the real formats of the config's data sets
into a mirror (:func:`dpaudit.data.fixtures.make_mirror`), writes the overlay
(``miniature.yaml``), runs ``snakemake --cores N --configfile <paper config> miniature.yaml``
(the default target: every result and the report) and checks the outputs: a score file of
every kind, finite; an audit row of every training setting with a finite bound; every figure
and paper target; every reproduction row. It prints the kinds, the time and the checks, and
exits 1 when the run or a check fails.

Fake data and real checks: torchvision re-checks the CIFAR-10 batch files against the MD5s it
publishes, and the table loader checks the published row count (Purchase-100: 197,324 rows).
Small fake files cannot match either, so every Python process of the run imports a
``sitecustomize`` (on ``PYTHONPATH``) that, after those modules load, swaps in the fake
files' MD5s and row counts; everything else (the download through the mirror, its checksum
check, torchvision's parse, the preparation) runs as at paper scale. ``--preload FILE`` runs
FILE in every process too (tests/workflow/test_paper_miniature.py plants faults with it).
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from dpaudit.config import load_config_file, validate_config  # noqa: E402
from dpaudit.data import fixtures  # noqa: E402
from dpaudit.pipeline import miniature  # noqa: E402
from dpaudit.pipeline import targets as pipeline_targets  # noqa: E402

#: What the workflow copy needs (everything else of the checkout stays behind).
WORKFLOW = ("Snakefile", "rules", "scripts", "dpaudit", "config", "report", "envs", "profiles")
#: Size of each fake data set's splits (tables: rows of the one file); a two-class subset
#: (the shuffling paper's FashionMNIST and CIFAR-10) keeps a fifth of a ten-class split.
MIRROR_SIZES = {"vision": (400, 200), "tabular": (160, 40)}

SHIM = '''"""The miniature's fake-data shim (benchmarks/paper_miniature.py): after torchvision's
CIFAR-10 module and dpaudit.data.tabular load, use the fake files' MD5s and row counts."""
import dataclasses
import sys

CIFAR_MD5 = {cifar_md5!r}
TABLE_ROWS = {table_rows!r}
PRELOAD = {preload!r}


def _cifar(module):
    cls = module.CIFAR10
    cls.train_list = [[f"data_batch_{{i}}", CIFAR_MD5[f"data_batch_{{i}}"]] for i in range(1, 6)]
    cls.test_list = [["test_batch", CIFAR_MD5["test_batch"]]]
    cls.meta = {{**cls.meta, "md5": CIFAR_MD5["batches.meta"]}}


def _tabular(module):
    for name, rows in TABLE_ROWS.items():
        spec = module.TABULAR_DATASETS[name]
        module.TABULAR_DATASETS[name] = dataclasses.replace(spec, rows=rows)


PATCHES = {{"dpaudit.data.tabular": _tabular}}
if CIFAR_MD5:
    PATCHES["torchvision.datasets.cifar"] = _cifar


class _AfterImport:
    """A meta-path finder that runs PATCHES[name] right after module ``name`` executes."""

    def find_spec(self, name, path=None, target=None):
        if name not in PATCHES:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        run = spec.loader.exec_module

        def exec_module(module, run=run, patch=PATCHES[name]):
            run(module)
            patch(module)

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _AfterImport())
if PRELOAD:
    exec(compile(open(PRELOAD).read(), PRELOAD, "exec"), {{"__name__": "miniature_preload"}})
'''


def _copy_workflow(dest: Path) -> None:
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in WORKFLOW:
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=ignore)
        else:
            shutil.copy2(src, dest / name)
    base = load_config_file(dest / "config" / "config.yaml")
    base.pop("experiments", None)  # only the paper config's experiments run
    (dest / "config" / "config.yaml").write_text(yaml.safe_dump(base, sort_keys=False))


def _merged(copy: Path, paper: Path) -> dict:
    from snakemake.utils import update_config

    config = load_config_file(copy / "config" / "config.yaml")
    update_config(config, load_config_file(paper))
    return validate_config(config, cross_checks=False)


def prepare(paper: Path, work: Path, device: str, preload: Path | None) -> tuple[Path, dict]:
    """Write the workflow copy, the mirror, the overlay and the shim; return the copy and the
    merged paper config."""
    copy = work / "workflow"
    _copy_workflow(copy)
    config = _merged(copy, paper)
    mirror = work / "mirror"
    checksums: dict[str, dict] = {}
    cifar_md5: dict[str, str] = {}
    table_rows: dict[str, int] = {}
    for seed, name in enumerate(miniature.mirror_datasets(config)):
        tabular = name in ("location", "purchase")
        n_train, n_test = MIRROR_SIZES["tabular" if tabular else "vision"]
        info = fixtures.make_mirror(mirror, name, n_train=n_train, n_test=n_test, seed=seed)
        if tabular:
            checksums[name] = {"sha256": info["checksums"][f"dataset_{name}.tgz"]}
            table_rows[name] = n_train + n_test
        else:
            checksums[name] = {"checksums": info["checksums"]}
            cifar_md5.update(info.get("member_md5") or {})
    overlay = miniature.miniature_overlay(config, str(mirror), checksums, device)
    (copy / "miniature.yaml").write_text(yaml.safe_dump(overlay, sort_keys=False))
    shim = work / "shim"
    shim.mkdir(exist_ok=True)
    (shim / "sitecustomize.py").write_text(
        SHIM.format(
            cifar_md5=cifar_md5,
            table_rows=table_rows,
            preload=str(preload.resolve()) if preload else None,
        )
    )
    return copy, config


def _snakemake_config(copy: Path, paper: Path) -> dict:
    from snakemake.utils import update_config

    config = _merged(copy, paper)
    update_config(config, load_config_file(copy / "miniature.yaml"))
    return validate_config(config, cross_checks=False)


#: Columns whose values the miniature changes (the last part of its keys: ``batch_size``, ...).
SHRUNK = {key.rsplit(".", 1)[-1] for key in miniature.MINI}


def _comparable_checks(config: dict) -> list[tuple[str, dict]]:
    """The reproduction checks of train experiments with a printed number whose rows the
    miniature trains: no ``target_epsilon`` in their ``where``, or one the miniature keeps, and
    no column whose value the miniature shrinks."""
    experiments = config["experiments"]
    out = []
    for name, block in experiments.items():
        if block["kind"] != "train":  # a derived value (LiDP Table 1's factor of trials saved)
            continue  # is undefined where 4 trials give a bound of 0: the row need only exist
        kept = {float(e) for e in block["train"]["target_epsilons"]}
        for check in block.get("reproduce") or []:
            where = check.get("where") or {}
            eps = where.get("target_epsilon")
            if "paper" not in check or (eps is not None and float(eps) not in kept):
                continue
            if set(where) & SHRUNK:  # names a value the miniature shrinks (batch_size 100)
                continue
            out.append((name, check))
    return out


def verify(copy: Path, paper: Path) -> tuple[list[str], dict]:
    """Check the outputs of a finished miniature; (problems, counts)."""
    import numpy as np
    import pandas as pd

    from dpaudit import scores

    config = _snakemake_config(copy, paper)
    problems: list[str] = []
    kinds = miniature.job_kinds(config)
    counts = {"kinds": len(kinds), "score_files": 0, "audit_rows": 0, "figures": 0}
    for kind, jobs in kinds.items():
        found = 0
        for exp, setting in jobs:
            for path in pipeline_targets.setting_score_files(config, exp, setting):
                sf = scores.read(copy / path)  # validates: finite scores, 0/1 membership
                found += 1
                if not np.isfinite(sf.score).all():
                    problems.append(f"{path}: non-finite scores")
        counts["score_files"] += found
        if not found:
            problems.append(f"no score file of kind {miniature.describe_kind(kind)}")
    for name, block in config["experiments"].items():
        table = copy / pipeline_targets.main_table(config, name)
        if not table.is_file():
            problems.append(f"{table.relative_to(copy)}: missing")
            continue
        rows = pd.read_csv(table)
        if block["kind"] == "train":
            counts["audit_rows"] += len(rows)
            bounds = pd.to_numeric(rows.get("epsilon"), errors="coerce")
            if rows.empty or not np.isfinite(bounds).any():
                problems.append(f"{table.relative_to(copy)}: no finite bound")
        for path in pipeline_targets.figure_files(config, name).values():
            ok = (copy / path).is_file() and (copy / path).stat().st_size > 0
            counts["figures"] += ok
            if not ok:
                problems.append(f"{path}: missing")
    for key in pipeline_targets.paper_targets(config):
        for path in pipeline_targets.paper_target_files(key):
            if not (copy / path).is_file():
                problems.append(f"{path}: missing")
    if pipeline_targets.reproduced(config):
        rows = pd.read_csv(copy / "results" / "reproduction.csv")
        counts["reproduction_rows"] = len(rows)
        wanted = sum(len(b.get("reproduce") or []) for b in config["experiments"].values())
        if len(rows) != wanted:
            problems.append(f"results/reproduction.csv: {len(rows)} rows, expected {wanted}")
        ours = {(r.experiment, r.quantity): r.ours for r in rows.itertuples()}
        counts["reproduction_finite"] = int(np.isfinite(pd.to_numeric(rows["ours"])).sum())
        for exp, check in _comparable_checks(config):
            value = ours.get((exp, check["quantity"]), math.nan)
            if not np.isfinite(float(value)):
                problems.append(f"results/reproduction.csv: {check['quantity']!r}: no value")
    if not (copy / "results" / "report.html").is_file():
        problems.append("results/report.html: missing")
    return problems, counts


def run(paper: Path, work: Path, device: str, cores: int, preload: Path | None) -> int:
    """Prepare, run and verify the miniature of ``paper``; the exit status."""
    copy, config = prepare(paper, work, device, preload)
    kinds = miniature.job_kinds(config)
    print(f"== {paper.name}: {len(kinds)} kinds of training job", flush=True)
    for kind, jobs in kinds.items():
        print(f"  {len(jobs):5d} settings  {miniature.describe_kind(kind)}")
    env = dict(
        os.environ,
        # the user's own PYTHONPATH stays (packages installed with --target, say)
        PYTHONPATH=os.pathsep.join(
            [str(work / "shim"), str(copy), *filter(None, [os.environ.get("PYTHONPATH")])]
        ),
        OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"),
        MPLBACKEND="Agg",
    )
    cmd = [sys.executable, "-m", "snakemake", "--cores", str(cores), "--nolock"]
    cmd += ["--configfile", str(paper.resolve()), "miniature.yaml"]
    start = time.monotonic()
    done = subprocess.run(cmd, cwd=copy, env=env, capture_output=True, text=True)
    wall = time.monotonic() - start
    if done.returncode != 0:
        tail = (done.stdout + done.stderr)[-6000:]
        print(f"FAILED: snakemake exited {done.returncode} after {wall:.0f} s\n{tail}")
        for log in sorted((copy / "logs").rglob("*.log")):
            text = log.read_text(errors="replace")
            if "Traceback" in text or "Error" in text:
                print(f"--- {log.relative_to(copy)}\n{text[-3000:]}")
                break
        return 1
    problems, counts = verify(copy, paper.resolve())
    print(f"  ran in {wall:.0f} s wall ({cores} cores, device {device}); {counts}")
    for p in problems:
        print(f"  PROBLEM: {p}")
    return 1 if problems else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("configs", nargs="*", type=Path)
    parser.add_argument("--workdir", type=Path, default=Path("miniature"))
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--preload", type=Path, default=None)
    args = parser.parse_args(argv)
    configs = args.configs or sorted((REPO / "config" / "paper").glob("*_training.yaml"))
    status = 0
    for paper in configs:
        status |= run(paper, args.workdir / paper.stem, args.device, args.cores, args.preload)
    return status


if __name__ == "__main__":
    sys.exit(main())
