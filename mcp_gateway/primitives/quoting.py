"""A name or argument quoted back in a message, cut when it is long.

Agents and operators choose names of any length (a tool name, an agent name, an id); a message that
quotes one back whole is as long as the name, in the agent's context or on the operator's terminal.
A long one is quoted by its start and its length, enough to recognise it and to see it was too long.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["LONG_QUOTE", "long_words_cut", "quoted"]

LONG_QUOTE: Final = 200
"""Characters quoted whole; a longer name is cut to its start."""

_KEPT: Final = 60


def _cut(text: str) -> str:
    return f"{text[:_KEPT]}… ({len(text)} characters)"


def quoted(text: str) -> str:
    """``text`` as ``repr`` quotes it, or, past ``LONG_QUOTE`` characters, its start quoted and its length."""
    if len(text) <= LONG_QUOTE:
        return repr(text)
    return f"{text[:_KEPT]!r}… ({len(text)} characters)"


def long_words_cut(text: str) -> str:
    """``text`` with each run of more than ``LONG_QUOTE`` non-space characters cut to its start and its
    length: an error quoting back an argument of any length stays short, its own words whole."""
    if len(text) <= LONG_QUOTE:
        return text
    return re.sub(rf"\S{{{LONG_QUOTE + 1},}}", lambda m: _cut(m.group()), text)
