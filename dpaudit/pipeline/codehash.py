"""The version of the library code a job runs, as a rule parameter.

Snakemake reruns a job when its script (``scripts/*.py``, by modification time), its
``params:``, its inputs or its software environment changed, but it does not see the library
modules the script imports: after an edit of ``dpaudit/estimators/one_run/bound.py`` every audit
stayed "up to date". Each rule therefore gets a ``code`` parameter, :func:`code_hash` of its script:
a hash of every ``dpaudit`` module the script can import, directly or through other modules
(imports inside functions included), and of the package data files those modules name. An edit
of one of them changes the parameter of exactly the rules whose scripts can reach it, and
Snakemake's params trigger reruns their jobs (and what depends on their outputs).

What counts, and what does not:

- a module counts when an import statement anywhere in a reached module names it, inside
  functions too (found by their text, one statement a line or in parentheses, as ruff formats
  them; a module
  that imports by name at run time, ``importlib.import_module``, reaches its whole package:
  the estimator registry reaches every estimator); importing ``a.b.c`` reaches ``a`` and
  ``a.b`` (their ``__init__``);
- a module is hashed as its text: any edit of a reached module reruns, a comment or a
  docstring included (telling those apart would cost parsing every module in every Snakemake
  process; an import written in a string or comment also counts, which only adds reruns);
- package data (``*.yaml``, ``*.mplstyle``) counts when a reached module names its file (the
  schema through ``dpaudit.defaults``, the plot style through ``dpaudit.plots.style``); an edit
  of the schema's text reruns the jobs whose scripts read it;
- third-party packages (NumPy, SciPy, Opacus, ...) do not count: with ``--use-conda`` the
  environment file's changes rerun jobs (Snakemake's software-env trigger); otherwise an upgrade
  reruns nothing (``--forceall``, or ``-R <rule>``).

The hash is computed once per process and script (cached): a Snakemake run hashes each script's
modules once, in the main process and in each cluster job's.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Iterable
from pathlib import Path

#: The installed ``dpaudit`` package directory (the code the jobs import).
PACKAGE = Path(__file__).resolve().parents[1]

_IMPORT = re.compile(r"^[ \t]*import[ \t]+([\w. \t,]+)", re.MULTILINE)
_FROM = re.compile(
    r"^[ \t]*from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n#]*)", re.MULTILINE
)
_NAME = re.compile(r"[A-Za-z_][\w]*")


def _module_index(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, of every module of the package at ``root``."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = [root.name, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _prefixes(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def imported_names(text: str, package: str = "") -> set[str]:
    """Every dotted name an import statement of the source ``text`` may load (``package``:
    the package relative imports start from)."""
    names: set[str] = set()
    for match in _IMPORT.finditer(text):
        for part in match.group(1).split(","):
            words = part.split()
            if words:
                names.add(words[0])
    for match in _FROM.finditer(text):
        base, listed = match.group(1), match.group(2)
        level = len(base) - len(base.lstrip("."))
        if level:
            parts = package.split(".")[: len(package.split(".")) - level + 1]
            base = ".".join([*parts, *([base.lstrip(".")] if base.lstrip(".") else [])])
        names.add(base)
        for part in listed.strip("()").split(","):
            words = _NAME.findall(part.split("#")[0])
            if words:
                names.add(f"{base}.{words[0]}")
    return names


class _Package:
    """The modules of one package directory, each read once."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.index = _module_index(root)
        self.text = {name: path.read_text() for name, path in self.index.items()}
        self._direct: dict[str, frozenset[str]] = {}
        self.data = sorted(
            p
            for p in root.rglob("*")
            if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts
        )

    def package_of(self, name: str) -> str:
        return name if self.index[name].name == "__init__.py" else name.rpartition(".")[0]

    def direct(self, name: str) -> frozenset[str]:
        """The package's modules that module ``name`` may import (found once)."""
        if name not in self._direct:
            self._direct[name] = self._find_direct(name)
        return self._direct[name]

    def _find_direct(self, name: str) -> frozenset[str]:
        text, package = self.text[name], self.package_of(name)
        found = {
            prefix
            for imported in imported_names(text, package)
            for prefix in _prefixes(imported)
            if prefix in self.index
        }
        if "import_module(" in text:  # imports by a name made at run time: its whole package
            found.update(m for m in self.index if m == package or m.startswith(package + "."))
        return frozenset(found)

    def closure(self, start: Iterable[str]) -> list[str]:
        seen: set[str] = set()
        todo = [m for name in start for m in _prefixes(name) if m in self.index]
        while todo:
            name = todo.pop()
            if name not in seen:
                seen.add(name)
                todo.extend(self.direct(name) - seen)
        return sorted(seen)

    def data_files(self, modules: Iterable[str]) -> list[Path]:
        """Non-Python files of the package whose file name one of ``modules`` mentions."""
        texts = [self.text[m] for m in modules]
        return [p for p in self.data if any(p.name in t for t in texts)]


def library_modules(script: str | Path, root: str | Path = PACKAGE) -> list[str]:
    """The modules of the package at ``root`` that ``script`` may import, sorted."""
    return _Package(Path(root)).closure(imported_names(Path(script).read_text()))


#: The module through which scripts/train.py runs a user's ``train.entry_point``: it reaches the
#: own-training audit (and through it the estimators), which a job of the library's own engines
#: never runs, so those jobs' ``code`` leaves it out (:func:`code_hash`'s ``exclude``).
ENTRY_POINT_MODULE = "dpaudit.attach.pipeline"


def compute_code_hash(
    script: str | Path,
    root: str | Path = PACKAGE,
    package: _Package | None = None,
    exclude: tuple[str, ...] = (),
) -> str:
    """A hex digest of the module texts and data files ``script`` may use (``package``: the
    package at ``root``, read here when None), leaving out the modules the script imports by
    the names in ``exclude`` (and what only they reach): for a job that never runs them."""
    root = Path(root)
    package = package or _Package(root)
    names = {
        n
        for n in imported_names(Path(script).read_text())
        if not any(n == x or n.startswith(x + ".") for x in exclude)
    }
    modules = package.closure(names)
    digest = hashlib.sha256()
    for name in modules:
        digest.update(f"{name}\0{package.text[name]}\0".encode())
    for path in package.data_files(modules):
        digest.update(f"{path.relative_to(root).as_posix()}\0".encode() + path.read_bytes())
    return digest.hexdigest()[:16]


@functools.cache
def _read(root: Path) -> _Package:
    return _Package(root)


@functools.cache
def code_hash(script: str | Path, root: str | Path = PACKAGE, exclude: tuple[str, ...] = ()) -> str:
    """:func:`compute_code_hash`, once per process and script, the package read once (the
    rules' ``code`` param)."""
    return compute_code_hash(script, root, _read(Path(root)), exclude)
