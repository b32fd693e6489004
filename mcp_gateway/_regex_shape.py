r"""How long a regex may take on text an agent chooses, read from its parse tree (the ReDoS analysis).

Python's re backtracks. Two shapes make it slow on text an agent chooses:
  exponential: a repeated group whose iterations can split the same text in several ways,
    because something variable inside it can also start the next iteration ((a+)+, (\w+\s?)+,
    (a|aa)+). Refused. (\.[a-z]+)* is fine: [a-z]+ must stop at the '.' that starts the next one.
  polynomial: n start positions times, for each unbounded repeat that overlaps what follows it,
    n ways to end it (a.*b.*c is n^3). Bounded by reading at most
    2 ** (22 / degree) characters: about 2000 for degree 2, 160 for degree 3.
Character sets are compared on a sample alphabet: ASCII, Latin-1, a few characters of other
scripts and categories, plus every literal and range bound the pattern names.

``compile_matcher`` (``_policy_patterns``) refuses what ``RegexShape.problem`` names and reads a value only up
to ``RegexShape.max_chars``.
"""

from __future__ import annotations

import re
from re import _constants as _sre  # the stdlib parser itself, so the analysis sees what re.compile sees
from re import _parser as _sre_parse
from typing import Any

__all__ = ["MAX_VALUE_CHARS", "RegexShape", "analyze"]

MAX_VALUE_CHARS = 4096
"""The most characters of one value (or name) any pattern ever reads."""

_Charset = frozenset[int]
_BUDGET_LOG2 = 22
_VARIABLE = (_sre.MAX_REPEAT, _sre.MIN_REPEAT)
_REPEATS = (_sre.MAX_REPEAT, _sre.MIN_REPEAT, _sre.POSSESSIVE_REPEAT)
_SAMPLE_EXTRA = (
    0x100, 0x130, 0x131, 0x17F, 0x391, 0x3C9, 0x410, 0x44F, 0x5D0, 0x627, 0x660, 0x669, 0x966,
    0x1680, 0x2000, 0x2028, 0x2029, 0x212A, 0x3000, 0x4E2D, 0xFF10, 0xFF21, 0x1F600, 0x10FFFF,
)  # fmt: skip
_CATEGORIES = {
    _sre.CATEGORY_DIGIT: re.compile(r"\d"),
    _sre.CATEGORY_NOT_DIGIT: re.compile(r"\D"),
    _sre.CATEGORY_SPACE: re.compile(r"\s"),
    _sre.CATEGORY_NOT_SPACE: re.compile(r"\S"),
    _sre.CATEGORY_WORD: re.compile(r"\w"),
    _sre.CATEGORY_NOT_WORD: re.compile(r"\W"),
}


