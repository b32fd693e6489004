"""A shortcut past jsonschema for the plain input schemas most actions have.

Most actions take an object of a few scalar parameters (path and query values): ``{"type":
"object", "properties": {"id": {"type": "string"}}, "required": ["id"]}``. jsonschema walks such
a schema keyword by keyword, in Python, on every call; ``quick_check`` compiles it once into a
predicate that answers True only for arguments the schema certainly accepts. Anything else (a
False, or a schema outside the plain shape, for which there is no predicate) goes to jsonschema as
before, which also writes the error messages: the predicate never decides that arguments are
invalid, so it cannot change what is refused or what the agent is told.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["QuickCheck", "quick_check"]

QuickCheck = Callable[[Mapping[str, Any]], bool]

_ANNOTATIONS = frozenset(
    {"description", "title", "default", "examples", "example", "deprecated", "readOnly", "writeOnly", "$comment"}
)
"""Keywords that never make a value invalid. ``format`` is one too: the gateway's validators are
built without a format checker, so jsonschema does not assert formats."""
_PROPERTY_KEYS = _ANNOTATIONS | {"type", "format", "enum"}
_OBJECT_KEYS = _ANNOTATIONS | {"type", "properties", "required", "additionalProperties"}


def _is_string(value: object) -> bool:
    return isinstance(value, str)


def _is_integer(value: object) -> bool:
    return type(value) is int  # not bool; 1.0 (an integer to jsonschema) takes the long way


def _is_number(value: object) -> bool:
    return type(value) is int or type(value) is float


def _is_boolean(value: object) -> bool:
    return type(value) is bool


def _anything(value: object) -> bool:
    return True


_TYPES: dict[str, Callable[[object], bool]] = {
    "string": _is_string,
    "integer": _is_integer,
    "number": _is_number,
    "boolean": _is_boolean,
}


def quick_check(schema: Mapping[str, Any]) -> QuickCheck | None:
    """A predicate that is True only for arguments ``schema`` accepts, or None when ``schema`` is not
    of the plain shape (an object of scalar properties, optionally some required, with annotations)."""
    if not _keys_within(schema, _OBJECT_KEYS) or schema.get("type", "object") != "object":
        return None
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    extra = schema.get("additionalProperties", True)
    if not isinstance(properties, Mapping) or not isinstance(required, list) or not isinstance(extra, bool):
        return None
    if not all(isinstance(name, str) for name in required):
        return None
    checks: dict[str, Callable[[object], bool]] = {}
    for name, prop in properties.items():
        check = _property_check(prop)
        if not isinstance(name, str) or check is None:
            return None
        checks[name] = check
    needed = tuple(dict.fromkeys(required))

    def accepts(args: Mapping[str, Any]) -> bool:
        if not isinstance(args, dict):
            return False
        for name in needed:
            if name not in args:
                return False
        for name, value in args.items():
            check = checks.get(name)
            if check is None:
                if not extra:
                    return False
            elif not check(value):
                return False
        return True

    return accepts


def _property_check(prop: object) -> Callable[[object], bool] | None:
    if not isinstance(prop, Mapping) or not _keys_within(prop, _PROPERTY_KEYS):
        return None
    kind = prop.get("type")
    if kind is None:
        base = _anything
    elif isinstance(kind, str) and kind in _TYPES:
        base = _TYPES[kind]
    else:
        return None
    if "enum" not in prop:
        return base
    allowed = prop["enum"]
    # Only string enums: jsonschema's enum tells 1 from True and 1.0, a set does not.
    if kind != "string" or not isinstance(allowed, list) or not all(isinstance(v, str) for v in allowed):
        return None
    members = frozenset(allowed)
    return lambda value: isinstance(value, str) and value in members


def _keys_within(schema: Mapping[Any, Any], allowed: frozenset[str]) -> bool:
    return all(isinstance(key, str) and (key in allowed or key.startswith("x-")) for key in schema)
