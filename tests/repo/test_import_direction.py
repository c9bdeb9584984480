"""Imports inside ``dpaudit/`` point one way: down the layers of docs/architecture.md.

Every module of the package is parsed (not imported) and every ``import`` / ``from ... import``
in it, at module level or inside a function, is mapped to the layer of the imported module. A
module may import its own unit (subpackage or top-level module) and any unit of a strictly
lower layer; anything else (an upward import, or one between two units of the same layer)
fails, naming both modules and both layers. A new subpackage or top-level module must be
placed in :data:`LAYERS` before it can be imported at all. Inside a unit, imports may go either
way but never round in a circle (:func:`import_circles`).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "dpaudit"

#: Layers from the bottom up; a unit is a subpackage or a top-level module of ``dpaudit``
#: (``""`` is the package itself, which holds only ``__version__``).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("", "defaults", "io", "joblog", "keys", "opacus_import", "seeding"),
    ("accounting", "scores", "likelihood_ratios", "manifest"),
    ("data", "models", "canaries"),
    ("training", "mechanisms"),
    ("estimators",),
    ("analyses",),
    ("audit",),
    ("verdict",),
    ("tables", "reproduction", "plots"),
    ("attach",),
    ("pipeline", "report"),
    ("config",),
    ("commands",),
    ("cli",),
)

LAYER_OF: dict[str, int] = {unit: i for i, units in enumerate(LAYERS) for unit in units}

#: A lazily imported ``"module:function"`` target written as a string.
LAZY_TARGET = re.compile(r"(dpaudit(?:\.\w+)+):\w+")


def module_name(path: Path, package: Path = PACKAGE) -> str:
    """``dpaudit/a/b.py`` -> ``dpaudit.a.b``; ``dpaudit/a/__init__.py`` -> ``dpaudit.a``."""
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def all_modules(package: Path = PACKAGE) -> dict[str, Path]:
    return {module_name(p, package): p for p in sorted(package.rglob("*.py"))}


def _resolve_from(node: ast.ImportFrom, importer: str, is_package: bool) -> str:
    """The absolute module named by a ``from X import ...`` (relative imports resolved)."""
    if not node.level:
        return node.module or ""
    base = importer.split(".")
    if not is_package:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imported_modules(path: Path, modules: dict[str, Path], package: Path = PACKAGE) -> set[str]:
    """Every ``dpaudit`` module that ``path`` imports, anywhere in the file.

    ``from a.b import c`` counts as an import of ``a.b.c`` when that is a module, else of
    ``a.b``; a string ``"dpaudit.a.b:func"`` (a lazy ``importlib`` target) counts as an import
    of ``dpaudit.a.b``."""
    importer = module_name(path, package)
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve_from(node, importer, path.name == "__init__.py")
            for alias in node.names:
                full = f"{base}.{alias.name}"
                out.add(full if full in modules else base)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            match = LAZY_TARGET.fullmatch(node.value)
            if match:
                out.add(match.group(1))
    return {m for m in out if m == "dpaudit" or m.startswith("dpaudit.")}


def unit_of(module: str) -> str:
    """The subpackage or top-level module of ``dpaudit`` that ``module`` belongs to."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def layer_of(module: str) -> int:
    unit = unit_of(module)
    if unit not in LAYER_OF:
        raise AssertionError(
            f"{module}: unit {unit!r} has no layer; add it to LAYERS in {Path(__file__).name} "
            "and to docs/architecture.md"
        )
    return LAYER_OF[unit]


def describe(layer: int) -> str:
    return f"layer {layer} ({', '.join(u or 'dpaudit' for u in LAYERS[layer])})"


