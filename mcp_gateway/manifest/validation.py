"""What every manifest model shares: the strict model config, the slug rule, and ``Problem``.

A validator raises ``Problem`` so the located issue can show the problem and its fix apart; ``choose``
writes the "did you mean" fix for a name picked from a known list.
"""

from __future__ import annotations

import difflib
import re

from pydantic import ConfigDict

__all__ = ["SLUG_RE", "STRICT", "Problem", "choose"]

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
