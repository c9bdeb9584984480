"""Guards of the pipeline configuration against silent merges, runaway grids and late failures.

Each check stops a config that would otherwise lose a value without a word (a YAML key given
twice, two target epsilons that name one setting), build a DAG too large to hold (the job-count
guard runs before the DAG and before any per-setting check), or fail only inside a job or in
Snakemake's rule matching (an estimator grid left empty, a mechanism parameter of the wrong type,
a name that cannot be a path component, mathtext matplotlib cannot parse). Every error names the
config key (or the file and lines) and what is allowed. :func:`check_guards` runs them from
:func:`dpaudit.config.validate_config`, after the schema check and before the cross-key checks;
the keys a config file or Snakemake's ``--config`` gives twice are found by
:mod:`dpaudit.config.duplicate_keys`.
"""

from __future__ import annotations

import inspect
import math
import re
import types
import typing
from collections.abc import Iterator
from typing import Any

from dpaudit.config.errors import GuardError
from dpaudit.defaults import SETTING_KEYS
from dpaudit.pipeline import paths
from dpaudit.pipeline.settings import (
    apply_point,
    experiment_designs,
    experiment_settings,
    setting_text,
    simulate_settings,
    train_points,
    train_setting_specs,
)

#: Characters of a setting (and dataset variant) name: its wildcard constraint in
#: rules/common.smk (it is a path component of score files, audit tables and logs).
SETTING_PATTERN = "[A-Za-z0-9_.]+"
#: Longest setting name (a path component; file systems allow 255 bytes per component, and
#: ``seed<N>.shard<S>.npz`` and log suffixes are appended to it).
MAX_SETTING_LENGTH = 200
_SETTING = re.compile(SETTING_PATTERN)


# ----------------------------------------------------------------------------- job count


def experiment_jobs(block: dict[str, Any]) -> tuple[int, dict[str, int]]:
    """(an upper bound on the jobs an experiment makes, its factors: key -> count), counted
    from the config alone (no setting is built): for score-producing experiments the
    score-file jobs (settings x seeds x shards), one audit job per setting, one prepared
    dataset per grid point and a few table and figure jobs."""
    kind = block.get("kind")
    if kind not in ("train", "simulate"):
        return 3, {}
    factors = {f"grid.{k}": len(v) for k, v in (block.get("grid") or {}).items()}
    if block.get("points"):
        factors["points"] = len(block["points"])
    points = math.prod(factors.values())
    factors["seeds"] = len(block.get("seeds") or [0])
    settings = points
    if kind == "train":
        train = block.get("train") or {}
        targets = len(train.get("target_epsilons") or []) + bool(train.get("nonprivate"))
        factors["train.target_epsilons"] = targets
        factors["shards"] = int(block.get("shards") or 1)
        settings = points * targets
        jobs = settings * factors["seeds"] * factors["shards"] + settings + points + 6
    else:
        jobs = settings * factors["seeds"] + settings + 4
    return jobs, factors


def check_job_count(config: dict[str, Any]) -> None:
    """More jobs than ``max_jobs`` is an error naming the number, the experiment and the key
    that multiplies it most (a DAG of 10^6 jobs took 11.7 GB and over 500 s to dry-run)."""
    limit = int(config.get("max_jobs") or 0)
    counts = {exp: experiment_jobs(b) for exp, b in (config.get("experiments") or {}).items()}
    # the report, the reproduction table and each reproduced experiment's checks
    reproduced = [b for b in (config.get("experiments") or {}).values() if b.get("reproduce")]
    total = sum(jobs for jobs, _ in counts.values()) + 2 + len(reproduced)
    if not limit or total <= limit:
        return
    exp, (jobs, factors) = max(counts.items(), key=lambda kv: kv[1][0])
    key, count = max(factors.items(), key=lambda kv: kv[1])
    product = " x ".join(f"{k} {v}" for k, v in factors.items())
    raise GuardError(
        f"config key experiments.{exp}.{key}: the config asks for about {total:,} jobs, more "
        f"than max_jobs = {limit:,}; experiments.{exp} makes {jobs:,} of them ({product}), "
        f"most from {key} ({count:,} values); allowed: a smaller grid, or a larger max_jobs "
        f"(e.g. --config max_jobs={total}) if the machine holds the DAG (about 12 KB of memory "
        "and 0.5 ms per job)"
    )


