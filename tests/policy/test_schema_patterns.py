"""Upstream schema ``pattern``s are checked without letting a backtracking regex stall the process."""

from __future__ import annotations

import time

import jsonschema
from jsonschema.validators import extend

from mcp_gateway.policy.schema_patterns import risky_patterns, safe_pattern

Validator = extend(jsonschema.Draft202012Validator, {"pattern": safe_pattern})


def _errors(pattern: str, value: str) -> list[str]:
    schema = {"type": "object", "properties": {"x": {"type": "string", "pattern": pattern}}}
    return [error.message for error in Validator(schema).iter_errors({"x": value})]


def test_a_pattern_that_backtracks_exponentially_is_left_to_the_upstream() -> None:
    # Checked with re, 42 characters ran for about a minute on the event loop.
    started = time.monotonic()
    assert _errors("^(a|aa)*$", "a" * 42 + "!") == []
    assert _errors("^(a+)+$", "a" * 5000 + "!") == []
    assert time.monotonic() - started < 1


def test_a_safe_pattern_is_checked_as_jsonschema_does() -> None:
    assert _errors("^[a-z]+$", "abc") == []
    assert _errors("^[a-z]+$", "ABC") == ["'ABC' does not match '^[a-z]+$'"]
    assert _errors("ab", "xxabxx") == []  # searched, not anchored, as JSON Schema says
    assert _errors("^[0-9]{3}$", "12") == ["'12' does not match '^[0-9]{3}$'"]


def test_risky_patterns_are_found_at_any_depth() -> None:
    schema = {
        "type": "object",
        "properties": {
            "ok": {"type": "string", "pattern": "^[a-z]+$"},
            "items": {"type": "array", "items": {"type": "string", "pattern": "^(a|aa)*$"}},
        },
    }
    assert risky_patterns(schema) == ["^(a|aa)*$"]
    assert risky_patterns({"type": "string"}) == []
