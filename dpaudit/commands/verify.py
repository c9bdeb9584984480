"""``dpaudit verify``: name every result that changed since the job that wrote it recorded it."""

from __future__ import annotations

import argparse

from dpaudit.commands import add_json_argument

#: Exit code when a file changed, is gone or is stale (0: all as recorded; 2: bad input).
CHANGED = 3


HELP = "check a results tree against the checksums its jobs recorded"
DESCRIPTION = (
    "Each pipeline job records the SHA-256 of every output it writes, and of "
    "every input it read, beside the output (.<name>.manifest.json; docs/verify.md). This "
    "command checks every record under the given folders or files and names each file "
    "whose content changed since it was written (edited, rewritten, cut: a restored "
    "modification time does not hide it), each recorded file that is gone, and each "
    "result made from an input that has changed since. Input paths in the records are "
    "relative to the working directory the run used: run it there. Exit 0 when all is as "
    f"recorded, {CHANGED} otherwise."
)


def arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "paths", nargs="*", default=["results"], help="folders or files (default: results)"
    )
    p.add_argument(
        "--list-unrecorded",
        action="store_true",
        help="also list each file that has no record (written before records existed, or by "
        "something other than a pipeline job, e.g. the per-target reports)",
    )
    add_json_argument(p)


def run(args: argparse.Namespace) -> int:
    from dpaudit.commands import emit
    from dpaudit.manifest import WAY_OUT, verify_tree

    found = verify_tree(*args.paths)
    lines = [f"changed: {path}: {why}" for path, why in found.changed]
    lines += [f"missing: {path}: it was written and is now gone" for path in found.missing]
    lines += [f"stale: {p}: made from {src}, which has changed since" for p, src in found.stale]
    if args.list_unrecorded:
        lines += [f"unrecorded: {path}" for path in found.unrecorded]
    summary = (
        f"{found.checked} recorded file(s) checked under {', '.join(args.paths)}: "
        f"{len(found.changed)} changed, {len(found.missing)} missing, {len(found.stale)} stale; "
        f"{len(found.unrecorded)} file(s) without a record"
    )
    if not found.ok:
        summary += (
            f". A changed or missing file: {WAY_OUT}; a stale one: your usual target rebuilds it"
        )
    result = {
        "checked": found.checked,
        "changed": [{"path": p, "why": w} for p, w in found.changed],
        "missing": found.missing,
        "stale": [{"path": p, "input": s} for p, s in found.stale],
        "unrecorded": found.unrecorded,
        "ok": found.ok,
    }
    emit(result, args.json, "\n".join([*lines, summary]))
    return 0 if found.ok else CHANGED
