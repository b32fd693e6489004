"""The plain-schema shortcut accepts only what jsonschema accepts, and accepts the plain cases."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from jsonschema.validators import validator_for

from mcp_gateway.core.quick_schema import quick_check

PLAIN: list[dict[str, Any]] = [
    {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
    {
        "type": "object",
        "properties": {
            "n": {"type": "integer", "description": "how many", "default": 1},
            "x": {"type": "number", "format": "double"},
            "on": {"type": "boolean", "x-origin": "query"},
            "state": {"type": "string", "enum": ["open", "closed"]},
            "any": {"description": "no type: anything"},
        },
        "required": ["n"],
        "additionalProperties": False,
    },
    {"type": "object"},
    {"properties": {"q": {"type": "string"}}},
]
NOT_PLAIN: list[dict[str, Any]] = [
    {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "string"}}}},
    {"type": "object", "properties": {"a": {"type": "string", "minLength": 2}}},
    {"type": "object", "properties": {"a": {"type": ["string", "null"]}}},
    {"type": "object", "properties": {"a": {"enum": [1, True]}}},
    {"type": "object", "properties": {"a": {"$ref": "#/$defs/a"}}, "$defs": {"a": {"type": "string"}}},
    {"$schema": "http://json-schema.org/draft-03/schema#", "properties": {"a": {"type": "string", "required": True}}},
    {"type": "object", "additionalProperties": {"type": "string"}},
    {"type": "object", "properties": {"a": True}},
    {"type": "object", "required": "a"},
    {"type": "array"},
]
ARGS: list[Any] = [
    {},
    {"id": "1"},
    {"id": 1},
    {"id": None},
    {"n": 1},
    {"n": True},
    {"n": 1.0},
    {"n": 1.5},
    {"n": "1"},
    {"n": 2, "x": 1},
    {"n": 2, "x": 1.5, "on": False, "state": "open", "any": [1, {"a": None}]},
    {"n": 2, "x": True},
    {"n": 2, "on": 0},
    {"n": 2, "state": "merged"},
    {"n": 2, "other": "x"},
    {"q": "text", "extra": [1]},
    {"q": ["text"]},
    {"a": "x"},
    {"a": ["x"]},
]


@pytest.mark.parametrize("schema", PLAIN + NOT_PLAIN)
def test_a_quick_yes_is_always_jsonschemas_yes(schema: dict[str, Any]) -> None:
    check = quick_check(schema)
    if check is None:
        return
    validator = validator_for(schema, default=jsonschema.Draft202012Validator)(schema)
    for args in ARGS:
        if check(args):
            assert validator.is_valid(args), (schema, args)


@pytest.mark.parametrize("schema", PLAIN)
def test_plain_schemas_have_a_shortcut_that_accepts_valid_arguments(schema: dict[str, Any]) -> None:
    check = quick_check(schema)
    assert check is not None
    validator = validator_for(schema, default=jsonschema.Draft202012Validator)(schema)
    valid = [args for args in ARGS if validator.is_valid(args)]
    assert valid and all(check(args) for args in valid if "n" not in args or type(args["n"]) is int)


@pytest.mark.parametrize("schema", NOT_PLAIN)
def test_other_schemas_take_the_long_way(schema: dict[str, Any]) -> None:
    assert quick_check(schema) is None
