"""Explicit, stable seed derivation: the same (parts) give the same seed on every machine."""

from __future__ import annotations

import hashlib


def derive_seed(*parts: object) -> int:
    """A 63-bit seed from any printable parts, e.g. ``derive_seed(seed, "coins", setting)``.

    Uses SHA-256 of the parts' ``repr`` (Python's ``hash`` is salted per process).
    """
    digest = hashlib.sha256(repr(parts).encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1
