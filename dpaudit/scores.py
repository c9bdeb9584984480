"""Per-canary score files: the contract between training/simulation and the estimators.

A score file is a single ``.npz`` archive (readable with NumPy alone, no Snakemake and no
dpaudit needed) holding three arrays of one shape ``(trials, canaries)`` and one JSON string:

``score``       float64  the audit statistic of each canary in each trial; *higher means IN*
                         (e.g. minus the loss of the final model on the canary). Stored as
                         float32 when the metadata says ``"score_dtype": "float32"`` (large
                         simulated files; read back as float64).
``membership``  int8     1 if the canary was included in the training data of that trial, else 0.
``canary_id``   int64    a stable identifier of each canary (unique within a trial).
``meta``        0-d str  JSON object with the per-file metadata (see :data:`REQUIRED_META`;
                         the optional inclusion law of the canaries: :data:`INCLUSION_KEY`).

``membership`` and ``canary_id`` are stored as a single row, shape ``(1, canaries)``, when every
trial has the same row (e.g. the LiDP design: the same K inserted and m null canaries in every
trial); :func:`read` broadcasts them back to ``(trials, canaries)`` (with NumPy alone:
``np.broadcast_to(z["membership"], z["score"].shape)``).

``trials`` is 1 for a single training run (the one-run designs) and the number of trained
models for multi-run designs (LiDP, shuffling and selection audits). Reading it back::

    import json, numpy as np
    with np.load("seed0.npz") as z:
        meta = json.loads(z["meta"].item())
        score, member = z["score"], z["membership"]

The archive is written with fixed zip timestamps, so the same content gives the same bytes,
and atomically (a temporary file renamed into place), so a killed job never leaves a
half-written score file behind.
"""

from __future__ import annotations

import json
import math
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dpaudit.io import atomic_path
from dpaudit.keys import CLAIMED_EPSILON, FORMAT_VERSION_KEY, INCLUSION_KEY, SCORE_DTYPE

#: 2: one-row ``membership``/``canary_id`` and ``score_dtype`` (version-1 files read unchanged).
FORMAT_VERSION = 2

#: Metadata every score file carries. ``claimed_epsilon`` is ``null`` in JSON for a run
#: without any privacy guarantee (no noise); ``accountant`` names who computed it.
REQUIRED_META: dict[str, str] = {
    FORMAT_VERSION_KEY: "integer, the score-file format version",
    "experiment": "name of the experiment block in the config",
    "setting": "name of the setting within the experiment (e.g. eps4)",
    "seed": "integer seed from which the file was produced",
    "design": "canary design: one_run | lidp | multi_run",
    "threat_model": "e.g. black_box_loss, white_box_dirac, simulation",
    CLAIMED_EPSILON: "epsilon claimed by the accountant (null if no guarantee)",
    "delta": "the delta at which claimed_epsilon holds",
    "accountant": "name of the accountant that computed claimed_epsilon",
}

DESIGNS = ("one_run", "lidp", "multi_run")

#: Metadata that says how the arrays are stored: the writer's, never a producer's extra.
STORAGE_META = (FORMAT_VERSION_KEY, SCORE_DTYPE)

#: Allowed on-disk dtypes of ``score`` (metadata key ``score_dtype``; default float64).
SCORE_DTYPES = {"float64": np.float64, "float32": np.float32}

# Optional metadata key :data:`dpaudit.keys.INCLUSION_KEY` (re-exported here): the inclusion law
# of the canaries under the file's design. A number p in [0, 1]: each canary of each trial is IN
# independently with probability p (the one-run designs' fair coins, Steinke, Nasr, Jagielski
# 2023, Alg. 1: p = 1/2; a no-canary control: 0); :data:`FIXED_INCLUSION`: membership is set by
# the design, not drawn (LiDP's K inserted and m null canaries per trial; the batched Gaussian
# mechanism's runs on each side). A file without the key declares a fair coin
# (:data:`FAIR_COIN`), so files written before the key read unchanged.
# :func:`dpaudit.audit.membership_pvalue` tests the IN count against it.
#: The inclusion probability of a fair coin (the default law).
FAIR_COIN = 0.5
#: The value of :data:`INCLUSION_KEY` of a design whose membership is not random.
FIXED_INCLUSION = "fixed"


class ScoreFileError(ValueError):
    """A score file (or the arrays meant for one) breaks the contract."""


