"""``call``'s ``fields``: project a large result down to the dot paths the agent asked for.

``["id", "user.login"]`` keeps those keys of an object; on a list the paths apply to each
element, so ``["number", "title"]`` trims a list of issues to two fields each. Paths that do
not exist are left out rather than raising: the agent asked for a view, not a contract; ``unmatched``
names them, so the result can say which paths found nothing (a typo reads differently from an empty
answer).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["project", "unmatched"]


def _tree(fields: Sequence[str]) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    for field in fields:
        node = tree
        for part in field.split("."):
            if part:
                node = node.setdefault(part, {})
    return tree


def _apply(data: Any, tree: dict[str, Any]) -> Any:
    if not tree:
        return data
    if isinstance(data, list):
        return [_apply(item, tree) for item in data]
    if isinstance(data, dict):
        return {key: _apply(data[key], sub) for key, sub in tree.items() if key in data}
    return data


def project(data: Any, fields: Sequence[str]) -> Any:
    return _apply(data, _tree(fields))


def _matches(data: Any, parts: Sequence[str]) -> bool:
    if not parts:
        return True
    if isinstance(data, list):
        return any(_matches(item, parts) for item in data)
    if isinstance(data, dict):
        return parts[0] in data and _matches(data[parts[0]], parts[1:])
    return False


def unmatched(data: Any, fields: Sequence[str]) -> list[str]:
    """The ``fields`` that match nothing in ``data`` (on a list: in none of its elements), in the order given.
    An empty list matches every path: there is nothing to say it is wrong."""
    if isinstance(data, list) and not data:
        return []
    return [f for f in fields if not _matches(data, [part for part in f.split(".") if part])]
