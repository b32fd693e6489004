"""Compiled rule patterns: a glob, or ``/regex/flags`` checked for catastrophic shapes (see ``policy``).

A pattern is compiled once (cached) and never raises: an unusable one becomes a ``Matcher`` that never
matches and says why in ``error``.
"""

from __future__ import annotations

import fnmatch
import functools
import re
from dataclasses import dataclass

__all__ = ["MAX_VALUE_CHARS", "Matcher", "as_regex", "compile_matcher"]

MAX_VALUE_CHARS = 4096
"""The most characters of one value (or name) any pattern ever reads."""

_REGEX_FORM = re.compile(r"/(.*)/([A-Za-z]*)", re.DOTALL)
_FLAGS = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL}


@dataclass(frozen=True)
class Matcher:
    """One compiled ``match`` pattern (or ``when.matches`` regex).

    ``regex`` is None when the pattern is unusable; then ``error`` says why and nothing matches.
    """

    pattern: str
    regex: re.Pattern[str] | None
    error: str | None = None
    search: bool = False
    """Regex rules are searched in the text; globs must match all of it."""
    max_chars: int = MAX_VALUE_CHARS
    """Longer texts are not fully matched (see the ``policy`` package docstring)."""
    looks_ahead: bool = False
    """A lookahead can read past any cut, so a match in a truncated text proves nothing."""

    def matches(self, name: str) -> bool:
        """Whether ``name`` matches for certain (an undecided answer is False)."""
        return self.check(name) is True

    def check(self, text: str) -> bool | None:
        """True or False, or None when ``text`` is too long to decide within the time budget."""
        if self.regex is None:
            return False
        if len(text) <= self.max_chars:
            found = self.regex.search(text) if self.search else self.regex.fullmatch(text)
            return found is not None
        if self.search and not self.looks_ahead:
            head = text[: self.max_chars]
            found = self.regex.search(head)
            # A match ending at least two characters before the cut was decided by characters
            # that are the same in the full text ($ and \b look at most one character ahead).
            if found is not None and found.end() < len(head) - 1:
                return True
        return None


@functools.lru_cache(maxsize=4096)
def compile_matcher(pattern: str) -> Matcher:
    """Compile a rule pattern: ``/body/flags`` is a searched regex, anything else a glob.

    Never raises: an unusable pattern gives a matcher that never matches, with ``error`` set.

    Example:
        >>> compile_matcher("issues.*").matches("Issues.Create")
        True
        >>> compile_matcher("/(a+)+$/").error is not None
        True
    """
    form = _REGEX_FORM.fullmatch(pattern)
    if form is None:
        # fnmatch.translate anchors at both ends and turns '*' into a non-backtracking '.*'.
        return Matcher(pattern, re.compile(fnmatch.translate(pattern), re.IGNORECASE))
    body, letters = form.groups()
    flags = 0
    for letter in letters:
        if letter not in _FLAGS:
            return Matcher(pattern, None, f"unknown regex flag {letter!r}; the flags are i, m and s")
        flags |= _FLAGS[letter]
    if not body:
        return Matcher(pattern, None, "an empty regex matches everything; write '*' if that is meant")
    try:
        regex = re.compile(body, flags)
    except re.error as exc:
        return Matcher(pattern, None, f"invalid regex: {exc}")
    # Here, not at the top: the analysis and the regex parse tree it walks (costly imports) are
    # needed only by a manifest that has a regex, and every start imports this module.
    from .regex_shape import analyze

    shape = analyze(body, flags)
    if shape.problem is not None:
        return Matcher(pattern, None, shape.problem)
    if shape.max_chars < 32:
        return Matcher(
            pattern,
            None,
            f"the regex chains {shape.degree - 1} overlapping repeats like '.*'; matching it against an "
            "agent's value could take seconds. Use fewer '.*', or character classes that cannot overlap",
        )
    return Matcher(pattern, regex, search=True, max_chars=shape.max_chars, looks_ahead=shape.looks_ahead)


def as_regex(text: str) -> str:
    """A ``when.matches`` value as a pattern: ``/body/flags`` as written, a bare body as a regex."""
    return text if _REGEX_FORM.fullmatch(text) else f"/{text}/"
