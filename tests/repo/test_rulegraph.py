"""docs/rulegraph.{dot,svg,png} show the current workflow (docs/rulegraph.py)."""

import importlib.util
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _module():
    spec = importlib.util.spec_from_file_location("rulegraph", ROOT / "docs" / "rulegraph.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


rulegraph = _module()


@pytest.mark.slow
def test_the_rule_graph_in_docs_is_current():
    current = rulegraph.canonical_dot(rulegraph.snakemake_rulegraph())
    assert "train" in current and "figure_eps" in current
    assert rulegraph.problems(current) == [], rulegraph.FIX


def test_a_changed_workflow_or_a_picture_not_rendered_from_the_dot_is_stale(tmp_path):
    for ext in ("dot", "svg", "png"):
        shutil.copy(ROOT / "docs" / f"rulegraph.{ext}", tmp_path)
    kept = (tmp_path / "rulegraph.dot").read_text()
    assert rulegraph.problems(kept, tmp_path) == []
    # a rule added to the workflow
    added = kept.replace(
        "}\n", '    99[label = "train_shard", color = "0 0 0", style="rounded"];\n}\n'
    )
    assert rulegraph.problems(added, tmp_path) == [
        "rulegraph.dot differs from the current workflow's rule graph"
    ]
    # the dot regenerated but the pictures not
    (tmp_path / "rulegraph.dot").write_text(added)
    assert rulegraph.problems(added, tmp_path) == [
        "rulegraph.svg was not rendered from rulegraph.dot",
        "rulegraph.png was not rendered from rulegraph.dot",
    ]


def test_canonical_dot_does_not_depend_on_snakemake_s_order():
    a = '0[label = "all", color = "1", style="rounded"];\n1[label = "b", color = "2"];\n1 -> 0\n'
    b = '0[label = "b", color = "2"];\n1[label = "all", color = "1"];\n0 -> 1\n'
    assert rulegraph.canonical_dot(a) == rulegraph.canonical_dot(b)
    assert "1 -> 0" in rulegraph.canonical_dot(a)


def test_png_text_chunk_round_trip():
    png = (ROOT / "docs" / "rulegraph.png").read_bytes()
    again = rulegraph._png_with_text(png, "k", "v")
    assert rulegraph.png_text(again)["k"] == "v"
    assert rulegraph.png_text(again)[rulegraph.KEY] == rulegraph.sha256(
        (ROOT / "docs" / "rulegraph.dot").read_text()
    )
