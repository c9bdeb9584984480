"""The ``dpaudit`` command line: one subcommand per module in :mod:`dpaudit.commands`.

Each module there is one subcommand, named after the module (``_`` read as ``-``): its
docstring is the subcommand's description (or ``DESCRIPTION`` where the text is computed),
``HELP`` its line in ``dpaudit --help``, ``ALIASES`` its other names (optional),
``arguments(parser)`` adds its options and ``run(args)`` runs it (an exit code). New
subcommands need no edit here.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
import traceback
from collections.abc import Sequence

from dpaudit import __version__, commands
from dpaudit.commands import emit

__all__ = ["build_parser", "emit", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dpaudit", description="Empirical privacy auditing of DP machine learning."
    )
    parser.add_argument("--version", action="version", version=f"dpaudit {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda i: i.name):
        module = importlib.import_module(f"{commands.__name__}.{info.name}")
        p = sub.add_parser(
            info.name.replace("_", "-"),
            aliases=getattr(module, "ALIASES", []),
            help=module.HELP,
            description=getattr(module, "DESCRIPTION", module.__doc__),
        )
        module.arguments(p)
        p.set_defaults(func=module.run)
    return parser


def expected_errors() -> tuple[type[BaseException], ...]:
    """Exception types that mean bad input or a bad file (reported in one line, exit 2).

    Anything else is a bug in dpaudit and is reported with its traceback (exit 1).
    """
    import zipfile

    import yaml

    from dpaudit.data.download import DownloadError

    return (ValueError, OSError, zipfile.BadZipFile, yaml.YAMLError, EOFError, DownloadError)


def error_message(exc: BaseException) -> str:
    """One line for an expected error; an ``OSError`` also names its file."""
    if isinstance(exc, OSError) and exc.filename is not None and exc.strerror:
        return f"{exc.filename}: {exc.strerror}"
    return str(exc) or type(exc).__name__


def main(argv: Sequence[str] | None = None) -> int:
    """Run one subcommand: 0 on success, 2 on bad input (one line on stderr), 1 on a bug."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except expected_errors() as exc:
        print(f"dpaudit {args.command}: error: {error_message(exc)}", file=sys.stderr)
        return 2
    except Exception as exc:
        traceback.print_exc()
        print(
            f"dpaudit {args.command}: internal error (a bug in dpaudit, please report it with "
            f"the traceback above): {type(exc).__name__}: {exc}",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
