"""What every manifest model shares: the strict model config, the slug rule, and ``Problem``.

A validator raises ``Problem`` so the located issue can show the problem and its fix apart; ``choose``
writes the "did you mean" fix for a name picked from a known list; ``url_problem`` says why an http(s)
URL cannot be fetched.
"""

from __future__ import annotations

import difflib
import re
from urllib.parse import urlsplit

from pydantic import ConfigDict

__all__ = ["SLUG_RE", "STRICT", "Problem", "choose", "url_problem"]

SLUG_RE = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")

STRICT = ConfigDict(extra="forbid", frozen=True, defer_build=True)
"""Unknown keys are errors (a typo must not be ignored) and a parsed manifest never changes.
``defer_build``: a model's own validator is built on first use; loading a manifest builds only
``Manifest``'s, which holds every nested model's (built eagerly, each would be built twice)."""


class Problem(ValueError):
    """A validator's complaint that already knows its fix (kept apart so the Issue can show both)."""

    def __init__(self, problem: str, fix: str, *, key: str | None = None) -> None:
        super().__init__(problem)
        self.problem = problem
        self.fix = fix
        self.key = key
        """The offending key below the validated field, when the field is a mapping."""


def choose(given: str, known: list[str], what: str) -> str:
    if not known:
        return f"there are no {what} to choose from"
    close = difflib.get_close_matches(given, known, n=1, cutoff=0.6)
    listed = ", ".join(known)
    return f"did you mean {close[0]!r}? The {what} are: {listed}" if close else f"use one of the {what}: {listed}"


_BLANK_OR_CONTROL = re.compile(r"[\s\x00-\x1f\x7f]")


def url_problem(url: str) -> tuple[str, str] | None:
    """Why the http(s) URL ``url`` cannot be fetched, and the fix; None when it can. Neither quotes the
    URL: it may hold a password."""
    if _BLANK_OR_CONTROL.search(url):
        return "holds a space, a tab or a line break", "remove it, or write a space in a path as %20"
    try:
        parts = urlsplit(url)
    except ValueError:  # "Invalid IPv6 URL": a bracket not closed
        return "has a host that does not parse", "write an IPv6 address in brackets, e.g. http://[::1]:8080/spec.json"
    try:
        port = parts.port
    except ValueError:
        port = -1
    if port is not None and not 0 < port <= 65535:
        return "has a port that is not a number from 1 to 65535", "fix the port, or leave it out for the default"
    if not parts.hostname:
        return "names no host", "write the full URL, e.g. https://api.example.com/openapi.json"
    return None
