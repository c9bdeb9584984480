"""Deterministic data-set preparation: one standard ``.npz`` the training rule reads.

:func:`prepare_dataset` turns a data set name plus a config dict into one file, written atomically
and byte-for-byte reproducibly (fixed zip timestamps, sorted index sets, seeded generators):

==============  =====================  =======================================================
key             dtype / shape          meaning
==============  =====================  =======================================================
x_train         float32 (n, ...)       training records (images NCHW in [0, 1] or standardised;
                                       tables as 0/1 floats)
y_train         int64 (n,)             labels in ``[0, num_classes)``
x_test, y_test  as above               evaluation records, disjoint from the canary pool
x_canary,       as above (possibly 0)  held-out canary pool carved from the test split; never in
y_canary                               ``x_test``; empty when ``canary_pool`` is 0
train_index,    int64                  positions of the records in the source split they came
test_index,                            from (torchvision's train/test split; for tables, rows of
canary_index                           the file), for provenance
meta            0-d str                JSON: data set, params, sources and checksums, classes,
                                       counts, normalisation, format_version
==============  =====================  =======================================================

Parameters (``params``) for the real data sets; unknown keys raise ``ValueError``:

* ``seed`` (int, default 0): seeds every random choice. Independent streams are drawn from
  ``numpy.random.SeedSequence(seed)`` for (0) the tabular train/test split, (1) the canary pool,
  (2) the test subset, (3) the training subset, so e.g. changing ``n_train`` does not change the
  canary pool.
* ``n_train`` (int or null = all): size of the training set, drawn without replacement from the
  source training split (after the class filter).
* ``n_test`` (int or null = all remaining): size of the test set, drawn from the test split after
  the canary pool is removed.
* ``classes`` (list of >= 2 distinct labels, or null = all): keep only these classes, relabelled
  ``0..len(classes)-1`` in the given order; ``[a, b]`` gives the two-class version.
* ``canary_pool`` (int, default 0): records carved from the (class-filtered) test split.
* ``normalize`` (vision only; false, true, or ``{"mean": [...], "std": [...]}``): false keeps
  [0, 1]; true standardises each channel with the mean/std of the whole source training split
  (recorded in meta; these are data-dependent constants, outside any DP accounting, as is usual
  practice); a dict gives fixed constants.
* ``checksums`` (vision only; {file name: md5}): replaces torchvision's MD5 for a file.
* ``test_fraction`` (tables only; default 0.2): fraction of the file's rows in the test split.
* ``sha256`` (tables and digits): the archive's SHA-256. Required for ``purchase``; overrides the
  pinned value for ``location`` and ``digits`` (:mod:`dpaudit.data.bundled`).

``"digits"`` (scikit-learn's bundled 8x8 handwritten digits, images (1, 8, 8) scaled to [0, 1])
is split like the tables (``test_fraction``, seeded) and takes the same keys; it needs no network.

For ``"synthetic"``, ``params`` are passed unchanged to
``dpaudit.data.synthetic.make_synthetic(**params)``; the arrays it returns are written as they are
(with an empty canary pool unless it returns ``x_canary``/``y_canary``).
"""

from __future__ import annotations

import json
import math
import os
import zipfile
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from dpaudit.data.catalog import DATASET_NAMES, DEFAULT_TEST_FRACTION, entry
from dpaudit.io import atomic_path, parse_json
from dpaudit.keys import FORMAT_VERSION_KEY

FORMAT_VERSION = 1
#: Every dataset name (:mod:`dpaudit.data.catalog`).
DATASETS = DATASET_NAMES
ARRAY_KEYS = (
    "x_train",
    "y_train",
    "x_test",
    "y_test",
    "x_canary",
    "y_canary",
    "train_index",
    "test_index",
    "canary_index",
)

_ZIP_DATE = (1980, 1, 1, 0, 0, 0)

# Stream numbers for SeedSequence.spawn (documented above; do not reorder).
_S_SPLIT, _S_CANARY, _S_TEST, _S_TRAIN = range(4)


# ----------------------------------------------------------------------------- npz I/O


