"""Every path the pipeline writes, declared once.

Each function gives one kind of path. Called with values it gives a file
(``score_file("sim", "m1000", 0)``); called with its defaults it gives the Snakemake pattern
with the wildcards (``score_file()`` is ``results/{experiment}/scores/{setting}/seed{seed}.npz``),
which the rules use in ``output:``, ``log:`` and ``benchmark:``, so a rule and the input
functions that ask for its files cannot disagree. A job is named by the same part everywhere:
its score file, its log and its benchmark are ``<prefix>/<job>`` with ``job`` one of
:data:`SEED_JOB`, :data:`SHARD_JOB`, :data:`AUDIT_JOB`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

RESULTS = "results"
LOGS = "logs"
DATASETS = "resources/datasets"

#: The job parts of the per-seed, per-shard and per-setting (audit) jobs.
SEED_JOB = "{setting}/seed{seed}"
SHARD_JOB = "{setting}/seed{seed}.shard{shard}"
AUDIT_JOB = "{setting}"

#: Figure names: the claimed-vs-empirical epsilon figure of train experiments, the figure of
#: the others.
EPS_FIGURE = "eps_empirical_vs_claimed"
FIGURE = "figure"
#: The practitioner's verdict figure of a train experiment with a ``verdict`` block.
VERDICT_FIGURE = "verdicts"
#: The empirical trade-off curves of a train experiment with a ``tradeoff`` block.
TRADEOFF_FIGURE = "tradeoff"

#: A score file's path, parsed back: experiment, setting, seed and the optional shard.
_SCORE_RE = re.compile(
    rf"^(?:.*/)?{RESULTS}/(?P<experiment>[^/]+)/scores/(?P<setting>[^/]+)/"
    r"seed(?P<seed>[0-9]+)(?:\.shard(?P<shard>[0-9]+))?\.npz$"
)


def dataset(experiment: str = "{experiment}", variant: str = "{variant}") -> str:
    """A prepared dataset of a train experiment: ``base``, or one per value of the
    ``dataset.*`` keys its grid varies (:func:`dpaudit.pipeline.settings.data_variant`)."""
    return f"{DATASETS}/{experiment}/{variant}.npz"


def score_file(
    experiment: str = "{experiment}",
    setting: str = "{setting}",
    seed: int | str = "{seed}",
    shard: int | str | None = None,
) -> str:
    """One score file: of one seed, or of one shard of a seed (``shard`` given)."""
    job = SEED_JOB if shard is None else SHARD_JOB
    name = job.format(setting=setting, seed=seed, shard=shard)
    return f"{RESULTS}/{experiment}/scores/{name}.npz"


def setting_audit(experiment: str = "{experiment}", setting: str = "{setting}") -> str:
    """The rows of every estimator of an experiment on every seed of one setting (one
    ``audit`` job)."""
    return f"{RESULTS}/{experiment}/audit/{AUDIT_JOB.format(setting=setting)}.csv"


def audit_table(experiment: str = "{experiment}") -> str:
    """The tidy audit table of a train or simulate experiment."""
    return f"{RESULTS}/{experiment}/audit.csv"


def analysis_table(experiment: str = "{experiment}") -> str:
    """The table of an analysis experiment."""
    return f"{RESULTS}/{experiment}/table.csv"


def verdict_table(experiment: str = "{experiment}") -> str:
    """The practitioner's verdict table of a train experiment (one row per implementation)."""
    return f"{RESULTS}/{experiment}/verdicts.csv"


def false_alarm_table(experiment: str = "{experiment}") -> str:
    """The false alarms per check family over the seeds of a train experiment with a
    ``verdict`` block (:func:`dpaudit.attach.false_alarms.false_alarm_table`)."""
    return f"{RESULTS}/{experiment}/false_alarms.csv"


def per_seed_verdict_table(experiment: str = "{experiment}") -> str:
    """The verdict table of a train experiment with one row per implementation and seed
    (:func:`dpaudit.attach.false_alarms.per_seed_verdicts`)."""
    return f"{RESULTS}/{experiment}/verdicts_per_seed.csv"


