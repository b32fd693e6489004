r"""How long a regex may take on text an agent chooses, read from its parse tree (the ReDoS analysis).

The tree comes from ``regex_syntax``, our own reading of the syntax ``re.compile`` accepted.

Python's re backtracks. Two shapes make it slow on text an agent chooses:
  exponential: a repeated group whose iterations can split the same text in several ways,
    because something variable inside it can also start the next iteration ((a+)+, (\w+\s?)+,
    (a|aa)+). Refused. (\.[a-z]+)* is fine: [a-z]+ must stop at the '.' that starts the next one.
  polynomial: n start positions times, for each unbounded repeat that overlaps what follows it,
    n ways to end it (a.*b.*c is n^3). Bounded by reading at most
    2 ** (22 / degree) characters: about 2000 for degree 2, 160 for degree 3.
Character sets are compared on a sample alphabet: ASCII, Latin-1, a few characters of other
scripts and categories, plus every literal and range bound the pattern names.

``compile_matcher`` (``patterns``) refuses what ``RegexShape.problem`` names and reads a value only up
to ``RegexShape.max_chars``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from .patterns import MAX_VALUE_CHARS
from .regex_syntax import (
    AnyChar,
    At,
    Atomic,
    Backref,
    Branch,
    CharSet,
    Conditional,
    Group,
    Literal,
    Look,
    Node,
    NotLiteral,
    Range,
    Repeat,
    SetItem,
    SetLiteral,
    parse,
)

__all__ = ["MAX_VALUE_CHARS", "RegexShape", "analyze"]


_Charset = frozenset[int]
_BUDGET_LOG2 = 22
_SAMPLE_EXTRA = (
    0x100, 0x130, 0x131, 0x17F, 0x391, 0x3C9, 0x410, 0x44F, 0x5D0, 0x627, 0x660, 0x669, 0x966,
    0x1680, 0x2000, 0x2028, 0x2029, 0x212A, 0x3000, 0x4E2D, 0xFF10, 0xFF21, 0x1F600, 0x10FFFF,
)  # fmt: skip
_CATEGORIES = {letter: re.compile(f"\\{letter}") for letter in "dDsSwW"}
_Seq = Sequence[Node]
_CHARS = (Literal, NotLiteral, AnyChar, CharSet)
_LEAVES = (*_CHARS, At, Backref)


class RegexShape:
    """What matters about a parsed regex for its worst-case running time."""

    def __init__(self, seq: _Seq, flags: int) -> None:
        self._tree = seq  # kept alive: the memo below is keyed by node identity
        self.icase = bool(flags & re.IGNORECASE) or _any_scoped_ignorecase(seq)
        codes = set(range(256)) | set(_SAMPLE_EXTRA)
        _collect_codes(seq, codes)
        self.alphabet: tuple[int, ...] = tuple(sorted(c for c in codes if 0 <= c <= 0x10FFFF))
        self.everything: _Charset = frozenset(self.alphabet)
        self._memo: dict[object, tuple[_Charset, bool]] = {}
        self.problem: str | None = None
        self.looks_ahead = False
        self.ambiguous = 0
        self.tail = False
        self._walk(seq, frozenset())
        first = seq[0] if seq else None
        anchored = isinstance(first, At) and (
            first.where == "beginning_string" or (first.where == "beginning" and not flags & re.MULTILINE)
        )
        self.degree = (0 if anchored else 1) + self.ambiguous + (1 if self.tail else 0)
        self.max_chars = (
            MAX_VALUE_CHARS if self.degree <= 1 else min(MAX_VALUE_CHARS, int(2 ** (_BUDGET_LOG2 / self.degree)))
        )

    # -- character sets

    def _chars(self, node: Literal | NotLiteral | AnyChar | CharSet) -> _Charset:
        if isinstance(node, Literal):
            return self._where(lambda ch: ch == node.code)
        if isinstance(node, NotLiteral):
            return self._where(lambda ch: ch != node.code)
        if isinstance(node, AnyChar):
            return self.everything
        found = self._where(lambda ch: any(_in_item(item, ch) for item in node.items))
        return self.everything - found if node.negate else found

    def _where(self, test: Callable[[int], bool]) -> _Charset:
        if not self.icase:
            return frozenset(c for c in self.alphabet if test(c))
        return frozenset(c for c in self.alphabet if any(test(v) for v in _case_variants(c)))

    def _first(self, seq: _Seq) -> tuple[_Charset, bool]:
        """The characters ``seq`` can start with, and whether it can match the empty string."""
        first: set[int] = set()
        for node in seq:
            item_first, nullable = self._first_item(node)
            first |= item_first
            if not nullable:
                return frozenset(first), False
        return frozenset(first), True

    def _first_item(self, node: Node) -> tuple[_Charset, bool]:
        # A character or anchor is its own key (equal ones share the answer); a node holding a sequence is
        # keyed by identity, safe since nodes live as long as the analysis (``self._tree``).
        key: object = node if isinstance(node, _LEAVES) else id(node)
        if key not in self._memo:
            self._memo[key] = self._first_item_uncached(node)
        return self._memo[key]

    def _first_item_uncached(self, node: Node) -> tuple[_Charset, bool]:
        if isinstance(node, _CHARS):
            return self._chars(node), False
        if isinstance(node, Repeat):
            first, nullable = self._first(node.body)
            return first, nullable or node.low == 0
        if isinstance(node, Group | Atomic):
            return self._first(node.body)
        if isinstance(node, Branch):
            firsts = [self._first(alt) for alt in node.alternatives]
            return frozenset[int]().union(*(f for f, _ in firsts)), any(n for _, n in firsts)
        if isinstance(node, Conditional):
            yes = self._first(node.yes)
            no = self._first(node.no) if node.no is not None else (frozenset[int](), True)
            return yes[0] | no[0], yes[1] or no[1]
        if isinstance(node, Backref):
            return self.everything, True
        return frozenset(), True  # anchors and lookarounds consume nothing

    def _then(self, seq: _Seq, follow: _Charset) -> _Charset:
        first, nullable = self._first(seq)
        return first | follow if nullable else first

    def _afters(self, seq: _Seq, follow: _Charset) -> list[_Charset]:
        """For each item of ``seq``, what may come right after it (built from the end: linear)."""
        out = [follow] * len(seq)
        for i in range(len(seq) - 2, -1, -1):
            first, nullable = self._first_item(seq[i + 1])
            out[i] = first | out[i + 1] if nullable else first
        return out

    # -- the walk

    def _walk(self, seq: _Seq, follow: _Charset) -> None:
        """Count polynomial factors and look for exponential shapes; ``follow`` may come after ``seq``."""
        for node, after in zip(seq, self._afters(seq, follow), strict=True):
            if isinstance(node, Repeat):
                body_first, _ = self._first(node.body)
                backtracks = node.mode != "possessive"
                if node.high - node.low > 8 and backtracks:
                    if body_first & after:
                        self.ambiguous += 1
                    else:
                        self.tail = True
                if node.high > 1 and backtracks and self.problem is None:
                    self.problem = self._splits_iterations(node.body, body_first)
                self._walk(node.body, body_first | after if node.high > 1 else after)
            elif isinstance(node, Group | Atomic):
                self._walk(node.body, after)
            elif isinstance(node, Branch):
                for alt in node.alternatives:
                    self._walk(alt, after)
            elif isinstance(node, Conditional):
                self._walk(node.yes, after)
                if node.no is not None:
                    self._walk(node.no, after)
            elif isinstance(node, Look):
                self.looks_ahead = self.looks_ahead or not node.behind
                self._walk(node.body, self.everything)

    def _splits_iterations(self, seq: _Seq, follow: _Charset) -> str | None:
        """A choice inside a repeated group that the next character cannot settle, if any.

        ``follow`` holds what may come after ``seq`` inside one iteration: the start of the next.
        """
        for node, after in zip(seq, self._afters(seq, follow), strict=True):
            if isinstance(node, Repeat) and node.mode != "possessive":
                body_first, _ = self._first(node.body)
                if node.low != node.high and body_first & after:
                    return (
                        "nested quantifiers can backtrack catastrophically: a repeat inside a repeated group "
                        "can also start its next iteration, as in '(a+)+' or '(\\w+\\s?)+'. Repeat a single "
                        "character class, or start each iteration with a separator: '[a-z]+(\\.[a-z]+)*'"
                    )
                inner = self._splits_iterations(node.body, body_first | after if node.high > 1 else after)
                if inner:
                    return inner
            elif isinstance(node, Branch):
                starts = [self._then(alt, after) for alt in node.alternatives]
                for j, one in enumerate(starts):
                    if any(one & other for other in starts[j + 1 :]):
                        return (
                            "alternatives under a repeat overlap, as in '(a|aa)+': the regex can backtrack "
                            "catastrophically. Make the alternatives start differently, or use a character class"
                        )
                for alt in node.alternatives:
                    inner = self._splits_iterations(alt, after)
                    if inner:
                        return inner
            elif isinstance(node, Group):
                inner = self._splits_iterations(node.body, after)
                if inner:
                    return inner
            elif isinstance(node, Conditional):
                for body in (node.yes, node.no):
                    inner = self._splits_iterations(body, after) if body is not None else None
                    if inner:
                        return inner
            # Possessive repeats and atomic groups never give back what they took: no choice to undo.
        return None


def _in_item(item: SetItem, ch: int) -> bool:
    if isinstance(item, SetLiteral):
        return ch == item.code
    if isinstance(item, Range):
        return item.low <= ch <= item.high
    return _CATEGORIES[item.letter].match(chr(ch)) is not None


def _case_variants(ch: int) -> set[int]:
    char = chr(ch)
    return {ch} | {ord(v) for v in (char.lower(), char.upper(), char.casefold()) if len(v) == 1}


def _collect_codes(seq: _Seq, codes: set[int]) -> None:
    """Add every literal and range bound (and a few range interior points) to the sample alphabet."""
    for node in seq:
        if isinstance(node, Literal | NotLiteral):
            codes.add(node.code)
        elif isinstance(node, CharSet):
            for item in node.items:
                if isinstance(item, SetLiteral):
                    codes.add(item.code)
                elif isinstance(item, Range):
                    codes.update(range(item.low, item.high + 1, max(1, (item.high - item.low) // 64)))
                    codes.add(item.high)
        elif isinstance(node, Repeat | Group | Atomic | Look):
            _collect_codes(node.body, codes)
        elif isinstance(node, Branch):
            for alt in node.alternatives:
                _collect_codes(alt, codes)
        elif isinstance(node, Conditional):
            _collect_codes(node.yes, codes)
            if node.no is not None:
                _collect_codes(node.no, codes)


def _any_scoped_ignorecase(seq: _Seq) -> bool:
    """Whether some ``(?i:...)`` group switches case-insensitivity on (then compare sets caselessly)."""
    for node in seq:
        if isinstance(node, Group) and (node.add_flags & re.IGNORECASE or _any_scoped_ignorecase(node.body)):
            return True
        if isinstance(node, Repeat | Atomic) and _any_scoped_ignorecase(node.body):
            return True
        if isinstance(node, Branch) and any(_any_scoped_ignorecase(alt) for alt in node.alternatives):
            return True
    return False


def analyze(body: str, flags: int) -> RegexShape:
    """The shape of a regex that ``re.compile(body, flags)`` accepted."""
    parsed = parse(body, flags)
    return RegexShape(parsed.items, parsed.flags)