def write_npz(path: str | os.PathLike, arrays: Mapping[str, np.ndarray]) -> None:
    """Write ``arrays`` as an uncompressed ``.npz``, atomically and byte-reproducibly.

    ``numpy.savez`` stamps each member with the current time; this writer uses a fixed timestamp
    and sorted member names, so equal inputs give identical files.
    """
    with atomic_path(path) as tmp:
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED) as zf:
            for key in sorted(arrays):
                info = zipfile.ZipInfo(f"{key}.npy", date_time=_ZIP_DATE)
                info.external_attr = 0o644 << 16
                with zf.open(info, "w", force_zip64=True) as fh:
                    np.lib.format.write_array(fh, np.asanyarray(arrays[key]), allow_pickle=False)
        os.chmod(tmp, 0o644)


class PreparedDataError(ValueError):
    """A prepared data set file is unreadable or breaks the format; the message names the file."""


def _fix_hint(path: str | os.PathLike) -> str:
    return (
        f"delete {os.fspath(path)} and rerun (the pipeline, or `dpaudit prepare-data`, "
        "writes it again)"
    )


def _read_npz(path: str | os.PathLike) -> tuple[dict[str, np.ndarray], str]:
    """Every array of ``path`` and its JSON meta string, with each member's CRC verified.

    A truncated or corrupt file (or one that is no ``.npz`` at all) raises
    :class:`PreparedDataError` naming the file and saying how to fix it.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{os.fspath(path)}: prepared data set not found")
    try:
        with zipfile.ZipFile(path) as zf:
            bad = zf.testzip()  # reads every member and checks its CRC-32
            if bad is not None:
                raise zipfile.BadZipFile(f"member {bad!r} fails its CRC-32 check")
        with np.load(path, allow_pickle=False) as z:
            missing = [k for k in (*ARRAY_KEYS, "meta") if k not in z.files]
            if missing:
                raise PreparedDataError(
                    f"{os.fspath(path)}: not a prepared data set; missing {missing}"
                )
            arrays = {k: z[k] for k in ARRAY_KEYS}
            meta = z["meta"]
    except PreparedDataError:
        raise
    except (zipfile.BadZipFile, EOFError, OSError, ValueError, zlib.error) as exc:
        raise PreparedDataError(
            f"{os.fspath(path)}: cannot read the prepared data set, it is truncated or corrupt "
            f"({type(exc).__name__}: {exc}); {_fix_hint(path)}"
        ) from exc
    if meta.shape != () or meta.dtype.kind != "U":
        raise PreparedDataError(f"{os.fspath(path)}: 'meta' is not a JSON string")
    return arrays, str(meta.item())


def _check_prepared(path: str | os.PathLike, arrays: dict[str, np.ndarray], meta: Any) -> None:
    """Dtypes, lengths, equal record shapes, finite inputs and labels in ``[0, num_classes)``."""
    name = os.fspath(path)
    if not isinstance(meta, dict):
        raise PreparedDataError(f"{name}: 'meta' is not a JSON object")
    shape = arrays["x_train"].shape[1:]
    k = meta.get("num_classes")
    for part in ("train", "test", "canary"):
        x, y = arrays[f"x_{part}"], arrays[f"y_{part}"]
        if x.dtype != np.float32 or y.dtype != np.int64 or x.shape[0] != y.shape[0]:
            raise PreparedDataError(
                f"{name}: x_{part} {x.dtype}{x.shape} / y_{part} {y.dtype}{y.shape} should be "
                f"float32 / int64 with equal lengths"
            )
        if y.ndim != 1 or x.shape[1:] != shape:
            raise PreparedDataError(
                f"{name}: x_{part} has records of shape {x.shape[1:]} (x_train: {shape}) or "
                f"y_{part} is not 1-D"
            )
        flat = x.reshape(x.shape[0], math.prod(shape))
        finite = np.concatenate(  # in blocks of rows: no input-sized temporary
            [np.isfinite(flat[i : i + 4096]).all(axis=1) for i in range(0, len(flat), 4096)]
            or [np.ones(0, dtype=bool)]
        )
        if not finite.all():
            raise PreparedDataError(
                f"{name}: x_{part} row {int(np.argmin(finite))} holds NaN or inf "
                f"({int((~finite).sum())} such row(s)); {_fix_hint(path)}"
            )
        if isinstance(k, int) and y.size and (y.min() < 0 or y.max() >= k):
            row = int(np.argmax((y < 0) | (y >= k)))
            raise PreparedDataError(
                f"{name}: y_{part} row {row} is {int(y[row])}, outside the data set's "
                f"{k} classes [0, {k})"
            )


def load_prepared(path: str | os.PathLike) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Read a prepared data set: ``(arrays, meta)``.

    Checks that the file is a complete ``.npz`` (every member's CRC), the keys, dtypes, lengths
    and record shapes, that the inputs are finite and the labels in ``[0, num_classes)``; any
    violation raises :class:`PreparedDataError` (a ``ValueError``) naming the file.
    """
    arrays, meta_text = _read_npz(path)
    what = f"{os.fspath(path)}: 'meta'"
    meta = parse_json(meta_text, what, _fix_hint(path), PreparedDataError)
    _check_prepared(path, arrays, meta)
    return arrays, meta