@dataclass
class ScoreFile:
    """The in-memory form of a score file; see the module docstring for the fields."""

    score: np.ndarray
    membership: np.ndarray
    canary_id: np.ndarray
    meta: dict[str, Any] = field(default_factory=dict)
    source: str = "<memory>"

    def __post_init__(self) -> None:
        src = self.source
        self.score = np.atleast_2d(_numeric(self.score, "score", src)).astype(
            np.float64, copy=False
        )
        self.membership = np.atleast_2d(_numeric(self.membership, "membership", src))
        ids = np.atleast_2d(_numeric(self.canary_id, "canary_id", src))
        self.canary_id = _canary_ids(ids, src)
        self.meta = dict(self.meta)
        self.meta.setdefault(FORMAT_VERSION_KEY, FORMAT_VERSION)  # in memory; read() requires it
        validate(self)
        self.membership = self.membership.astype(np.int8, copy=False)

    @property
    def n_trials(self) -> int:
        return int(self.score.shape[0])

    @property
    def n_canaries(self) -> int:
        return int(self.score.shape[1])

    @property
    def claimed_epsilon(self) -> float:
        """The claimed epsilon, ``inf`` when the run had no privacy guarantee."""
        value = self.meta.get(CLAIMED_EPSILON)
        return math.inf if value is None else float(value)

    @property
    def delta(self) -> float:
        return float(self.meta["delta"])

    @property
    def inclusion_probability(self) -> float | str:
        """The declared inclusion law (:data:`INCLUSION_KEY`): p in [0, 1], or
        :data:`FIXED_INCLUSION`; :data:`FAIR_COIN` when the file declares none."""
        value = self.meta.get(INCLUSION_KEY, FAIR_COIN)
        return value if value == FIXED_INCLUSION else float(value)

    def to_frame(self):
        """The long (tidy) form: one row per (trial, canary)."""
        import pandas as pd

        trials, canaries = np.indices(self.score.shape)
        return pd.DataFrame(
            {
                "trial": trials.ravel(),
                "canary_id": self.canary_id.ravel(),
                "membership": self.membership.ravel(),
                "score": self.score.ravel(),
            }
        )


def one_run_meta(experiment: str, setting: str, seed: int) -> dict[str, Any]:
    """The head of every one-run producer's meta: format version, the run's identity, design
    and inclusion law, a fair coin per canary (Steinke, Nasr, Jagielski 2023, Alg. 1)."""
    run = {"experiment": experiment, "setting": setting, "seed": seed, "design": "one_run"}
    return {FORMAT_VERSION_KEY: FORMAT_VERSION, **run, INCLUSION_KEY: FAIR_COIN}


def _fail(source: str, message: str) -> None:
    raise ScoreFileError(f"{source}: {message}")


#: Human names of NumPy dtype kinds, for error messages.
_KINDS = {
    "b": "booleans",
    "i": "integers",
    "u": "unsigned integers",
    "f": "floats",
    "c": "complex numbers",
    "U": "strings",
    "S": "bytes",
    "O": "Python objects",
    "V": "raw records",
    "M": "datetimes",
    "m": "time deltas",
}


#: The dtype kinds each array may hold (read back as float64, int8 and int64).
ARRAY_KINDS = {"score": "iuf", "membership": "biuf", "canary_id": "iuf"}


def _numeric(values: Any, name: str, source: str) -> np.ndarray:
    """``values`` as an array of a dtype kind of :data:`ARRAY_KINDS`; else an error naming key."""
    try:
        arr = np.asarray(values)
    except ValueError as exc:  # ragged nested lists
        raise ScoreFileError(f"{source}: array '{name}' is malformed ({exc})") from exc
    _check_array_form(name, arr.dtype, arr.shape, source)
    return arr


def _check_array_form(name: str, dtype: np.dtype, shape: tuple[int, ...], source: str) -> None:
    """The dtype kind (:data:`ARRAY_KINDS`) and at most 2 dimensions, from the array or, before
    it is read, from its ``.npy`` header."""
    kinds = ARRAY_KINDS[name]
    if dtype.kind not in kinds:
        allowed = " or ".join(_KINDS[k] for k in kinds)
        _fail(
            source,
            f"array '{name}' must hold {allowed}, got dtype {dtype} "
            f"({_KINDS.get(dtype.kind, 'unknown')})",
        )
    if len(shape) > 2:
        _fail(source, f"array '{name}' must be 2-D (trials, canaries), got shape {shape}")


