"""The workflow's rule graph, docs/rulegraph.{dot,svg,png}, made from the current Snakefile.

    python docs/rulegraph.py          # regenerate (needs Graphviz's `dot` for the pictures)
    python docs/rulegraph.py --check  # fail, saying what to run, if any of the three is stale

``snakemake --rulegraph`` of the default config, in a canonical form (rules sorted by name,
edges sorted: Snakemake's own order changes from run to run), is kept as docs/rulegraph.dot.
The SVG and PNG rendered from it carry its SHA-256 (an XML comment; a PNG tEXt chunk), so the
check needs no Graphviz: it compares the graph of the current workflow with rulegraph.dot and
the hash each picture carries with rulegraph.dot's. tests/repo/test_rulegraph.py runs the check.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = Path(__file__).resolve().parent
NAME = "rulegraph"
#: The PNG tEXt keyword and the SVG comment that hold the hash of the dot source.
KEY = "rulegraph-dot-sha256"
FIX = "run `python docs/rulegraph.py` (with Graphviz's dot installed) and commit docs/rulegraph.*"

_NODE = re.compile(r'^\s*(\d+)\[label = "([^"]+)", color = "([^"]+)"')
_EDGE = re.compile(r"^\s*(\d+) -> (\d+)\s*$")


def snakemake_rulegraph(root: Path = ROOT) -> str:
    """``snakemake --rulegraph`` of the default config, run in ``root``."""
    exe = shutil.which("snakemake") or str(Path(sys.executable).with_name("snakemake"))
    done = subprocess.run(
        [exe, "--rulegraph", "--quiet", "--nolock"],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"snakemake --rulegraph failed:\n{done.stderr}")
    return done.stdout


def canonical_dot(text: str) -> str:
    """The rule graph with rules numbered in name order and edges sorted (stable bytes)."""
    nodes: dict[str, tuple[str, str]] = {}
    edges = []
    for line in text.splitlines():
        if m := _NODE.match(line):
            nodes[m.group(1)] = (m.group(2), m.group(3))
        elif m := _EDGE.match(line):
            edges.append((m.group(1), m.group(2)))
    if not nodes:
        raise RuntimeError(f"no rules in the rule graph:\n{text}")
    names = sorted(name for name, _ in nodes.values())
    number = {old: names.index(name) for old, (name, _) in nodes.items()}
    colour = {name: c for name, c in nodes.values()}
    lines = [
        "digraph snakemake_dag {",
        "    graph[bgcolor=white, margin=0];",
        "    node[shape=box, style=rounded, fontname=sans, fontsize=10, penwidth=2];",
        "    edge[penwidth=2, color=grey];",
    ]
    lines += [
        f'    {i}[label = "{name}", color = "{colour[name]}", style="rounded"];'
        for i, name in enumerate(names)
    ]
    lines += [f"    {a} -> {b}" for a, b in sorted({(number[a], number[b]) for a, b in edges})]
    return "\n".join(lines + ["}"]) + "\n"


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _png_with_text(png: bytes, key: str, value: str) -> bytes:
    """``png`` with a tEXt chunk ``key``: ``value`` right after its header chunk."""
    body = key.encode("latin-1") + b"\0" + value.encode("latin-1")
    chunk = struct.pack(">I", len(body)) + b"tEXt" + body
    chunk += struct.pack(">I", zlib.crc32(b"tEXt" + body) & 0xFFFFFFFF)
    end_of_header = 8 + 4 + 4 + 13 + 4  # signature, IHDR length, type, data, CRC
    return png[:end_of_header] + chunk + png[end_of_header:]


def png_text(png: bytes) -> dict[str, str]:
    """The tEXt chunks of a PNG file."""
    found, pos = {}, 8
    while pos + 8 <= len(png):
        (length,) = struct.unpack(">I", png[pos : pos + 4])
        kind = png[pos + 4 : pos + 8]
        if kind == b"tEXt":
            key, _, value = png[pos + 8 : pos + 8 + length].partition(b"\0")
            found[key.decode("latin-1")] = value.decode("latin-1")
        pos += 12 + length
    return found


def svg_hash(svg: str) -> str | None:
    m = re.search(rf"<!-- {KEY}: ([0-9a-f]{{64}}) -->", svg)
    return m.group(1) if m else None


def render(dot_text: str, docs: Path = DOCS) -> None:
    """Write rulegraph.dot, and the SVG and PNG that Graphviz renders from it (with its hash)."""
    dot = shutil.which("dot")
    if dot is None:
        raise RuntimeError("Graphviz's `dot` is not installed (apt-get install graphviz)")
    digest = sha256(dot_text)

    def run(fmt: str) -> bytes:
        return subprocess.run(
            [dot, f"-T{fmt}"], input=dot_text.encode(), capture_output=True, check=True
        ).stdout

    svg = run("svg").decode()
    svg = re.sub(r"(<svg\b)", f"<!-- {KEY}: {digest} -->\n\\1", svg, count=1)
    (docs / f"{NAME}.dot").write_text(dot_text)
    (docs / f"{NAME}.svg").write_text(svg)
    (docs / f"{NAME}.png").write_bytes(_png_with_text(run("png"), KEY, digest))


def problems(current_dot: str, docs: Path = DOCS) -> list[str]:
    """What is stale in ``docs`` against the workflow's rule graph ``current_dot`` (canonical);
    empty when rulegraph.dot, .svg and .png are current."""
    found = []
    dot_file = docs / f"{NAME}.dot"
    if not dot_file.exists():
        return [f"{dot_file.name} is missing"]
    kept = dot_file.read_text()
    if kept != current_dot:
        found.append(f"{dot_file.name} differs from the current workflow's rule graph")
    digest = sha256(kept)
    svg = docs / f"{NAME}.svg"
    if not svg.exists() or svg_hash(svg.read_text()) != digest:
        found.append(f"{svg.name} was not rendered from {dot_file.name}")
    png = docs / f"{NAME}.png"
    if not png.exists() or png_text(png.read_bytes()).get(KEY) != digest:
        found.append(f"{png.name} was not rendered from {dot_file.name}")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if docs/rulegraph.* is stale")
    args = parser.parse_args(argv)
    current = canonical_dot(snakemake_rulegraph())
    if args.check:
        found = problems(current)
        for line in found:
            print(f"stale rule graph: {line}", file=sys.stderr)
        if found:
            print(FIX, file=sys.stderr)
        return 1 if found else 0
    render(current)
    print(f"wrote {DOCS / NAME}.dot, .svg, .png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