# ----------------------------------------------------------------------------- params


def _keys(name: str) -> frozenset[str]:
    """The params data set ``name`` takes: its catalog keys and ``seed``."""
    return entry(name).keys | {"seed"}


def _check_keys(name: str, params: Mapping[str, Any], allowed: frozenset[str]) -> None:
    unknown = sorted(set(params) - allowed)
    if unknown:
        raise ValueError(f"{name}: unknown param(s) {unknown}; allowed: {sorted(allowed)}")


def _opt_int(params: Mapping[str, Any], key: str, minimum: int, default: int | None) -> int | None:
    v = params.get(key, default)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < minimum:
        raise ValueError(f"param {key!r} must be an integer >= {minimum} or null, got {v!r}")
    return int(v)


def _classes(params: Mapping[str, Any], k: int) -> list[int] | None:
    c = params.get("classes")
    if c is None:
        return None
    if (
        isinstance(c, str | bytes)
        or not isinstance(c, Sequence)
        or len(c) < 2
        or any(isinstance(v, bool) or not isinstance(v, int | np.integer) for v in c)
        or len(set(c)) != len(c)
        or any(not 0 <= v < k for v in c)
    ):
        raise ValueError(f"param 'classes' must list >= 2 distinct labels in [0, {k}), got {c!r}")
    return [int(v) for v in c]


def _choose(rng: np.random.Generator, pool: np.ndarray, n: int | None, what: str) -> np.ndarray:
    """Sorted subset of ``n`` elements of ``pool`` drawn without replacement (all if None)."""
    if n is None:
        return np.sort(pool)
    if n > pool.size:
        raise ValueError(f"{what}: asked for {n} records but only {pool.size} are available")
    return np.sort(rng.choice(pool, size=n, replace=False))


# ----------------------------------------------------------------------------- core


def _select(
    name: str,
    params: Mapping[str, Any],
    y_train_src: np.ndarray,
    y_test_src: np.ndarray,
    k: int,
    streams: list[np.random.SeedSequence],
) -> dict[str, Any]:
    """Index sets (into the source splits) and the label map; see the module docstring."""
    classes = _classes(params, k)
    canary_pool = _opt_int(params, "canary_pool", 0, 0)
    n_test = _opt_int(params, "n_test", 0, None)
    n_train = _opt_int(params, "n_train", 1, None)

    train_pool = np.arange(y_train_src.size)
    test_pool = np.arange(y_test_src.size)
    if classes is not None:
        train_pool = train_pool[np.isin(y_train_src, classes)]
        test_pool = test_pool[np.isin(y_test_src, classes)]
    canary_idx = _choose(
        np.random.default_rng(streams[_S_CANARY]), test_pool, canary_pool, f"{name} canary_pool"
    )
    remaining = np.setdiff1d(test_pool, canary_idx, assume_unique=True)
    test_idx = _choose(np.random.default_rng(streams[_S_TEST]), remaining, n_test, f"{name} n_test")
    train_idx = _choose(
        np.random.default_rng(streams[_S_TRAIN]), train_pool, n_train, f"{name} n_train"
    )
    lut = np.full(k, -1, dtype=np.int64)
    if classes is None:
        lut[:] = np.arange(k)
    else:
        lut[classes] = np.arange(len(classes))
    return {
        "train": train_idx,
        "test": test_idx,
        "canary": canary_idx,
        "lut": lut,
        "classes": classes,
    }


