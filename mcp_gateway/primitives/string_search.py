"""Many strings looked for in a text at once: the forms of every secret the redactor knows.

A process that has opened hundreds of secrets (many users' personal credentials) knows thousands of
their forms (``SecretValue.redaction_forms``: each secret as is, URL-encoded, base64, JSON-escaped …).
Looking for each form on its own is a pass over the text per form, and every tool result, error, log
line and synced catalog is looked at. ``AhoCorasickSearch`` finds them all in one pass, with the
automaton of the ``pyahocorasick`` library; ``ScanningSearch`` looks for each with ``in`` (a search in
C), which is as fast for a few strings, and is what runs wherever the library is not installed.
``compile_search`` picks one; both give the same answers.

Where two occurrences overlap (two forms of one secret, or two secrets side by side sharing letters),
``spans`` joins them into one, so a redaction covers both and leaves no fragment of either.

A search is immutable once made, so threads may share it. One made ``previous=`` an earlier search
of fewer strings reuses its automaton and compiles only the strings added since (up to a quarter of
the whole, then everything again): learning one more secret does not cost a new automaton of every form.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final, Protocol

try:
    import ahocorasick as _ahocorasick
except ImportError:  # an optional speed-up: the scan answers the same
    _ahocorasick = None

__all__ = [
    "AUTOMATON_MIN_STRINGS",
    "AhoCorasickSearch",
    "ScanningSearch",
    "StringSearch",
    "automaton_available",
    "compile_search",
]

AUTOMATON_MIN_STRINGS: Final = 64
"""Fewer strings are scanned for one by one: ``in`` runs at up to gigabytes a second, and a few dozen
passes cost no more than one pass of the automaton (tens of megabytes a second)."""
_ANCHOR: Final = 16
"""How much of each string the automaton holds; the rest is checked where that start occurs. Its
memory grows with this, not with the strings' length (a PEM key's base64 runs to thousands)."""
_RECENT_MIN: Final = 1024
"""Strings added since the last automaton that may be searched apart before all are compiled anew."""

Span = tuple[int, int]
"""Where an occurrence sits in the text: ``text[start:end]``."""


class StringSearch(Protocol):
    """Finds a fixed set of strings in texts. Laws: ``occurs(t)`` is ``bool(spans(t))``; ``spans`` are
    sorted and disjoint, each the union of overlapping occurrences; ``found(t)`` is the strings that occur."""

    @property
    def strings(self) -> frozenset[str]:
        """What is looked for (the empty string never is)."""
        ...

    def occurs(self, text: str) -> bool:
        """Whether any of the strings occurs in ``text``."""
        ...

    def spans(self, text: str) -> list[Span]:
        """Where the strings occur in ``text``: overlapping occurrences joined, in order."""
        ...

    def found(self, text: str) -> frozenset[str]:
        """The strings that occur in ``text``."""
        ...


def automaton_available() -> bool:
    """Whether ``pyahocorasick`` is installed (and counts positions as Python does)."""
    return _ahocorasick is not None and _counts_code_points()


def compile_search(
    strings: Iterable[str], *, previous: StringSearch | None = None, automaton: bool = True
) -> StringSearch:
    """A search for ``strings``: the automaton from ``AUTOMATON_MIN_STRINGS`` strings on, when the library
    is there and ``automaton`` is not turned off; else a scan. ``previous``: an earlier search whose
    automaton is reused when its strings are among these."""
    wanted = frozenset(s for s in strings if s)
    if not automaton or len(wanted) < AUTOMATON_MIN_STRINGS or not automaton_available():
        return ScanningSearch(wanted)
    base = previous.base if isinstance(previous, AhoCorasickSearch | _Layered) else None
    if base is not None and base.strings <= wanted:
        recent = wanted - base.strings
        if not recent:
            return base
        if len(recent) <= max(_RECENT_MIN, len(base.strings) // 4):
            return _Layered(base, compile_search(recent))
    return AhoCorasickSearch(wanted)


class ScanningSearch:
    """Each string looked for on its own with ``in``, the longest first."""

    __slots__ = ("_ordered", "_strings")

    def __init__(self, strings: Iterable[str]) -> None:
        self._strings = frozenset(s for s in strings if s)
        self._ordered = tuple(sorted(self._strings, key=lambda s: (-len(s), s)))

    @property
    def strings(self) -> frozenset[str]:
        return self._strings

    def occurs(self, text: str) -> bool:
        return any(s in text for s in self._ordered)

    def found(self, text: str) -> frozenset[str]:
        return frozenset(s for s in self._ordered if s in text)

    def spans(self, text: str) -> list[Span]:
        occurrences: list[Span] = []
        for s in self._ordered:
            at = text.find(s)
            while at >= 0:
                occurrences.append((at, at + len(s)))
                at = text.find(s, at + 1)
        return _joined(occurrences)

    def __len__(self) -> int:
        return len(self._strings)

    def __repr__(self) -> str:
        return f"ScanningSearch(strings={len(self._strings)})"


class AhoCorasickSearch:
    """One automaton over the first ``_ANCHOR`` characters of every string: one pass finds where a
    string may start, and the rest of it is compared there."""

    __slots__ = ("_automaton", "_strings")

    def __init__(self, strings: Iterable[str]) -> None:
        if _ahocorasick is None:
            raise RuntimeError("pyahocorasick is not installed; compile_search scans instead")
        self._strings = frozenset(s for s in strings if s)
        by_anchor: dict[str, list[str]] = {}
        for s in self._strings:
            by_anchor.setdefault(s[:_ANCHOR], []).append(s)
        automaton = _ahocorasick.Automaton()
        for anchor, group in by_anchor.items():
            automaton.add_word(anchor, (len(anchor), tuple(group)))
        if by_anchor:
            automaton.make_automaton()
        self._automaton = automaton

    @property
    def strings(self) -> frozenset[str]:
        return self._strings

    @property
    def base(self) -> AhoCorasickSearch:
        return self

    def _occurrences(self, text: str) -> Iterable[tuple[str, Span]]:
        if not self._strings:
            return
        for end, (anchor_length, group) in self._automaton.iter(text):
            start = end + 1 - anchor_length
            for s in group:
                if len(s) == anchor_length or text.startswith(s, start):
                    yield s, (start, start + len(s))

    def occurs(self, text: str) -> bool:
        return next(iter(self._occurrences(text)), None) is not None

    def found(self, text: str) -> frozenset[str]:
        return frozenset(s for s, _ in self._occurrences(text))

    def spans(self, text: str) -> list[Span]:
        return _joined([span for _, span in self._occurrences(text)])

    def __len__(self) -> int:
        return len(self._strings)

    def __repr__(self) -> str:
        return f"AhoCorasickSearch(strings={len(self._strings)})"


class _Layered:
    """An automaton made earlier, and the strings added since, searched apart."""

    __slots__ = ("_recent", "_strings", "base")

    def __init__(self, base: AhoCorasickSearch, recent: StringSearch) -> None:
        self.base = base
        self._recent = recent
        self._strings = base.strings | recent.strings

    @property
    def strings(self) -> frozenset[str]:
        return self._strings

    def occurs(self, text: str) -> bool:
        return self.base.occurs(text) or self._recent.occurs(text)

    def found(self, text: str) -> frozenset[str]:
        return self.base.found(text) | self._recent.found(text)

    def spans(self, text: str) -> list[Span]:
        return _joined([*self.base.spans(text), *self._recent.spans(text)])

    def __len__(self) -> int:
        return len(self._strings)

    def __repr__(self) -> str:
        return f"_Layered(base={len(self.base)}, recent={len(self._recent.strings)})"


def _joined(occurrences: Sequence[Span]) -> list[Span]:
    """``occurrences`` in order, those that overlap made one (touching ones stay two)."""
    out: list[Span] = []
    for start, end in sorted(occurrences):
        if out and start < out[-1][1]:
            if end > out[-1][1]:
                out[-1] = (out[-1][0], end)
        else:
            out.append((start, end))
    return out


_CHECKED: list[bool] = []


def _counts_code_points() -> bool:
    """Whether the library's positions are Python's (code points): a build that counts UTF-16 units
    would put every span after a character beyond the BMP in the wrong place."""
    if not _CHECKED:
        assert _ahocorasick is not None
        probe = _ahocorasick.Automaton()
        probe.add_word("ab", 2)
        probe.make_automaton()
        _CHECKED.append(list(probe.iter("\U0001f600ab")) == [(2, 2)])
    return _CHECKED[0]