def _canary_ids(ids: np.ndarray, source: str) -> np.ndarray:
    """Integer canary ids as int64; float ids must be finite whole numbers (else: trial, canary)."""
    if ids.dtype.kind == "f":
        bad = ~np.isfinite(ids) | (ids != np.round(ids))
        if bad.any():
            t, c = np.argwhere(bad)[0]
            _fail(
                source,
                f"canary_id is {ids[t, c].item()!r} at trial {t}, canary {c}: canary ids must "
                f"be whole numbers ({int(bad.sum())} bad id(s) in all)",
            )
    return ids.astype(np.int64, copy=False)


def validate(sf: ScoreFile) -> None:
    """Check the contract; every error names the file and, for bad values, the row.

    Rows are reported as ``trial t, canary c`` (zero-based positions in the arrays).
    """
    src = sf.source
    if sf.score.ndim != 2:
        _fail(src, f"'score' must be 2-D (trials, canaries), got shape {sf.score.shape}")
    if sf.score.size == 0:
        _fail(src, "the file holds no scores (empty 'score' array)")
    for name in ("membership", "canary_id"):
        arr = getattr(sf, name)
        if arr.shape != sf.score.shape:
            _fail(src, f"'{name}' has shape {arr.shape} but 'score' has {sf.score.shape}")
    bad = ~np.isfinite(sf.score)
    if bad.any():
        t, c = np.argwhere(bad)[0]
        kind = "NaN" if np.isnan(sf.score[t, c]) else "inf"
        _fail(
            src,
            f"score is {kind} at trial {t}, canary {c} "
            f"({int(bad.sum())} non-finite score(s) in all)",
        )
    mem = sf.membership
    if not np.issubdtype(mem.dtype, np.number) and mem.dtype != bool:
        _fail(src, f"'membership' must be numeric 0/1, got dtype {mem.dtype}")
    not01 = ~np.isin(mem, (0, 1))
    if not01.any():
        t, c = np.argwhere(not01)[0]
        _fail(src, f"membership must be 0 or 1, got {mem[t, c].item()!r} at trial {t}, canary {c}")
    _check_required(sf.meta, src)
    if sf.meta["design"] not in DESIGNS:
        _fail(src, f"metadata 'design' is {sf.meta['design']!r}; allowed: {list(DESIGNS)}")
    delta = sf.meta["delta"]
    if not _is_number(delta) or not 0 <= delta < 1:  # NaN fails the range; a bool is no delta
        _fail(src, f"metadata 'delta' must be a number in [0, 1), got {_as_json(delta)}")
    if sf.meta.get(SCORE_DTYPE, "float64") not in SCORE_DTYPES:
        _fail(
            src,
            f"metadata 'score_dtype' is {sf.meta['score_dtype']!r}; allowed: "
            f"{list(SCORE_DTYPES)}",
        )
    eps = sf.meta[CLAIMED_EPSILON]
    if eps is not None and (not _is_number(eps) or not eps >= 0):  # NaN, a bool: no claim
        _fail(
            src,
            f"metadata 'claimed_epsilon' must be a number >= 0, or null for a run without a "
            f"privacy guarantee, got {_as_json(eps)}",
        )
    _check_meta_extras(sf.meta, src)
    _check_inclusion(sf.meta, src)


def _check_inclusion(meta: dict[str, Any], src: str) -> None:
    """:data:`INCLUSION_KEY`, where given, is a probability or :data:`FIXED_INCLUSION`."""
    value = meta.get(INCLUSION_KEY, FAIR_COIN)
    if value == FIXED_INCLUSION or (_is_number(value) and 0 <= value <= 1):
        return
    _fail(
        src,
        f"metadata {INCLUSION_KEY!r} must be a probability in [0, 1] (each canary IN "
        f"independently with it) or {FIXED_INCLUSION!r} (membership set by the design), got "
        f"{value!r}; leave the key out for a fair coin ({FAIR_COIN})",
    )


def _check_required(meta: dict[str, Any], src: str) -> None:
    """Every key of :data:`REQUIRED_META` is present (a file's are never filled in)."""
    missing = [k for k in REQUIRED_META if k not in meta]
    if missing:
        _fail(src, f"metadata lacks required key(s) {missing}; required: {list(REQUIRED_META)}")


def _as_json(value: Any) -> str:
    """``value`` as the metadata's JSON spells it (``true``, ``NaN``), for error messages."""
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)