def conformance_table(experiment: str = "{experiment}") -> str:
    """The conformance table of an experiment trained by ``train.entry_point`` (each stage's
    checks, measured beside the claim, per score file; :mod:`dpaudit.attach.conformance`)."""
    return f"{RESULTS}/{experiment}/conformance.csv"


def tradeoff_table(experiment: str = "{experiment}") -> str:
    """The points of a train experiment's trade-off figure (empirical and claim curves)."""
    return f"{RESULTS}/{experiment}/tradeoff.csv"


def figure(experiment: str = "{experiment}", name: str = FIGURE, ext: str = "pdf") -> str:
    """A figure of an experiment (``name``: :data:`EPS_FIGURE`, :data:`FIGURE`,
    :data:`VERDICT_FIGURE`, :data:`TRADEOFF_FIGURE` or a figure kind of
    :mod:`dpaudit.pipeline.figure_kinds`)."""
    return f"{RESULTS}/{experiment}/figures/{name}.{ext}"


def paper_target(paper: str = "{paper}", figure: str = "{figure}", ext: str = "pdf") -> str:
    """An experiment's figure or table (``ext`` csv) published under its paper-figure name."""
    return f"{RESULTS}/{paper}/{figure}.{ext}"


def reproduction(ext: str) -> str:
    """The reproduction table (``md`` or ``csv``): every experiment's checks found under
    ``results/`` (:func:`reproduction_part`), whichever config wrote them."""
    return f"{RESULTS}/reproduction.{ext}"


def reproduction_part(experiment: str = "{experiment}") -> str:
    """One experiment's reproduction checks (rows of :func:`reproduction`), with the config
    file that ran them."""
    return f"{RESULTS}/{experiment}/reproduction.csv"


#: Every experiment's reproduction checks on disk (:func:`reproduction_part`), for the merge.
REPRODUCTION_PARTS = f"{RESULTS}/*/reproduction.csv"


def log(*parts: str) -> str:
    """A job's log: ``logs/<parts joined by />.log`` (``log("{experiment}", "analysis")``)."""
    return f"{LOGS}/{'/'.join(parts)}.log"


def benchmark(step: str, job: str, experiment: str = "{experiment}") -> str:
    """A job's benchmark (time and memory) file: one per job of ``step``."""
    return f"{RESULTS}/{experiment}/benchmarks/{step}/{job}.tsv"


def parse_score_file(path: str) -> dict[str, str | None]:
    """``experiment``, ``setting``, ``seed`` and ``shard`` (None if unsharded) of a score file's
    path; a path that is not a score file is an error naming it."""
    match = _SCORE_RE.match(str(path))
    if match is None:
        raise ValueError(f"{path}: not a score file path (expected {score_file()})")
    return match.groupdict()


def group_by_seed(paths: Iterable[str]) -> list[list[str]]:
    """Score files grouped by seed (a seed's file, or its shards), in the order given.

    The audit rule lists one setting's files seed by seed; this recovers the grouping from the
    paths themselves, so the rule declares the files once (as its input)."""
    groups: dict[str, list[str]] = {}
    settings = set()
    for path in paths:
        parts = parse_score_file(path)
        settings.add((parts["experiment"], parts["setting"]))
        if len(settings) > 1:
            raise ValueError(f"{path}: score files of more than one setting: {sorted(settings)}")
        groups.setdefault(str(parts["seed"]), []).append(str(path))
    return list(groups.values())


def read_score_file(path: str):
    """The score file at ``path`` (:func:`dpaudit.scores.read`), its metadata checked against
    the run its path names (:func:`dpaudit.scores.check_identity`): a file copied over another
    run's is an error naming the file, the field, the value found and the one expected."""
    from dpaudit import scores

    sf = scores.read(path)
    scores.check_identity(sf, path, **parse_score_file(path))
    return sf