def violations() -> list[tuple[str, str, str]]:
    """(importer, imported, message) for every import that does not point down."""
    modules = all_modules()
    out = []
    for importer, path in modules.items():
        for imported in sorted(imported_modules(path, modules)):
            if unit_of(imported) == unit_of(importer):
                continue
            low, high = layer_of(importer), layer_of(imported)
            if high >= low:
                out.append(
                    (
                        importer,
                        imported,
                        f"{importer} ({describe(low)}) imports {imported} ({describe(high)})",
                    )
                )
    return out


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (anywhere in the file), without itself and
    without the packages that contain it (importing a submodule runs its parents' ``__init__``:
    that is no circle of the code's own making)."""
    modules = all_modules(package)
    graph = {}
    for importer, path in modules.items():
        graph[importer] = {
            m
            for m in imported_modules(path, modules, package)
            if m in modules and m != importer and not importer.startswith(m + ".")
        }
    return graph


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The circles of ``graph``: each strongly connected set of two or more modules, sorted
    (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return sorted(out)


@pytest.mark.slow
def test_no_import_circles_inside_a_package() -> None:
    """No module imports, directly or through others, a module that imports it back: the
    layers keep circles out between units, this keeps them out inside one (e.g. two modules
    of ``dpaudit.training``), function-local imports included."""
    circles = import_circles(import_graph())
    assert not circles, "import circles:\n  " + "\n  ".join(" <-> ".join(c) for c in circles)


def test_circle_finder_finds_circles_through_function_local_imports(tmp_path: Path) -> None:
    """a -> b at module level and b -> a inside a function is a circle; c, imported by both
    and importing neither, is not in it; a submodule importing its package is no circle."""
    pkg = tmp_path / "dpaudit"
    (pkg / "training").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "training" / "__init__.py").write_text("")
    (pkg / "training" / "a.py").write_text("from dpaudit.training import b, c\n")
    local = "def f():\n    from . import a\n"
    (pkg / "training" / "b.py").write_text("import dpaudit.training.c\n" + local)
    (pkg / "training" / "c.py").write_text("import dpaudit.training\n")
    graph = import_graph(pkg)
    assert import_circles(graph) == [["dpaudit.training.a", "dpaudit.training.b"]]
    (pkg / "training" / "b.py").write_text("import dpaudit.training.c\n")
    assert import_circles(import_graph(pkg)) == []


def test_every_unit_has_a_layer() -> None:
    for module in all_modules():
        layer_of(module)


@pytest.mark.slow
def test_imports_point_down_the_layers() -> None:
    bad = [msg for _, _, msg in violations()]
    assert not bad, "imports that point up (or sideways):\n  " + "\n  ".join(bad)


def test_checker_sees_function_local_and_relative_imports(tmp_path: Path) -> None:
    """The parser finds imports inside functions, resolves relative ones and reads lazy
    ``"module:function"`` targets."""
    pkg = tmp_path / "dpaudit"
    (pkg / "mechanisms").mkdir(parents=True)
    (pkg / "analyses").mkdir()
    for f in ("__init__.py", "mechanisms/__init__.py", "analyses/__init__.py", "analyses/x.py"):
        (pkg / f).write_text("")
    src = pkg / "mechanisms" / "m.py"
    src.write_text(
        "def f():\n    from ..analyses import x\n    import dpaudit.audit\n"
        "T = {'a': 'dpaudit.tables:g'}\n"
    )
    found = imported_modules(src, all_modules(pkg), pkg)
    assert found == {"dpaudit.analyses.x", "dpaudit.audit", "dpaudit.tables"}


@pytest.mark.parametrize(
    ("importer", "imported", "ok"),
    [
        ("dpaudit.analyses.selection", "dpaudit.mechanisms.selection_game", True),
        ("dpaudit.mechanisms.registry", "dpaudit.analyses.selection", False),
        ("dpaudit.training.shard", "dpaudit.mechanisms.registry", False),
        ("dpaudit.estimators.lidp.bound", "dpaudit.estimators.lidp.xbern", True),
        ("dpaudit.commands.audit", "dpaudit.cli", False),
    ],
)
def test_rule(importer: str, imported: str, ok: bool) -> None:
    same = unit_of(importer) == unit_of(imported)
    assert (same or layer_of(imported) < layer_of(importer)) is ok


def private_imports(roots: list[Path]) -> list[str]:
    """``from X import _name`` (or ``from . import _name``) of a dpaudit module, in the files
    under ``roots``: a private name used outside its module (issue 26, item 2)."""
    out = []
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                if not isinstance(node, ast.ImportFrom):
                    continue
                if not (node.level or (node.module or "").startswith("dpaudit")):
                    continue
                for alias in node.names:
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        where = "." * node.level + (node.module or "")
                        out.append(f"{path.name}:{node.lineno} {alias.name} from {where}")
    return out


def test_no_private_names_imported_across_modules(tmp_path: Path) -> None:
    """The library, the scripts and the benchmarks import only public names of dpaudit's
    modules (the tests may reach into a module's private helpers to test them); the checker
    itself finds a planted private import, relative or absolute."""
    repo = PACKAGE.parent
    found = private_imports([PACKAGE, repo / "scripts", repo / "benchmarks"])
    assert not found, "private names imported across modules:\n  " + "\n  ".join(found)
    pkg = tmp_path / "dpaudit"
    pkg.mkdir()
    (pkg / "a.py").write_text("from dpaudit.b import _helper, public\nfrom . import _c\n")
    assert private_imports([pkg]) == ["a.py:1 _helper from dpaudit.b", "a.py:2 _c from ."]