class RegexShape:
    """What matters about a parsed regex for its worst-case running time."""

    def __init__(self, parsed: _sre_parse.SubPattern) -> None:
        self.icase = bool(parsed.state.flags & re.IGNORECASE) or _any_scoped_ignorecase(list(parsed))
        codes = set(range(256)) | set(_SAMPLE_EXTRA)
        _collect_codes(list(parsed), codes)
        self.alphabet: tuple[int, ...] = tuple(sorted(c for c in codes if 0 <= c <= 0x10FFFF))
        self.everything: _Charset = frozenset(self.alphabet)
        self._memo: dict[tuple[Any, int], tuple[_Charset, bool]] = {}
        self.problem: str | None = None
        self.looks_ahead = False
        self.ambiguous = 0
        self.tail = False
        seq = list(parsed)
        self._walk(seq, frozenset())
        anchored = (
            bool(seq)
            and seq[0][0] is _sre.AT
            and (
                seq[0][1] is _sre.AT_BEGINNING_STRING
                or (seq[0][1] is _sre.AT_BEGINNING and not parsed.state.flags & re.MULTILINE)
            )
        )
        self.degree = (0 if anchored else 1) + self.ambiguous + (1 if self.tail else 0)
        self.max_chars = (
            MAX_VALUE_CHARS if self.degree <= 1 else min(MAX_VALUE_CHARS, int(2 ** (_BUDGET_LOG2 / self.degree)))
        )

    # -- character sets

    def _chars(self, op: Any, av: Any) -> _Charset:
        if op is _sre.LITERAL:
            return self._where(lambda ch: ch == av)
        if op is _sre.NOT_LITERAL:
            return self._where(lambda ch: ch != av)
        if op is _sre.ANY:
            return self.everything
        if op is _sre.IN:
            negate = bool(av) and av[0][0] is _sre.NEGATE
            items = av[1:] if negate else av
            found = self._where(lambda ch: any(_in_item(item, ch) for item in items))
            return self.everything - found if negate else found
        return self.everything  # anything unexpected counts as "could be any character"

    def _where(self, test: Any) -> _Charset:
        if not self.icase:
            return frozenset(c for c in self.alphabet if test(c))
        return frozenset(c for c in self.alphabet if any(test(v) for v in _case_variants(c)))

    def _first(self, seq: list[Any]) -> tuple[_Charset, bool]:
        """The characters ``seq`` can start with, and whether it can match the empty string."""
        first: set[int] = set()
        for op, av in seq:
            item_first, nullable = self._first_item(op, av)
            first |= item_first
            if not nullable:
                return frozenset(first), False
        return frozenset(first), True

    def _first_item(self, op: Any, av: Any) -> tuple[_Charset, bool]:
        # Parse-tree nodes live as long as the analysis, so their identity is a safe memo key.
        key = (op, id(av))
        if key not in self._memo:
            self._memo[key] = self._first_item_uncached(op, av)
        return self._memo[key]

    def _first_item_uncached(self, op: Any, av: Any) -> tuple[_Charset, bool]:
        if op in (_sre.LITERAL, _sre.NOT_LITERAL, _sre.ANY, _sre.IN):
            return self._chars(op, av), False
        if op in _REPEATS:
            low, _high, body = av
            first, nullable = self._first(list(body))
            return first, nullable or low == 0
        if op is _sre.SUBPATTERN:
            return self._first(list(av[3]))
        if op is _sre.ATOMIC_GROUP:
            return self._first(list(av))
        if op is _sre.BRANCH:
            firsts = [self._first(list(alt)) for alt in av[1]]
            return frozenset().union(*(f for f, _ in firsts)), any(n for _, n in firsts)
        if op is _sre.GROUPREF_EXISTS:
            yes = self._first(list(av[1]))
            no = self._first(list(av[2])) if av[2] is not None else (frozenset(), True)
            return yes[0] | no[0], yes[1] or no[1]
        if op is _sre.GROUPREF:
            return self.everything, True
        return frozenset(), True  # anchors and lookarounds consume nothing

    def _then(self, seq: list[Any], follow: _Charset) -> _Charset:
        first, nullable = self._first(seq)
        return first | follow if nullable else first

    def _afters(self, seq: list[Any], follow: _Charset) -> list[_Charset]:
        """For each item of ``seq``, what may come right after it (built from the end: linear)."""
        out = [follow] * len(seq)
        for i in range(len(seq) - 2, -1, -1):
            first, nullable = self._first_item(*seq[i + 1])
            out[i] = first | out[i + 1] if nullable else first
        return out

    # -- the walk

    def _walk(self, seq: list[Any], follow: _Charset) -> None:
        """Count polynomial factors and look for exponential shapes; ``follow`` may come after ``seq``."""
        for (op, av), after in zip(seq, self._afters(seq, follow), strict=True):
            if op in _REPEATS:
                low, high, body = av
                body = list(body)
                body_first, _ = self._first(body)
                if high - low > 8 and op is not _sre.POSSESSIVE_REPEAT:
                    if body_first & after:
                        self.ambiguous += 1
                    else:
                        self.tail = True
                if high > 1 and op is not _sre.POSSESSIVE_REPEAT and self.problem is None:
                    self.problem = self._splits_iterations(body, body_first)
                self._walk(body, body_first | after if high > 1 else after)
            elif op is _sre.SUBPATTERN:
                self._walk(list(av[3]), after)
            elif op is _sre.ATOMIC_GROUP:
                self._walk(list(av), after)
            elif op is _sre.BRANCH:
                for alt in av[1]:
                    self._walk(list(alt), after)
            elif op is _sre.GROUPREF_EXISTS:
                self._walk(list(av[1]), after)
                if av[2] is not None:
                    self._walk(list(av[2]), after)
            elif op in (_sre.ASSERT, _sre.ASSERT_NOT):
                direction, body = av
                self.looks_ahead = self.looks_ahead or direction == 1
                self._walk(list(body), self.everything)

    def _splits_iterations(self, seq: list[Any], follow: _Charset) -> str | None:
        """A choice inside a repeated group that the next character cannot settle, if any.

        ``follow`` holds what may come after ``seq`` inside one iteration: the start of the next.
        """
        for (op, av), after in zip(seq, self._afters(seq, follow), strict=True):
            if op in _VARIABLE:
                low, high, body = av
                body = list(body)
                body_first, _ = self._first(body)
                if low != high and body_first & after:
                    return (
                        "nested quantifiers can backtrack catastrophically: a repeat inside a repeated group "
                        "can also start its next iteration, as in '(a+)+' or '(\\w+\\s?)+'. Repeat a single "
                        "character class, or start each iteration with a separator: '[a-z]+(\\.[a-z]+)*'"
                    )
                inner = self._splits_iterations(body, body_first | after if high > 1 else after)
                if inner:
                    return inner
            elif op is _sre.BRANCH:
                starts = [self._then(list(alt), after) for alt in av[1]]
                for j, one in enumerate(starts):
                    if any(one & other for other in starts[j + 1 :]):
                        return (
                            "alternatives under a repeat overlap, as in '(a|aa)+': the regex can backtrack "
                            "catastrophically. Make the alternatives start differently, or use a character class"
                        )
                for alt in av[1]:
                    inner = self._splits_iterations(list(alt), after)
                    if inner:
                        return inner
            elif op is _sre.SUBPATTERN:
                inner = self._splits_iterations(list(av[3]), after)
                if inner:
                    return inner
            elif op is _sre.GROUPREF_EXISTS:
                for body in (av[1], av[2]):
                    inner = self._splits_iterations(list(body), after) if body is not None else None
                    if inner:
                        return inner
            # Possessive repeats and atomic groups never give back what they took: no choice to undo.
        return None


