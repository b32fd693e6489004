"""A meta-tool's bad arguments said in plain words: each parameter named with what it wants.

The SDK checks a tool's arguments against its signature with pydantic and would hand the agent
pydantic's own report (error codes, the rejected input, a documentation URL). An agent corrects
itself faster from "limit must be a whole number, at most 50"; the rejected values are not echoed
back (they are the caller's data, and a pasted secret must not come back in a result).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final

from pydantic import ValidationError
from pydantic_core import ErrorDetails

__all__ = ["plain_argument_errors"]

_WANTS: Mapping[str, str] = {
    "missing": "is required",
    "string_type": "must be a string",
    "int_type": "must be a whole number",
    "int_parsing": "must be a whole number",
    "int_from_float": "must be a whole number",
    "float_type": "must be a number",
    "float_parsing": "must be a number",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "dict_type": "must be a JSON object",
    "model_type": "must be a JSON object",
    "list_type": "must be a list",
    "extra_forbidden": "is not a parameter of this tool",
}

_KINDS: Mapping[type, str] = {
    str: "a string",
    bool: "true/false",
    int: "a number",
    float: "a number",
    list: "a list",
    dict: "an object",
    type(None): "null",
}


def plain_argument_errors(tool: str, exc: ValidationError) -> str:
    """``discover: limit must be a whole number (got a string); query is required``."""
    said = [_one(error) for error in exc.errors(include_url=False)]
    return f"invalid arguments for {tool}: " + "; ".join(dict.fromkeys(said))


def _one(error: ErrorDetails) -> str:
    where = ".".join(str(part) for part in error["loc"]) or "the arguments"
    kind, ctx = error["type"], error.get("ctx") or {}
    if kind in _WANTS:  # a wrong type: say what came instead (its kind, never its value)
        got = "" if kind in ("missing", "extra_forbidden") else _got(error.get("input"))
        return f"{where} {_WANTS[kind]}{got}"
    return f"{where} {_bounded(kind, ctx, error.get('input')) or _lowered(error['msg'])}"


_BOUNDS: Final = {
    "less_than_equal": ("must be at most {}", "le"),
    "greater_than_equal": ("must be at least {}", "ge"),
    "less_than": ("must be less than {}", "lt"),
    "greater_than": ("must be more than {}", "gt"),
    "too_long": ("must have at most {} items", "max_length"),
    "too_short": ("must have at least {} items", "min_length"),
    "string_too_long": ("must be at most {} characters", "max_length"),
    "string_too_short": ("must be at least {} characters", "min_length"),
    "literal_error": ("must be one of {}", "expected"),
}
"""Error types whose bound is in the error's context: the sentence and the context key it names."""


def _bounded(kind: str, ctx: Mapping[str, Any], input_: Any = None) -> str | None:
    if kind == "string_too_short" and ctx.get("min_length") == 1:
        return "must not be empty"
    if kind == "finite_number":  # 1e999 parses as infinity
        return "must be a finite number"
    if kind == "string_pattern_mismatch":
        return _PATTERNS.get(str(ctx.get("pattern")), "has characters it may not hold")
    if (bound := _BOUNDS.get(kind)) is None:
        return None
    if input_ is not None and isinstance(input_, float) and not math.isfinite(input_):
        return "must be a finite number"  # NaN fails every bound: "at least 0" would send it looking elsewhere
    sentence, key = bound
    return sentence.format(ctx.get(key))


_PATTERNS: Final = {r"^[A-Za-z0-9_.-]+$": "may hold only letters, digits, '_', '.' and '-'"}
"""The meta-tools' string patterns in words (a regular expression is no help to most readers)."""


def _lowered(message: str) -> str:
    """Pydantic's own sentence for a case not listed ("Input should be ..." -> "should be ...")."""
    return message.removeprefix("Value error, ").removeprefix("Input ").removeprefix("Value ")


def _got(value: Any) -> str:
    kind = _KINDS.get(type(value))
    return f" (got {kind})" if kind else ""
