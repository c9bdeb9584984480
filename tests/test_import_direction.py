"""Imports inside ``dpaudit/`` point one way: down the layers of docs/architecture.md.

Every module of the package is parsed (not imported) and every ``import`` / ``from ... import``
in it, at module level or inside a function, is mapped to the layer of the imported module. A
module may import its own unit (subpackage or top-level module) and any unit of a strictly
lower layer; anything else (an upward import, or one between two units of the same layer)
fails, naming both modules and both layers. A new subpackage or top-level module must be
placed in :data:`LAYERS` before it can be imported at all.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "dpaudit"

#: Layers from the bottom up; a unit is a subpackage or a top-level module of ``dpaudit``
#: (``""`` is the package itself, which holds only ``__version__``).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("", "defaults", "io", "joblog", "opacus_import", "seeding"),
    ("accounting", "scores", "likelihood_ratios"),
    ("data", "models", "canaries"),
    ("training", "mechanisms"),
    ("estimators",),
    ("analyses",),
    ("audit",),
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


def test_every_unit_has_a_layer() -> None:
    for module in all_modules():
        layer_of(module)


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
        ("dpaudit.estimators.lidp", "dpaudit.estimators.xbern", True),
        ("dpaudit.commands.audit", "dpaudit.cli", False),
    ],
)
def test_rule(importer: str, imported: str, ok: bool) -> None:
    same = unit_of(importer) == unit_of(imported)
    assert (same or layer_of(imported) < layer_of(importer)) is ok
