"""Floats an input schema types as integers go upstream as integers (``core/whole_numbers.py``)."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_gateway.core.whole_numbers import whole_numbers

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "amount": {"type": "number"},
        "either": {"type": ["integer", "null"]},
        "loose": {"type": ["integer", "number"]},
        "ids": {"type": "array", "items": {"type": "integer"}},
        "page": {"type": "object", "properties": {"size": {"type": "integer"}}},
    },
    "additionalProperties": {"type": "integer"},
}


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({"id": 100.0}, {"id": 100}),
        ({"id": 1e2, "amount": 5.0}, {"id": 100, "amount": 5.0}),  # a number stays as written
        ({"either": 3.0, "loose": 3.0}, {"either": 3, "loose": 3.0}),
        ({"ids": [1.0, 2, 3.0]}, {"ids": [1, 2, 3]}),
        ({"page": {"size": 50.0}}, {"page": {"size": 50}}),
        ({"other": 7.0}, {"other": 7}),  # typed by additionalProperties
        ({"id": 2.5}, {"id": 2.5}),  # not whole: left for the schema's own error
        ({"id": True}, {"id": True}),
    ],
)
def test_whole_floats_typed_integer_become_integers(args: dict[str, Any], expected: dict[str, Any]) -> None:
    out = whole_numbers(SCHEMA, args)
    assert out == expected
    assert [type(v) for v in out.values()] == [type(v) for v in expected.values()]


def test_nothing_to_change_returns_the_same_object() -> None:
    args = {"id": 1, "amount": 2.0, "ids": [1, 2], "page": {"size": 3}}
    assert whole_numbers(SCHEMA, args) is args


def test_the_arguments_given_are_not_changed() -> None:
    args = {"ids": [1.0], "page": {"size": 2.0}}
    whole_numbers(SCHEMA, args)
    assert args == {"ids": [1.0], "page": {"size": 2.0}} and isinstance(args["ids"][0], float)
