"""Arguments an input schema types as integers, sent as integers.

JSON Schema counts ``1e2`` and ``5.0`` as integers, and models write them so; Python reads them as
floats, and a float goes out as ``100.0`` in a path, a query or a body, which an upstream that parses
integers refuses ("id must be an integer"). The call sends what the schema means: ``100``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["whole_numbers"]

MAX_DEPTH = 32
"""Schema levels followed: deeper arguments are sent as written."""


def whole_numbers(schema: Mapping[str, Any], value: Any, depth: int = 0) -> Any:
    """``value`` with each float the schema types as an integer (and not as a number too) replaced by
    that integer; the same object when nothing changed."""
    if depth > MAX_DEPTH or not isinstance(schema, Mapping):
        return value
    if isinstance(value, float):
        kinds = schema.get("type")
        integer = kinds == "integer" or (isinstance(kinds, list) and "integer" in kinds and "number" not in kinds)
        return int(value) if integer and value.is_integer() else value
    if isinstance(value, dict):
        properties = schema.get("properties")
        extra = schema.get("additionalProperties")
        changed: dict[str, Any] | None = None
        for key, item in value.items():
            inner = properties.get(key) if isinstance(properties, Mapping) and key in properties else extra
            if isinstance(inner, Mapping) and (new := whole_numbers(inner, item, depth + 1)) is not item:
                changed = changed if changed is not None else dict(value)
                changed[key] = new
        return value if changed is None else changed
    if isinstance(value, list):
        items = schema.get("items")
        if not isinstance(items, Mapping):
            return value
        converted = [whole_numbers(items, item, depth + 1) for item in value]
        return value if all(a is b for a, b in zip(converted, value, strict=True)) else converted
    return value