def _is_number(value: Any) -> bool:
    """A JSON number: an int or float, not a bool (JSON ``true`` is not 1)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def _check_meta_extras(meta: dict[str, Any], src: str) -> None:
    """``format_version`` one this reader knows; ``claimed_epsilons``/``references`` numeric."""
    version = meta[FORMAT_VERSION_KEY]
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        _fail(src, f"metadata 'format_version' must be an integer >= 1, got {version!r}")
    if version > FORMAT_VERSION:
        _fail(
            src,
            f"format_version {version} is newer than this dpaudit reads ({FORMAT_VERSION}); "
            "update dpaudit",
        )
    for key in ("claimed_epsilons", "references"):
        value = meta.get(key)
        if value is None:
            continue
        if not isinstance(value, dict):
            _fail(src, f"metadata '{key}' must be a JSON object of numbers, got {value!r}")
        for name, number in value.items():
            if number is not None and (not _is_number(number) or math.isnan(number)):
                _fail(src, f"metadata '{key}.{name}' must be a number or null, got {number!r}")


def _one_row_if_constant(arr: np.ndarray) -> np.ndarray:
    """``arr[:1]`` if every row equals the first (stored once, broadcast on reading)."""
    if arr.shape[0] > 1 and (arr == arr[:1]).all():
        return arr[:1]
    return arr


def write(path: str | Path, sf: ScoreFile) -> Path:
    """Write ``sf`` to ``path`` atomically and byte-reproducibly.

    ``score`` is stored uncompressed (floats barely compress, and deflating hundreds of MB
    costs more than writing them); the other arrays are deflated, and stored as one row when
    all rows are equal (see the module docstring).
    """
    path = Path(path)
    dtype = SCORE_DTYPES[sf.meta.get(SCORE_DTYPE, "float64")]
    with np.errstate(over="ignore"):
        score = sf.score.astype(dtype, copy=False)
    if not np.isfinite(score).all():
        t, c = np.argwhere(~np.isfinite(score))[0]
        _fail(sf.source, f"score overflows {dtype.__name__} at trial {t}, canary {c}")
    arrays = {
        "score": score,
        "membership": _one_row_if_constant(sf.membership.astype(np.int8, copy=False)),
        "canary_id": _one_row_if_constant(sf.canary_id),
        "meta": np.array(json.dumps(sf.meta, sort_keys=True, allow_nan=False)),
    }
    with atomic_path(path) as tmp:
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            for name, arr in arrays.items():
                info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_STORED if name == "score" else zipfile.ZIP_DEFLATED
                with zf.open(info, "w", force_zip64=True) as fh:
                    np.lib.format.write_array(fh, np.ascontiguousarray(arr), allow_pickle=False)
    return path


def _meta_text(arr: np.ndarray, source: str) -> str:
    """The JSON text of the ``meta`` array, which must hold one string (0-d, or one element)."""
    if arr.dtype.kind != "U" or arr.size != 1 or arr.ndim > 1:
        _fail(
            source,
            f"array 'meta' must be one string (JSON text), got dtype {arr.dtype} "
            f"({_KINDS.get(arr.dtype.kind, 'unknown')}), shape {arr.shape}",
        )
    return str(arr.item())


#: Bytes a score file's arrays may inflate to in all without a further check: above it, at most
#: :data:`MAX_INFLATION` times the archive's size on disk. dpaudit stores ``score``
#: uncompressed and the other arrays are at most 16 bytes per score, so its own files inflate
#: to about twice their size; a compression bomb (a few hundred KB of zeros declared as 300 MB)
#: is refused from the zip and ``.npy`` headers, before anything is inflated.
INFLATE_FREE_BYTES = 64 * 2**20
#: See :data:`INFLATE_FREE_BYTES`.
MAX_INFLATION = 50
#: The arrays of a score file, in the order they are checked.
ARRAYS = ("score", "membership", "canary_id", "meta")


def _npy_header(zf: zipfile.ZipFile, info: zipfile.ZipInfo, src: str):
    """(shape, dtype, header bytes) of a ``.npy`` member, read from its first bytes only."""
    fmt = np.lib.format
    with zf.open(info) as fh:
        try:
            version = fmt.read_magic(fh)
            if version == (1, 0):
                shape, _, dtype = fmt.read_array_header_1_0(fh)
            elif version == (2, 0):
                shape, _, dtype = fmt.read_array_header_2_0(fh)
            else:
                raise ValueError(f".npy format version {version[0]}.{version[1]}")
        except ValueError as exc:
            raise ScoreFileError(
                f"{src}: member {info.filename!r} is not a readable .npy array ({exc})"
            ) from exc
        return shape, dtype, fh.tell()


def _check_members(path: Path, src: str) -> None:
    """Check the archive from its zip and ``.npy`` headers before any array is inflated: each
    member's header fits the size the zip declares for it, the dtypes and shapes agree with
    ``score``'s, and the arrays inflate to at most :data:`INFLATE_FREE_BYTES`, or
    :data:`MAX_INFLATION` times the archive's size. Errors name the file and the member."""
    with zipfile.ZipFile(path) as zf:
        names = set(zf.namelist())
        members = {}  # as numpy.load finds them: "score", else "score.npy"
        for key in ARRAYS:
            member = key if key in names else f"{key}.npy"
            if member in names:
                members[key] = zf.getinfo(member)
        missing = [k for k in ARRAYS if k not in members]
        if missing:
            raise ScoreFileError(f"{src}: missing array(s) {missing}")
        shapes = {}
        for key, info in members.items():
            shape, dtype, header = _npy_header(zf, info, src)
            if key != "meta":
                _check_array_form(key, dtype, shape, src)
            need = header + math.prod(shape) * dtype.itemsize
            if need > info.file_size:
                _fail(
                    src,
                    f"member {info.filename!r} holds {info.file_size:,} bytes, but its .npy "
                    f"header declares {shape} of {dtype}, {need:,} bytes: the archive is damaged",
                )
            shapes[key] = (1,) * (2 - len(shape)) + tuple(shape)  # as np.atleast_2d
    trials, canaries = shapes["score"][-2:]
    for key in ("membership", "canary_id"):
        if shapes[key][-2:] not in ((trials, canaries), (1, canaries)):
            _fail(src, f"'{key}' has shape {shapes[key]} but 'score' has {(trials, canaries)}")
    inflated = sum(info.file_size for info in members.values())
    allowed = max(INFLATE_FREE_BYTES, MAX_INFLATION * path.stat().st_size)
    if inflated > allowed:
        big = max(members.values(), key=lambda info: info.file_size)
        _fail(
            src,
            f"member {big.filename!r} inflates to {big.file_size:,} bytes from "
            f"{big.compress_size:,} stored: the arrays would take {inflated:,} bytes, more than "
            f"{MAX_INFLATION} times the file's {path.stat().st_size:,} (or "
            f"{INFLATE_FREE_BYTES // 2**20} MiB); not read (a compression bomb, or not a score "
            "file dpaudit wrote: dpaudit.scores.write stores 'score' uncompressed)",
        )


