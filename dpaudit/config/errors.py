"""The configuration error and the message of a schema violation (the key, what is allowed)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import jsonschema


class ConfigError(ValueError):
    """The configuration does not satisfy the schema."""


def _key(path: Iterable[Any]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<top level>"


def describe(error: jsonschema.ValidationError) -> str:
    """The message of one schema violation: ``config key <dotted key>: ...`` and what is
    allowed there."""
    key = _key(error.absolute_path)
    schema = error.schema if isinstance(error.schema, dict) else {}
    kind = error.validator
    if kind == "additionalProperties":
        allowed = sorted(schema.get("properties", {}))
        extra = sorted(set(error.instance) - set(allowed))
        if schema.get("patternProperties"):
            allowed = allowed + [f"/{p}/" for p in schema["patternProperties"]]
        where = key if error.absolute_path else "top level"
        return f"config key {where}: unknown key(s) {extra}; allowed keys: {allowed}"
    if kind == "enum":
        allowed = schema["enum"]
        return f"config key {key}: {error.instance!r} is not allowed; allowed values: {allowed}"
    if kind in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
        bounds = {
            k: schema[k]
            for k in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum")
            if k in schema
        }
        return f"config key {key}: {error.instance!r} is out of range; allowed: {bounds}"
    if kind == "type":
        return f"config key {key}: {error.instance!r} has the wrong type; expected {schema['type']}"
    if kind == "required":
        missing = [p for p in schema.get("required", []) if p not in error.instance]
        name = missing[0] if missing else error.message
        allowed = schema.get("properties", {}).get(name, {}).get("enum")
        hint = f"; allowed values: {allowed}" if allowed else ""
        return f"config key {key}: missing required key {name!r}{hint}"
    desc = schema.get("description")
    return f"config key {key}: {error.message}" + (f" ({desc})" if desc else "")


class GuardError(ValueError):
    """A guard failed (``dpaudit.config`` turns it into its ``ConfigError``)."""