def _finish(
    out: str | os.PathLike,
    parts: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]],
    meta: dict[str, Any],
) -> None:
    arrays: dict[str, np.ndarray] = {}
    for part, (x, y, idx) in parts.items():
        arrays[f"x_{part}"] = np.ascontiguousarray(x, dtype=np.float32)
        arrays[f"y_{part}"] = np.ascontiguousarray(y, dtype=np.int64)
        arrays[f"{part}_index"] = np.ascontiguousarray(idx, dtype=np.int64)
    meta = {
        **meta,
        FORMAT_VERSION_KEY: FORMAT_VERSION,
        "n_train": int(arrays["y_train"].size),
        "n_test": int(arrays["y_test"].size),
        "n_canary": int(arrays["y_canary"].size),
        "input_shape": list(arrays["x_train"].shape[1:]),
    }
    arrays["meta"] = np.array(json.dumps(meta, sort_keys=True, allow_nan=False))
    write_npz(out, arrays)


def _prepare_real(
    name: str,
    params: Mapping[str, Any],
    source_train: tuple[np.ndarray, np.ndarray],
    source_test: tuple[np.ndarray, np.ndarray],
    k: int,
    class_names: list[str],
    streams: list[np.random.SeedSequence],
    convert,
    meta: dict[str, Any],
    out: str | os.PathLike,
    row_maps: tuple[np.ndarray, np.ndarray] | None = None,
) -> None:
    """Select, relabel, convert and write. ``row_maps`` maps split positions to file rows."""
    (xs_tr, ys_tr), (xs_te, ys_te) = source_train, source_test
    sel = _select(name, params, ys_tr, ys_te, k, streams)
    lut = sel["lut"]
    map_tr, map_te = row_maps if row_maps is not None else (None, None)
    parts = {}
    for part, xs, ys, rows in (
        ("train", xs_tr, ys_tr, map_tr),
        ("test", xs_te, ys_te, map_te),
        ("canary", xs_te, ys_te, map_te),
    ):
        idx = sel[part]
        parts[part] = (convert(xs[idx]), lut[ys[idx]], idx if rows is None else rows[idx])
    kept = sel["classes"] if sel["classes"] is not None else list(range(k))
    meta = {
        **meta,
        "num_classes": len(kept),
        "source_labels": kept,
        "classes": [class_names[c] for c in kept],
    }
    _finish(out, parts, meta)


def _prepare_vision(name, params, root, mirror, streams, out) -> None:
    from dpaudit.data.vision import NUM_CLASSES, channel_stats, load_vision, to_float

    _check_keys(name, params, _keys(name))
    checksums = params.get("checksums")
    if checksums is not None and not isinstance(checksums, Mapping):
        raise ValueError(f"param 'checksums' must map file names to md5 strings, got {checksums!r}")
    data = load_vision(name, root, mirror, checksums)
    norm = params.get("normalize", False)
    if norm is True:
        mean, std = channel_stats(data["x_train"])
    elif norm is False or norm is None:
        mean = std = None
    elif isinstance(norm, Mapping) and set(norm) == {"mean", "std"}:
        mean, std = list(norm["mean"]), list(norm["std"])
    else:
        raise ValueError(f"param 'normalize' must be true, false or {{mean, std}}, got {norm!r}")
    meta = {
        "dataset": name,
        "params": dict(params),
        "sources": data["sources"],
        "split": "torchvision train/test split",
        "normalization": None if mean is None else {"mean": mean, "std": std},
    }
    _prepare_real(
        name,
        params,
        (data["x_train"], data["y_train"]),
        (data["x_test"], data["y_test"]),
        NUM_CLASSES[name],
        data["classes"],
        streams,
        lambda x: to_float(x, mean, std),
        meta,
        out,
    )


def _test_fraction(params: Mapping[str, Any]) -> float:
    frac = params.get("test_fraction", DEFAULT_TEST_FRACTION)
    if isinstance(frac, bool) or not isinstance(frac, int | float) or not 0 < frac < 1:
        raise ValueError(f"param 'test_fraction' must be a number in (0, 1), got {frac!r}")
    return float(frac)


def _prepare_tabular(name, params, root, mirror, streams, out) -> None:
    from dpaudit.data.tabular import TABULAR_DATASETS, load_tabular

    _check_keys(name, params, _keys(name))
    frac = _test_fraction(params)
    data = load_tabular(name, root, mirror, params.get("sha256"))
    _prepare_split(name, params, data, TABULAR_DATASETS[name].classes, frac, streams, out)


