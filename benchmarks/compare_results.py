"""Compare two ``results/`` trees of the same config, run by two commits: what a refactor
must leave byte-identical, and what changed where.

    python benchmarks/compare_results.py BEFORE/results AFTER/results [--figures]

Per kind of file:

* score files (``*.npz``) and every other file: byte-identical or not (SHA-256);
* tables (``*.csv``) that differ in bytes: the columns added and removed, the number of rows,
  and every common column whose values differ (as text, NaN equal to NaN), so a new column or a
  reworded verdict is told apart from a changed bound;
* figures (``*.png``, with ``--figures``): a changed size, or the share of pixels that differ;
* Snakemake's ``benchmarks/*.tsv`` (timings) and the PDFs (which embed a creation date) are
  listed as expected to differ, and not compared.

Exit status 1 if a score file differs or is missing on one side. Used for issue 26's check that
the refactor changed no result of the default config (docs/contributing.md, "Refactoring").
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from collections import Counter
from pathlib import Path


def digests(root: Path) -> dict[str, str]:
    """SHA-256 of every file under ``root``, by path relative to it."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _sorted_rows(frame):  # noqa: ANN001, ANN202 (pandas is imported lazily)
    text = frame.astype(str)
    return text.sort_values(list(text.columns)).reset_index(drop=True)


def table_change(before: Path, after: Path) -> str:
    """What differs between two CSV tables: rows, added / removed / changed columns."""
    import pandas as pd

    x, y = pd.read_csv(before), pd.read_csv(after)
    out = []
    added = [c for c in y.columns if c not in x.columns]
    removed = [c for c in x.columns if c not in y.columns]
    if len(x) != len(y):
        out.append(f"rows {len(x)} -> {len(y)}")
    else:
        changed = []
        for c in (c for c in x.columns if c in y.columns):
            same = (x[c].astype(str) == y[c].astype(str)) | (x[c].isna() & y[c].isna())
            if not same.all():
                changed.append(f"{c} ({int((~same).sum())} rows)")
        common = [c for c in x.columns if c in y.columns]
        if changed and _sorted_rows(x[common]).equals(_sorted_rows(y[common])):
            out.append("the same rows in another order")
        elif changed:
            out.append("changed " + ", ".join(changed))
    if added:
        out.append("added " + ", ".join(added))
    if removed:
        out.append("removed " + ", ".join(removed))
    return "; ".join(out) or "the same values (formatting only)"


def figure_change(before: Path, after: Path) -> str:
    """A changed image size, or the share of pixels that differ."""
    import matplotlib.image as mpimg
    import numpy as np

    x, y = mpimg.imread(before), mpimg.imread(after)
    if x.shape != y.shape:
        return f"size {x.shape[1]}x{x.shape[0]} -> {y.shape[1]}x{y.shape[0]}"
    return f"{100 * float((np.abs(x - y).max(axis=-1) > 0).mean()):.2f}% of pixels differ"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    ap.add_argument("--figures", action="store_true", help="compare the PNGs pixel by pixel")
    args = ap.parse_args()
    b, a = digests(args.before), digests(args.after)
    same = sorted(f for f in b.keys() & a.keys() if a[f] == b[f])
    diff = sorted(f for f in b.keys() & a.keys() if a[f] != b[f])
    only_b, only_a = sorted(b.keys() - a.keys()), sorted(a.keys() - b.keys())
    kind = lambda f: f.rsplit(".", 1)[-1]  # noqa: E731
    print(f"identical: {len(same)} files {dict(Counter(map(kind, same)))}")
    print(f"differ: {len(diff)} files {dict(Counter(map(kind, diff)))}")
    for f in only_b:
        print(f"only before: {f}")
    for f in only_a:
        print(f"only after: {f}")
    bad = [f for f in diff + only_b + only_a if f.endswith(".npz")]
    for f in diff:
        if "/benchmarks/" in f or f.endswith((".tsv", ".pdf", ".html")):
            continue  # timings, embedded dates
        if f.endswith(".csv"):
            print(f"table  {f}: {table_change(args.before / f, args.after / f)}")
        elif f.endswith(".png") and args.figures:
            print(f"figure {f}: {figure_change(args.before / f, args.after / f)}")
        elif not f.endswith(".png"):
            print(f"file   {f}: bytes differ")
    expected = sum(1 for f in diff if "/benchmarks/" in f or f.endswith((".tsv", ".pdf", ".html")))
    print(f"not compared (timings, PDFs with a creation date, the HTML report): {expected}")
    print(f"score files: {'ALL IDENTICAL' if not bad else f'{len(bad)} DIFFER OR MISSING'}")
    for f in bad:
        print(f"  score file differs or is missing: {f}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
