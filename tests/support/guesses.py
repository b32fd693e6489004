"""The share of hand-written guessed tool names whose first suggestion is right, for the guess sets' floors."""

from __future__ import annotations

from collections.abc import Sequence

from mcp_gateway.discovery import DiscoveryIndex


def first_right(index: DiscoveryIndex, rows: Sequence[dict[str, object]]) -> float:
    """How often ``index.suggest``'s first suggestion for a row's ``guess`` is one of its ``actions``."""
    right = 0
    for row in rows:
        got = index.suggest(str(row["guess"]), limit=3)
        right += bool(got) and got[0].qualified_name in row["actions"]  # type: ignore[operator]
    return right / len(rows)