def read(path: str | Path) -> ScoreFile:
    """Read and validate a score file; errors name the file and the offending row."""
    path = Path(path)
    src = str(path)
    if not path.exists():
        raise ScoreFileError(f"{src}: no such score file")
    if path.is_dir():
        raise ScoreFileError(f"{src}: is a directory, not a score file")
    if path.stat().st_size == 0:
        raise ScoreFileError(f"{src}: the file is empty")
    if not zipfile.is_zipfile(path):
        raise ScoreFileError(
            f"{src}: not a score file (not a zip archive; a score file is an .npz written by "
            "dpaudit, see dpaudit.scores)"
        )
    try:
        _check_members(path, src)  # from the headers, before anything is inflated
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in ("score", "membership", "canary_id")}
            meta_text = _meta_text(z["meta"], src)
        shape = arrays["score"].shape
        for k in ("membership", "canary_id"):
            a = arrays[k]
            if a.ndim == 2 and a.shape[0] == 1 and len(shape) == 2 and a.shape[1] == shape[1]:
                arrays[k] = np.broadcast_to(a, shape)  # stored once for all trials
    except ScoreFileError:
        raise
    except Exception as exc:  # zipfile.BadZipFile, ValueError, OSError, ...
        raise ScoreFileError(f"{src}: not a readable score file ({exc})") from exc
    try:
        meta = json.loads(meta_text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise ScoreFileError(f"{src}: metadata is not valid JSON ({exc})") from exc
    if not isinstance(meta, dict):
        raise ScoreFileError(f"{src}: metadata must be a JSON object")
    _check_required(meta, src)  # before ScoreFile fills in format_version for in-memory files
    return ScoreFile(**arrays, meta=meta, source=src)


def check_identity(
    sf: ScoreFile,
    path: str | Path | None = None,
    *,
    experiment: str,
    setting: str,
    seed: int | str,
    shard: int | str | None = None,
) -> None:
    """Raise :class:`ScoreFileError` unless ``sf``'s metadata names the run the pipeline expects
    at ``path`` (its ``experiment``, ``setting``, ``seed`` and, for a shard file, ``shard``).

    A valid score file copied or moved over another (say the ``eps4`` file over the
    ``nonprivate`` one) passes every other check and would be audited as the run of its path,
    its rows counted twice and the displaced run's lost. Values are compared as text, since the
    pipeline's wildcards are strings (seed ``"0"`` matches metadata ``0``); a file without a
    ``shard`` key (one trained in a single shard, e.g. by the Opacus engine) is shard 0. The
    error names the file, the field, the value found and the one expected.
    """
    expected: dict[str, Any] = {"experiment": experiment, "setting": setting, "seed": seed}
    if shard is not None and ("shard" in sf.meta or str(shard) != "0"):
        expected["shard"] = shard  # without a "shard" key, a file is its seed's only shard (0)
    for key, want in expected.items():
        found = sf.meta.get(key)
        if found is None or isinstance(found, bool) or str(found) != str(want):
            _fail(
                str(path or sf.source),
                f"metadata '{key}' is {found!r}, but the pipeline expects {str(want)!r} for "
                "this path: the file belongs to another run (copied or moved?); restore the "
                "file of this run or remove it so that the pipeline writes it again",
            )


def _identity(sf: ScoreFile) -> tuple[str, ...]:
    """(experiment, setting, seed, shard) of a file: two files with one identity are one run."""
    keys = ("experiment", "setting", "seed", "shard")
    return tuple(json.dumps(sf.meta.get(k), sort_keys=True) for k in keys)


def _check_distinct(files: list[ScoreFile]) -> None:
    """Raise if two files are the same file (resolved path) or the same run (identity)."""
    seen_path: dict[Path, str] = {}
    seen_id: dict[tuple[str, ...], str] = {}
    for sf in files:
        if sf.source != "<memory>":
            resolved = Path(sf.source).resolve()
            if resolved in seen_path:
                raise ScoreFileError(
                    f"{sf.source}: the same score file as {seen_path[resolved]}; stacking it "
                    "twice would count its trials twice"
                )
            seen_path[resolved] = sf.source
        key = _identity(sf)
        if key in seen_id:
            shard = f", shard {sf.meta['shard']}" if "shard" in sf.meta else ""
            raise ScoreFileError(
                f"{sf.source}: the same run as {seen_id[key]} (experiment "
                f"{sf.meta.get('experiment')!r}, setting {sf.meta.get('setting')!r}, seed "
                f"{sf.meta.get('seed')!r}{shard}); stacking it twice would count its trials twice"
            )
        seen_id[key] = sf.source


def _mean_accuracy(files: list[ScoreFile]) -> float:
    """The mean test accuracy over every model of the files (each file's mean weighted by its
    number of models, ``test_accuracy_per_model``, else by its trials)."""
    weights = [len(sf.meta.get("test_accuracy_per_model") or []) or sf.n_trials for sf in files]
    total = sum(w * float(sf.meta["test_accuracy"]) for w, sf in zip(weights, files, strict=True))
    return total / sum(weights)


def concat(files: list[ScoreFile]) -> ScoreFile:
    """Stack the trials of several score files of one setting (e.g. training shards).

    The files must agree on the number of canaries and on the metadata that defines the
    setting; ``seed`` becomes the list of the shards' seeds. The same file (resolved path) or
    the same run (experiment, setting, seed and shard) given twice is an error naming both.
    """
    if not files:
        raise ScoreFileError("concat: no score files given")
    _check_distinct(files)
    first = files[0]
    keys = [k for k in REQUIRED_META if k not in ("seed",)]
    for sf in files[1:]:
        if sf.n_canaries != first.n_canaries:
            raise ScoreFileError(
                f"{sf.source}: {sf.n_canaries} canaries per trial, but {first.source} has "
                f"{first.n_canaries}"
            )
        for k in keys:
            if sf.meta.get(k) != first.meta.get(k):
                raise ScoreFileError(
                    f"{sf.source}: metadata '{k}' is {sf.meta.get(k)!r}, but {first.source} "
                    f"has {first.meta.get(k)!r}"
                )
    meta = dict(first.meta)
    meta["seed"] = [sf.meta["seed"] for sf in files]
    if all(sf.meta.get("test_accuracy") is not None for sf in files):
        meta["test_accuracy"] = _mean_accuracy(files)
    return ScoreFile(
        score=np.concatenate([f.score for f in files]),
        membership=np.concatenate([f.membership for f in files]),
        canary_id=np.concatenate([f.canary_id for f in files]),
        meta=meta,
        source=",".join(f.source for f in files),
    )