# ----------------------------------------------------------------------------- values


def _walk(value: Any, where: str) -> Iterator[tuple[str, Any]]:
    yield where, value
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _walk(v, f"{where}.{k}" if where else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _walk(v, f"{where}[{i}]")


def check_no_nan(config: dict[str, Any]) -> None:
    """NaN (YAML ``.nan``) passes every range check of the schema (each comparison is false)
    and means nothing as a config value: an error naming the key."""
    for where, value in _walk(config, ""):
        if isinstance(value, float) and math.isnan(value):
            raise GuardError(f"config key {where}: NaN (.nan) is not a value; allowed: a number")


def _varies_settings(block: dict[str, Any]) -> bool:
    """Whether a train experiment's grid or points set the keys that make its settings (an
    error of the cross-key checks, which name it; the guards leave such an experiment alone)."""
    keys = set(block.get("grid") or {}).union(*(block.get("points") or [{}]))
    return block.get("kind") == "train" and any(f"train.{k}" in keys for k in SETTING_KEYS)


def _train_blocks(config: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for exp, block in (config.get("experiments") or {}).items():
        if block.get("kind") == "train" and not _varies_settings(block):
            yield exp, block


def check_target_epsilons(config: dict[str, Any]) -> None:
    """A target epsilon is finite (``.inf`` would be the ``nonprivate`` setting in disguise),
    and distinct targets name distinct settings (``eps4`` is 4 to 6 significant digits)."""
    for exp, block in _train_blocks(config):
        targets = block["train"]["target_epsilons"]
        for i, eps in enumerate(targets):
            if isinstance(eps, bool) or not math.isfinite(float(eps)):
                raise GuardError(
                    f"config key experiments.{exp}.train.target_epsilons[{i}]: {eps!r} is not "
                    "a finite epsilon; allowed: a number > 0 (train.nonprivate: true adds a "
                    "run without noise)"
                )
        try:
            train_points(block)
        except ValueError:
            continue  # two grid points of one name: check_setting_names names the grid
        try:
            train_setting_specs(block)
        except ValueError as err:
            raise GuardError(
                f"config key experiments.{exp}.train.target_epsilons: {err}; allowed: targets "
                "that differ in their first 6 significant digits, each listed once"
            ) from None


def check_setting_names(config: dict[str, Any]) -> None:
    """Every setting name (a path component and the ``setting`` wildcard) uses only
    ``[A-Za-z0-9_.]`` and at most :data:`MAX_SETTING_LENGTH` characters: a grid string with
    ``/`` or a space would otherwise make paths no rule matches."""
    for exp, block in (config.get("experiments") or {}).items():
        if block.get("kind") not in ("train", "simulate") or _varies_settings(block):
            continue
        values = [(f"grid.{k}", v) for k, vs in (block.get("grid") or {}).items() for v in vs]
        for i, point in enumerate(block.get("points") or []):
            values += [(f"points[{i}].{k}", v) for k, v in point.items()]
        for where, value in values:
            text = setting_text(value) if isinstance(value, str) else ""
            if text and not _SETTING.fullmatch(text):
                raise GuardError(
                    f"config key experiments.{exp}.{where}: {value!r} goes into setting names "
                    "(path components); allowed: letters, digits, '_', '.' and '-'"
                )
        key = f"experiments.{exp}.{'grid' if block.get('grid') else 'points'}"
        try:
            names = experiment_settings(block)
        except ValueError as err:
            raise GuardError(f"config key {key}: {err}") from None
        for name in names:
            if not _SETTING.fullmatch(name) or len(name) > MAX_SETTING_LENGTH:
                raise GuardError(
                    f"config key {key}: setting name {name[:80]!r}"
                    f"{'...' if len(name) > 80 else ''} ({len(name)} characters) is not a safe "
                    f"path component; allowed: at most {MAX_SETTING_LENGTH} characters of "
                    f"{SETTING_PATTERN} (fewer or shorter grid keys and values)"
                )


def _one_run_sizes(block: dict[str, Any]) -> dict[str, int]:
    """Where -> canaries m of each setting of an experiment writing one_run score files."""
    if "one_run" not in experiment_designs(block):
        return {}
    if block["kind"] == "train":
        return {
            f"grid point {name!r}" if name else "canaries.m": int(
                apply_point(block, point)["canaries"]["m"]
            )
            for name, point in train_points(block).items()
        }
    return {
        f"setting {name}": params["m"]
        for name, params in simulate_settings(block).items()
        if isinstance(params.get("m"), int)
    }


def check_one_run_k_values(config: dict[str, Any]) -> None:
    """A one_run estimator's ``k_values`` keep only k <= m: all above m leave no guess count
    (the estimator would divide its confidence by an empty grid). Names the cross-key checks
    reject (an unknown estimator or mechanism) are left to them."""
    from dpaudit.mechanisms.registry import MECHANISMS

    estimators = config.get("estimators") or {}
    for exp, block in (config.get("experiments") or {}).items():
        if block.get("kind") not in ("train", "simulate"):
            continue
        if block["kind"] == "simulate" and block.get("mechanism") not in MECHANISMS:
            continue
        if _varies_settings(block):
            continue
        names = [
            n
            for n in block.get("estimators") or sorted(estimators)
            if n in estimators
            and estimators[n]["method"] == "one_run"
            and estimators[n].get("k_values")
            and not estimators[n].get("grid")
        ]
        for where, m in _one_run_sizes(block).items() if names else ():
            for name in names:
                ks = estimators[name]["k_values"]
                if min(ks) > m:
                    raise GuardError(
                        f"config key estimators.{name}.k_values: {ks} are all above the m = {m} "
                        f"canaries of experiments.{exp} ({where}), which leaves one_run no guess "
                        f"count; allowed: at least one k <= {m}, or null"
                    )


def _accepts(hint: Any, value: Any) -> bool:
    """Whether ``value`` (from YAML) fits the type hint of a mechanism parameter."""
    origin = typing.get_origin(hint)
    if hint is Any or isinstance(hint, typing.TypeVar):
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_accepts(h, value) for h in typing.get_args(hint))
    if origin is typing.Literal:
        return value in typing.get_args(hint)
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    base = origin or hint
    if isinstance(base, type):
        return isinstance(value, base)
    return True  # a hint this check does not model: the mechanism decides


def check_mechanism_params(config: dict[str, Any]) -> None:
    """Each mechanism parameter of ``params``, ``grid`` and ``points`` has the type of the
    mechanism function's annotation (a bool or a string is not an epsilon), and every required
    parameter is given (both fail only when the job calls the mechanism otherwise)."""
    from dpaudit.mechanisms.registry import COMMON_PARAMS, MECHANISMS

    for exp, block in (config.get("experiments") or {}).items():
        if block.get("kind") != "simulate" or block.get("mechanism") not in MECHANISMS:
            continue
        func = MECHANISMS[block["mechanism"]].run
        hints = typing.get_type_hints(func)
        sig = inspect.signature(func)
        values = [(f"params.{k}", k, v) for k, v in (block.get("params") or {}).items()]
        for k, vs in (block.get("grid") or {}).items():
            values += [(f"grid.{k}[{i}]", k, v) for i, v in enumerate(vs)]
        for i, point in enumerate(block.get("points") or []):
            values += [(f"points[{i}].{k}", k, v) for k, v in point.items()]
        for where, name, value in values:
            if name in hints and name not in COMMON_PARAMS and not _accepts(hints[name], value):
                raise GuardError(
                    f"config key experiments.{exp}.{where}: {value!r} has type "
                    f"{type(value).__name__}; mechanism {block['mechanism']!r} takes "
                    f"{_hint_name(hints[name])} for {name!r}"
                )
        required = {
            n
            for n, p in sig.parameters.items()
            if p.default is inspect.Parameter.empty
            and p.kind is not inspect.Parameter.VAR_KEYWORD
            and n not in ("seed", "experiment", "setting")
        }
        given = set(block.get("params") or {}) | set(block.get("grid") or {})
        for i, point in enumerate(block.get("points") or [{}]):
            missing = sorted(required - given - set(point))
            if missing:
                where = f" nor points[{i}]" if block.get("points") else ""
                raise GuardError(
                    f"config key experiments.{exp}.params: mechanism {block['mechanism']!r} "
                    f"needs {missing}, given by neither params, grid{where}; allowed: set them "
                    "in params (or grid / points)"
                )


def _hint_name(hint: Any) -> str:
    return getattr(hint, "__name__", None) or str(hint).replace("typing.", "")


def check_target_paths(config: dict[str, Any]) -> None:
    """A published target (``paper_target``, ``verdict.target``, ``tradeoff.target``) must not
    be a file an experiment's own rule writes (Snakemake could not tell the rules apart)."""
    writes: dict[str, str] = {}
    for exp in config.get("experiments") or {}:
        for what, path in (
            ("audit table", paths.audit_table(exp)),
            ("analysis table", paths.analysis_table(exp)),
            ("verdict table", paths.verdict_table(exp)),
            ("conformance table", paths.conformance_table(exp)),
            ("trade-off table", paths.tradeoff_table(exp)),
            ("reproduction checks", paths.reproduction_part(exp)),
        ):
            writes[path] = f"the {what} of experiments.{exp}"
    for exp, block in (config.get("experiments") or {}).items():
        keys = {"paper_target": block.get("paper_target")}
        for product in ("verdict", "tradeoff"):
            keys[f"{product}.target"] = (block.get(product) or {}).get("target")
        for key, target in keys.items():
            if not target:
                continue
            paper, _, figure = target.partition("/")
            for ext in ("csv", "pdf", "png"):
                path = paths.paper_target(paper, figure, ext)
                if path in writes:
                    raise GuardError(
                        f"config key experiments.{exp}.{key}: {target!r} would write {path}, "
                        f"which is {writes[path]}; allowed: a target no experiment writes "
                        "(another name after the '/')"
                    )


def _figure_texts(config: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(config key, text) of every string that matplotlib draws as a title, label or legend."""
    from dpaudit.plots.labels import short_title

    for name, block in (config.get("estimators") or {}).items():
        if isinstance(block.get("label"), str):
            yield f"estimators.{name}.label", block["label"]
    for exp, block in (config.get("experiments") or {}).items():
        key = f"experiments.{exp}"
        figure = block.get("figure") or {}
        products = [p for p in ("figure", "verdict", "tradeoff") if block.get(p) is not None]
        for product in products:
            title = block[product].get("title")
            if title is not None:
                yield f"{key}.{product}.title", title
        if any(block[p].get("title") is None for p in products):  # the description's head
            yield f"{key}.description", short_title(block.get("description") or "")
        for axis in ("xlabel", "ylabel"):
            if figure.get(axis) is not None:
                yield f"{key}.figure.{axis}", figure[axis]
        for column, names in (figure.get("labels") or {}).items():
            for value, text in names.items():
                yield f"{key}.figure.labels.{column}.{value}", text


def check_math_text(config: dict[str, Any]) -> None:
    """Text with an even number of unescaped ``$`` is mathtext to matplotlib: it must parse
    (checked with matplotlib's own parser, line by line as matplotlib lays text out), or the
    figure job fails."""
    texts = [(k, t) for k, t in _figure_texts(config) if isinstance(t, str) and "$" in t]
    if not texts:
        return  # matplotlib is imported only when some text may be mathtext
    from matplotlib import cbook
    from matplotlib.mathtext import MathTextParser

    parser = MathTextParser("path")
    for key, text in texts:
        for line in text.split("\n"):
            if not cbook.is_math_text(line):
                continue
            try:
                parser.parse(line)
            except ValueError as err:
                why = " ".join(part.strip() for part in str(err).strip().splitlines())
                raise GuardError(
                    f"config key {key}: {line!r} is mathtext matplotlib cannot parse "
                    f"({why[:200]}); allowed: valid $...$ mathtext, or "
                    r"'\$' for a literal dollar sign"
                ) from None


def check_guards(config: dict[str, Any]) -> None:
    """Every guard, the job count first (the later ones build the settings of each grid)."""
    check_job_count(config)
    check_no_nan(config)
    check_target_epsilons(config)
    check_mechanism_params(config)
    check_setting_names(config)
    check_one_run_k_values(config)
    check_target_paths(config)
    check_math_text(config)
