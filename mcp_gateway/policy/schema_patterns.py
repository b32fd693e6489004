"""JSON Schema ``pattern``s from an upstream, checked without letting one freeze the process.

Python's ``re`` backtracks, holds the event loop while it runs, and no timeout reaches it. A schema
an upstream wrote (an MCP server's, an API description's) may hold ``^(a|aa)*$``: checked against 42
characters an agent sends, or that the upstream returns, it runs for a minute. ``safe_pattern`` is the
``pattern`` keyword the gateway validates with: the regex analysis the policy patterns use
(``regex_shape``) decides whether a pattern is checked here at all, and on how many characters; a
pattern it refuses is left to the upstream, which checks its own.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, cast

from .patterns import as_regex, compile_matcher

__all__ = ["risky_patterns", "safe_pattern"]


def safe_pattern(validator: Any, pattern: Any, instance: Any, schema: Mapping[str, Any]) -> Iterator[Any]:
    """jsonschema's ``pattern`` keyword (``jsonschema.validators.extend``), bounded as above."""
    from jsonschema.exceptions import ValidationError

    if not isinstance(instance, str) or not isinstance(pattern, str):
        return
    matcher = compile_matcher(as_regex(pattern))
    if matcher.error is not None or matcher.regex is None or len(instance) > matcher.max_chars:
        return  # too costly to check here: the upstream checks its own pattern
    if matcher.regex.search(instance) is None:
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def risky_patterns(schema: Any, *, limit: int = 3) -> list[str]:
    """The ``pattern`` values in ``schema`` (at any depth) whose worst case is too slow to check."""
    found: list[str] = []
    stack: list[object] = [schema]
    while stack and len(found) < limit:
        node = stack.pop()
        if isinstance(node, Mapping):
            mapping = cast(Mapping[str, object], node)
            pattern = mapping.get("pattern")
            if isinstance(pattern, str) and compile_matcher(as_regex(pattern)).error is not None:
                found.append(pattern)
            stack.extend(mapping.values())
        elif isinstance(node, list):
            stack.extend(cast(list[object], node))
    return found
