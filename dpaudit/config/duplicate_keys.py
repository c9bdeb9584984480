"""Keys a config gives twice: YAML (and so Snakemake's ``--configfile``) and Snakemake's
``--config`` keep the last value of a repeated key silently.

:func:`check_duplicate_keys` runs on each config file (``dpaudit audit --config``, and every
file Snakemake read, in ``rules/common.smk``), :func:`check_duplicate_config_args` on
Snakemake's ``--config`` arguments; each error names the file (or the arguments), every key
given twice and both places.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from dpaudit.config.errors import GuardError
from dpaudit.defaults import SAFE_LOADER


def duplicate_keys(path: str | Path) -> list[str]:
    """Each key a mapping of the YAML (or JSON) file gives more than once, as ``key.path
    (lines A and B)`` (``line A, columns B and C`` for both in one flow mapping,
    ``{epochs: 3, epochs: 300}``): PyYAML, and so Snakemake's ``--configfile``, keeps the last
    silently. Merge keys (``<<: *anchor``) may be overridden and are not counted. A file that
    does not parse gives [] (its loader reports the syntax error)."""
    return _text_duplicates(Path(path).read_text())


def _text_duplicates(text: str, where: str = "") -> list[str]:
    """:func:`duplicate_keys` of YAML ``text``, the key paths prefixed by ``where``."""
    import yaml

    loader = SAFE_LOADER(text)
    try:
        root = loader.get_single_node()
        return [] if root is None else list(_duplicates(loader, root, where, set()))
    except yaml.YAMLError:
        return []
    finally:
        loader.dispose()


def _duplicates(loader: Any, node: Any, where: str, seen: set[int]) -> Iterator[str]:
    import yaml

    if id(node) in seen:  # an alias of a node already walked
        return
    seen.add(id(node))
    if isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            yield from _duplicates(loader, item, f"{where}[{i}]", seen)
    if not isinstance(node, yaml.MappingNode):
        return
    marks: dict[Any, Any] = {}
    for key_node, value_node in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=True)
        mark = key_node.start_mark
        try:
            first = marks.setdefault(key, mark)
        except TypeError:  # an unhashable key: the loader rejects it itself
            continue
        path = f"{where}.{key}" if where else str(key)
        if first is not mark:  # also two keys on one line: a flow mapping {a: 1, a: 2}
            yield f"{path} ({_where_both(first, mark)})"
        yield from _duplicates(loader, value_node, path, seen)


def _where_both(first: Any, second: Any) -> str:
    """``lines 3 and 4``, or ``line 3, columns 12 and 23`` for two keys on one line."""
    if first.line != second.line:
        return f"lines {first.line + 1} and {second.line + 1}"
    return f"line {first.line + 1}, columns {first.column + 1} and {second.column + 1}"


def check_duplicate_keys(path: str | Path) -> None:
    """Raise :class:`GuardError` naming the file, every key given twice and both lines."""
    found = duplicate_keys(path)
    if found:
        raise GuardError(
            f"config file {path}: duplicate key(s) {'; '.join(found)}; YAML keeps only the last "
            "value of a repeated key, so the other would be dropped silently; allowed: each key "
            "once per mapping (merge the two blocks)"
        )


def duplicate_config_args(entries: Sequence[str] | None) -> list[str]:
    """Each key Snakemake's ``--config KEY=VALUE ...`` sets more than once, by argument
    (``max_jobs (--config arguments 1 and 3)``), and each key repeated inside one value's YAML
    (``experiments.x.train.epochs (--config argument 2, columns 25 and 36)``): Snakemake keeps
    the last of either silently. An entry without ``=`` is left to Snakemake's own error."""
    found: list[str] = []
    first: dict[str, int] = {}
    for number, entry in enumerate(entries or [], start=1):
        key, sep, value = str(entry).partition("=")
        if not sep:
            continue
        if key in first:
            found.append(f"{key} (--config arguments {first[key]} and {number})")
        first.setdefault(key, number)
        for dup in _text_duplicates(value, key):
            path, _, where = dup.partition(" (")
            where = where.removesuffix(")").removeprefix("line 1, ")
            found.append(f"{path} (--config argument {number}, {where})")
    return found


def check_duplicate_config_args(entries: Sequence[str] | None) -> None:
    """Raise :class:`GuardError` naming every key ``--config`` gives twice (its arguments)."""
    found = duplicate_config_args(entries)
    if found:
        raise GuardError(
            f"command line: --config gives duplicate key(s) {'; '.join(found)}; Snakemake keeps "
            "only the last value of a repeated key, so the other would be dropped silently; "
            "allowed: each key once (one KEY=VALUE per key, each key once in a value's mapping)"
        )
