"""Subcommands of the ``dpaudit`` CLI; each module defines ``register(subparsers)``."""