def _prepare_bundled(name, params, streams, out) -> None:
    from dpaudit.data.bundled import DIGITS_CLASSES, load_digits

    _check_keys(name, params, _keys(name))
    frac = _test_fraction(params)
    data = load_digits(params.get("sha256"))
    # pixels 0..16 -> [0, 1], the range of the vision data sets without normalisation
    _prepare_split(name, params, data, DIGITS_CLASSES, frac, streams, out, scale=16.0)


def _prepare_split(name, params, data, k, frac, streams, out, scale: float = 1.0) -> None:
    """A seeded train/test split of one array of records (tables, bundled data), then
    :func:`_prepare_real`; ``scale`` divides the values (digits: 16)."""
    x, y = data["x"], data["y"]
    n = y.size
    n_test_src = int(round(frac * n))
    perm = np.random.default_rng(streams[_S_SPLIT]).permutation(n)
    test_rows, train_rows = np.sort(perm[:n_test_src]), np.sort(perm[n_test_src:])
    meta = {
        "dataset": name,
        "params": dict(params),
        "sources": data["sources"],
        "split": f"seeded random split of the file's rows, test_fraction={frac}",
        "normalization": None if scale == 1.0 else {"divided_by": scale},
    }
    _prepare_real(
        name,
        params,
        (x[train_rows], y[train_rows]),
        (x[test_rows], y[test_rows]),
        k,
        data["classes"],
        streams,
        lambda v: v.astype(np.float32) / np.float32(scale),
        meta,
        out,
        row_maps=(train_rows, test_rows),
    )


def _prepare_synthetic(params, out) -> None:
    from dpaudit.data.synthetic import make_synthetic

    result = make_synthetic(**params)
    missing = [k for k in ("x_train", "y_train", "x_test", "y_test") if k not in result]
    if missing:
        raise ValueError(f"make_synthetic returned no {missing}")
    x_tr = np.asarray(result["x_train"])
    x_can = np.asarray(result.get("x_canary", np.empty((0, *x_tr.shape[1:]), np.float32)))
    y_can = np.asarray(result.get("y_canary", np.empty(0, np.int64)))
    parts = {}
    for part, x, y in (
        ("train", x_tr, result["y_train"]),
        ("test", result["x_test"], result["y_test"]),
        ("canary", x_can, y_can),
    ):
        x, y = np.asarray(x), np.asarray(y)
        if x.shape[0] != y.shape[0] or y.ndim != 1:
            raise ValueError(f"make_synthetic: x_{part} {x.shape} and y_{part} {y.shape} disagree")
        parts[part] = (x, y, np.arange(y.shape[0]))
    labels = np.concatenate([p[1] for p in parts.values()]).astype(np.int64)
    meta = {
        "dataset": "synthetic",
        "params": dict(params),
        "sources": [],
        "split": "make_synthetic",
        "normalization": None,
        "num_classes": int(labels.max()) + 1 if labels.size else 0,
    }
    _finish(out, parts, meta)


def prepare_dataset(
    name: str,
    params: dict,
    root: str,
    mirror: str | None,
    out: str,
) -> None:
    """Prepare data set ``name`` with ``params`` (module docstring) and write ``out`` atomically.

    ``root`` is the download/cache folder for raw files (torchvision layout for images,
    ``<root>/<name>/`` for tables); ``mirror`` replaces the network (a local directory or a
    ``file://``/``http(s)://`` base URL; see :func:`dpaudit.data.download.fetch`).
    """
    kind = entry(name).kind  # an unknown name raises, listing the known ones
    params = dict(params or {})
    if mirror is not None and not isinstance(mirror, str | os.PathLike):
        mirror = [os.fspath(m) for m in mirror]  # a list of mirrors, tried in order
    elif mirror is not None and not os.fspath(mirror).strip():
        mirror = None  # an empty config value means "no mirror"
    if kind == "synthetic":
        _prepare_synthetic(params, out)
        return
    seed = params.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ValueError(f"param 'seed' must be an integer >= 0, got {seed!r}")
    streams = np.random.SeedSequence(int(seed)).spawn(4)
    if kind == "tabular":
        _prepare_tabular(name, params, root, mirror, streams, out)
    elif kind == "bundled":
        _prepare_bundled(name, params, streams, out)
    else:
        _prepare_vision(name, params, root, mirror, streams, out)