def _in_item(item: tuple[Any, Any], ch: int) -> bool:
    op, av = item
    if op is _sre.LITERAL:
        return ch == av
    if op is _sre.RANGE:
        return av[0] <= ch <= av[1]
    if op is _sre.CATEGORY:
        category = _CATEGORIES.get(av)
        return category is None or category.match(chr(ch)) is not None
    return True  # unknown item: assume it may match, which only makes the analysis stricter


def _case_variants(ch: int) -> set[int]:
    char = chr(ch)
    return {ch} | {ord(v) for v in (char.lower(), char.upper(), char.casefold()) if len(v) == 1}


def _collect_codes(seq: list[Any], codes: set[int]) -> None:
    """Add every literal and range bound (and a few range interior points) to the sample alphabet."""
    for op, av in seq:
        if op in (_sre.LITERAL, _sre.NOT_LITERAL):
            codes.add(av)
        elif op is _sre.IN:
            for item_op, item_av in av:
                if item_op is _sre.LITERAL:
                    codes.add(item_av)
                elif item_op is _sre.RANGE:
                    low, high = item_av
                    codes.update(range(low, high + 1, max(1, (high - low) // 64)))
                    codes.add(high)
        elif op in _REPEATS:
            _collect_codes(list(av[2]), codes)
        elif op is _sre.SUBPATTERN:
            _collect_codes(list(av[3]), codes)
        elif op is _sre.ATOMIC_GROUP:
            _collect_codes(list(av), codes)
        elif op is _sre.BRANCH:
            for alt in av[1]:
                _collect_codes(list(alt), codes)
        elif op in (_sre.ASSERT, _sre.ASSERT_NOT):
            _collect_codes(list(av[1]), codes)
        elif op is _sre.GROUPREF_EXISTS:
            _collect_codes(list(av[1]), codes)
            if av[2] is not None:
                _collect_codes(list(av[2]), codes)


def _any_scoped_ignorecase(seq: list[Any]) -> bool:
    """Whether some ``(?i:...)`` group switches case-insensitivity on (then compare sets caselessly)."""
    for op, av in seq:
        if op is _sre.SUBPATTERN and (av[1] & re.IGNORECASE or _any_scoped_ignorecase(list(av[3]))):
            return True
        if op in _REPEATS and _any_scoped_ignorecase(list(av[2])):
            return True
        if op is _sre.BRANCH and any(_any_scoped_ignorecase(list(alt)) for alt in av[1]):
            return True
        if op is _sre.ATOMIC_GROUP and _any_scoped_ignorecase(list(av)):
            return True
    return False


def analyze(body: str, flags: int) -> RegexShape:
    """The shape of a regex that ``re.compile(body, flags)`` accepted."""
    return RegexShape(_sre_parse.parse(body, flags))
