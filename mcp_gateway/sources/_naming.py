"""Action-path spelling shared by every source: snake_case words and collision suffixes."""

from __future__ import annotations

import re

__all__ = ["snake_case", "unique_name"]

_ACRONYM_WORD = re.compile(r"([A-Z]+)([A-Z][a-z])")
_WORD_BOUNDARY = re.compile(r"([a-z0-9])([A-Z])")
_NOT_NAME = re.compile(r"[^a-z0-9]+")


def snake_case(text: str) -> str:
    """``getHTTPServer`` -> ``get_http_server``; ``repos/get-content`` -> ``repos_get_content``."""
    text = _WORD_BOUNDARY.sub(r"\1_\2", _ACRONYM_WORD.sub(r"\1_\2", text))
    return _NOT_NAME.sub("_", text.lower()).strip("_")


def unique_name(name: str, taken: set[str]) -> str:
    """``name``, or ``name_2``, ``name_3``… when taken; the result is added to ``taken``.

    Sources walk their documents in a stable order, so the same spec always gives the same suffixes.
    """
    candidate, n = name, 1
    while candidate in taken:
        n += 1
        candidate = f"{name}_{n}"
    taken.add(candidate)
    return candidate
