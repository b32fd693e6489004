r"""A parse tree of Python's regular-expression syntax, for the backtracking analysis (``regex_shape``).

``parse`` reads only patterns that ``re.compile`` has already accepted, so it reports no errors: it
reads the syntax ``re`` documents (escapes, sets, groups of every kind, lookarounds, conditionals,
greedy, lazy and possessive quantifiers, inline and scoped flags, verbose mode) into the nodes below.
It keeps the simplifications of the stdlib's own parser that change what the analysis sees, so both
judge a pattern alike:

* a non-capturing group without flags is flattened into its surroundings;
* items every alternative of a branch starts with are moved out of it (``ab|ac`` is ``a(?:b|c)``);
  single characters, sets and back-references compare by value, anything containing a sequence
  never does;
* a branch of single characters or non-negated sets becomes one set (``\w|\d`` is ``[\w\d]``);
* a set of one literal is that literal (``[a]`` is ``a``, ``[^a]`` is "not ``a``").
"""

from __future__ import annotations

import re
import sys
import unicodedata
from dataclasses import dataclass
from typing import Literal as TypingLiteral

__all__ = [
    "UNBOUNDED",
    "AnyChar",
    "At",
    "Atomic",
    "Backref",
    "Branch",
    "Category",
    "CharSet",
    "Conditional",
    "Group",
    "Literal",
    "Look",
    "Node",
    "NotLiteral",
    "Parsed",
    "Range",
    "Repeat",
    "Seq",
    "SetItem",
    "SetLiteral",
    "parse",
]

UNBOUNDED = sys.maxsize
"""The upper bound of ``*``, ``+`` and ``{m,}``: more than any count ``re`` accepts."""

# -- set items ------------------------------------------------------------------------------


@dataclass(frozen=True)
class SetLiteral:
    code: int


@dataclass(frozen=True)
class Range:
    low: int
    high: int


@dataclass(frozen=True)
class Category:
    """``\\d``, ``\\D``, ``\\s``, ``\\S``, ``\\w`` or ``\\W``, by its letter."""

    letter: str


SetItem = SetLiteral | Range | Category

# -- nodes: leaves compare by value ---------------------------------------------------------


@dataclass(frozen=True)
class Literal:
    code: int


@dataclass(frozen=True)
class NotLiteral:
    code: int


@dataclass(frozen=True)
class AnyChar:
    pass


@dataclass(frozen=True)
class CharSet:
    items: tuple[SetItem, ...]
    negate: bool = False


AtKind = TypingLiteral["beginning", "end", "beginning_string", "end_string", "boundary", "non_boundary"]


@dataclass(frozen=True)
class At:
    where: AtKind


@dataclass(frozen=True)
class Backref:
    group: int


# -- nodes holding sequences: identity equality (never moved out of a branch) --------------


@dataclass(frozen=True, eq=False)
class Repeat:
    low: int
    high: int
    body: Seq
    mode: TypingLiteral["greedy", "lazy", "possessive"]


@dataclass(frozen=True, eq=False)
class Group:
    """A capturing group (``group`` is its number) or one with scoped flags (``(?i:...)``)."""

    body: Seq
    group: int | None
    add_flags: int
    del_flags: int


@dataclass(frozen=True, eq=False)
class Atomic:
    body: Seq


@dataclass(frozen=True, eq=False)
class Branch:
    alternatives: tuple[Seq, ...]


@dataclass(frozen=True, eq=False)
class Look:
    body: Seq
    behind: bool
    negative: bool


@dataclass(frozen=True, eq=False)
class Conditional:
    """``(?(group)yes|no)``."""

    group: int
    yes: Seq
    no: Seq | None


Node = Literal | NotLiteral | AnyChar | CharSet | At | Backref | Repeat | Group | Atomic | Branch | Look | Conditional
Seq = tuple[Node, ...]


@dataclass(frozen=True)
class Parsed:
    items: Seq
    flags: int
    """The flags given plus those the pattern sets globally (``(?i)`` at its start)."""


# -- the tokens -----------------------------------------------------------------------------

_SPECIAL = frozenset(".\\[{()*+?^$|")
_REPEAT_CHARS = frozenset("*+?{")
_DIGITS = frozenset("0123456789")
_OCTDIGITS = frozenset("01234567")
_HEXDIGITS = frozenset("0123456789abcdefABCDEF")
_WHITESPACE = frozenset(" \t\n\r\v\f")
_FLAGS = {
    "i": re.IGNORECASE,
    "L": re.LOCALE,
    "m": re.MULTILINE,
    "s": re.DOTALL,
    "x": re.VERBOSE,
    "a": re.ASCII,
    "t": 1,  # re.TEMPLATE, deprecated: spelled as its value so that reading it warns nobody
    "u": re.UNICODE,
}
_ESCAPES = {
    r"\a": 7,
    r"\b": 8,
    r"\f": 12,
    r"\n": 10,
    r"\r": 13,
    r"\t": 9,
    r"\v": 11,
    "\\\\": 92,
}
_ANCHOR_ESCAPES: dict[str, AtKind] = {
    r"\A": "beginning_string",
    r"\b": "boundary",
    r"\B": "non_boundary",
    r"\Z": "end_string",
}
_CATEGORY_LETTERS = frozenset("dDsSwW")


class _Tokens:
    """The pattern as tokens: one character, or a backslash and the character after it."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.index = 0
        self.next: str | None = None
        self._advance()

    def _advance(self) -> None:
        i = self.index
        if i >= len(self.text):
            self.next = None
            return
        char = self.text[i]
        if char == "\\" and i + 1 < len(self.text):
            char += self.text[i + 1]
        self.index = i + len(char)
        self.next = char

    def get(self) -> str | None:
        this = self.next
        self._advance()
        return this

    def match(self, char: str) -> bool:
        if self.next == char:
            self._advance()
            return True
        return False

    def tell(self) -> int:
        return self.index - len(self.next or "")

    def seek(self, index: int) -> None:
        self.index = index
        self._advance()

    def get_while(self, n: int, chars: frozenset[str]) -> str:
        out = ""
        for _ in range(n):
            if self.next is None or self.next not in chars:
                break
            out += self.next
            self._advance()
        return out

    def get_until(self, terminator: str) -> str:
        out = ""
        while (this := self.get()) is not None and this != terminator:
            out += this
        return out


class _State:
    def __init__(self, flags: int) -> None:
        self.flags = flags
        self.groups = 1
        self.names: dict[str, int] = {}

    def open_group(self, name: str | None) -> int:
        number = self.groups
        self.groups += 1
        if name is not None:
            self.names[name] = number
        return number


# -- the parser -----------------------------------------------------------------------------


def parse(pattern: str, flags: int = 0) -> Parsed:
    """The tree of a pattern ``re.compile(pattern, flags)`` accepted."""
    state = _State(flags)
    items = _alternation(_Tokens(pattern), state, verbose=bool(flags & re.VERBOSE), nested=0)
    return Parsed(tuple(items), state.flags)


def _alternation(source: _Tokens, state: _State, *, verbose: bool, nested: int) -> list[Node]:
    alternatives: list[list[Node]] = []
    while True:
        alternatives.append(_sequence(source, state, verbose=verbose, nested=nested + 1))
        if not source.match("|"):
            break
        if not nested:
            verbose = bool(state.flags & re.VERBOSE)
    if len(alternatives) == 1:
        return alternatives[0]
    out: list[Node] = []
    # Items every alternative starts with move out of the branch.
    while all(alternatives) and all(alt[0] == alternatives[0][0] for alt in alternatives[1:]):
        out.append(alternatives[0][0])
        for alt in alternatives:
            del alt[0]
    # A branch of single characters is a set.
    members: list[SetItem] = []
    for alt in alternatives:
        if len(alt) != 1:
            break
        only = alt[0]
        if isinstance(only, Literal):
            members.append(SetLiteral(only.code))
        elif isinstance(only, CharSet) and not only.negate:
            members.extend(only.items)
        else:
            break
    else:
        out.append(CharSet(_unique(members)))
        return out
    out.append(Branch(tuple(tuple(alt) for alt in alternatives)))
    return out


def _sequence(source: _Tokens, state: _State, *, verbose: bool, nested: int) -> list[Node]:
    items: list[Node] = []
    while True:
        this = source.next
        if this is None or this in ("|", ")"):
            break
        source.get()
        if verbose and this in _WHITESPACE:
            continue
        if verbose and this == "#":
            while (this := source.get()) is not None and this != "\n":
                pass
            continue
        if this[0] == "\\":
            items.append(_escape(source, this, state))
        elif this not in _SPECIAL:
            items.append(Literal(ord(this)))
        elif this == "[":
            items.append(_set(source))
        elif this in _REPEAT_CHARS:
            bounds = _bounds(source, this)
            if bounds is None:
                items.append(Literal(ord("{")))
                continue
            last = items[-1]
            body: Seq = (last,)
            if isinstance(last, Group) and last.group is None and not last.add_flags and not last.del_flags:
                body = last.body
            mode: TypingLiteral["greedy", "lazy", "possessive"] = "greedy"
            if source.match("?"):
                mode = "lazy"
            elif source.match("+"):
                mode = "possessive"
            items[-1] = Repeat(bounds[0], bounds[1], body, mode)
        elif this == ".":
            items.append(AnyChar())
        elif this == "(":
            group = _group(source, state, verbose=verbose, nested=nested)
            if isinstance(group, str):  # (?flags) at the start: they apply from here on
                verbose = bool(state.flags & re.VERBOSE)
            elif group is not None:
                items.append(group)
        elif this == "^":
            items.append(At("beginning"))
        elif this == "$":
            items.append(At("end"))
    # Flatten non-capturing groups without flags.
    out: list[Node] = []
    for item in items:
        if isinstance(item, Group) and item.group is None and not item.add_flags and not item.del_flags:
            out.extend(item.body)
        else:
            out.append(item)
    return out


def _bounds(source: _Tokens, this: str) -> tuple[int, int] | None:
    """The bounds of a quantifier; None when a ``{`` is a literal brace."""
    if this == "?":
        return 0, 1
    if this == "*":
        return 0, UNBOUNDED
    if this == "+":
        return 1, UNBOUNDED
    here = source.tell()
    if source.next == "}":
        return None
    low = source.get_while(sys.maxsize, _DIGITS)
    high = source.get_while(sys.maxsize, _DIGITS) if source.match(",") else low
    if not source.match("}"):
        source.seek(here)
        return None
    return int(low) if low else 0, int(high) if high else UNBOUNDED


def _group(source: _Tokens, state: _State, *, verbose: bool, nested: int) -> Node | str | None:
    """What follows a ``(``: a node, None for a comment, or ``"global flags"`` for ``(?flags)``."""
    group: int | None = None
    add_flags = del_flags = 0
    atomic = False
    if source.match("?"):
        char = source.get() or ""
        if char == "P":
            if source.match("<"):
                group = state.open_group(source.get_until(">"))
            else:  # (?P=name)
                source.match("=")
                return Backref(state.names[source.get_until(")")])
        elif char == ":":
            pass
        elif char == "#":
            source.get_until(")")
            return None
        elif char in ("=", "!", "<"):
            behind = char == "<"
            if behind:
                char = source.get() or ""
            body = _alternation(source, state, verbose=verbose, nested=nested + 1)
            source.match(")")
            return Look(tuple(body), behind=behind, negative=char == "!")
        elif char == "(":
            name = source.get_until(")")
            number = int(name) if name.isdecimal() else state.names[name]
            yes = _sequence(source, state, verbose=verbose, nested=nested + 1)
            no = _sequence(source, state, verbose=verbose, nested=nested + 1) if source.match("|") else None
            source.match(")")
            return Conditional(number, tuple(yes), tuple(no) if no is not None else None)
        elif char == ">":
            atomic = True
        else:  # flags: (?aiLmsux), (?aiLmsux-imsx:...)
            while char not in ("-", ":", ")"):
                add_flags |= _FLAGS.get(char, 0)
                char = source.get() or ")"
            if char == ")":
                state.flags |= add_flags
                return "global flags"
            if char == "-":
                while (char := source.get() or ":") != ":":
                    del_flags |= _FLAGS.get(char, 0)
    else:
        group = state.open_group(None)
    sub_verbose = (verbose or bool(add_flags & re.VERBOSE)) and not del_flags & re.VERBOSE
    body = tuple(_alternation(source, state, verbose=sub_verbose, nested=nested + 1))
    source.match(")")
    if atomic:
        return Atomic(body)
    return Group(body, group, add_flags, del_flags)


def _escape(source: _Tokens, escape: str, state: _State) -> Node:
    if escape in _ANCHOR_ESCAPES:
        return At(_ANCHOR_ESCAPES[escape])
    if escape[1] in _CATEGORY_LETTERS:
        return CharSet((Category(escape[1]),))
    if escape in _ESCAPES:
        return Literal(_ESCAPES[escape])
    c = escape[1]
    if c == "0":
        return Literal(int(c + source.get_while(2, _OCTDIGITS), 8))
    if c in _DIGITS:
        if source.next is not None and source.next in _DIGITS:
            escape += source.get() or ""
            if escape[1] in _OCTDIGITS and escape[2] in _OCTDIGITS and source.next in _OCTDIGITS:
                return Literal(int(escape[1:] + (source.get() or ""), 8))
        return Backref(int(escape[1:]))
    return Literal(_character(source, escape))


def _character(source: _Tokens, escape: str) -> int:
    """The code of a character escape (``\\x41``, ``\\u0041``, ``\\U00000041``, ``\\N{...}``, ``\\.``)."""
    c = escape[1]
    if c == "x":
        return int(source.get_while(2, _HEXDIGITS), 16)
    if c == "u":
        return int(source.get_while(4, _HEXDIGITS), 16)
    if c == "U":
        return int(source.get_while(8, _HEXDIGITS), 16)
    if c == "N":
        source.match("{")
        return ord(unicodedata.lookup(source.get_until("}")))
    return ord(c)


def _set(source: _Tokens) -> Node:
    negate = source.match("^")
    members: list[SetItem] = []
    while True:
        this = source.get()
        if this is None or (this == "]" and members):
            break
        first = _set_member(source, this)
        if source.match("-"):
            that = source.get()
            if that is None:
                break
            if that == "]":
                members += [first, SetLiteral(ord("-"))]
                break
            last = _set_member(source, that)
            if isinstance(first, SetLiteral) and isinstance(last, SetLiteral):
                members.append(Range(first.code, last.code))
        else:
            members.append(first)
    unique = _unique(members)
    if len(unique) == 1 and isinstance(unique[0], SetLiteral):
        return NotLiteral(unique[0].code) if negate else Literal(unique[0].code)
    return CharSet(unique, negate=negate)


def _set_member(source: _Tokens, this: str) -> SetItem:
    if this[0] != "\\":
        return SetLiteral(ord(this))
    if this in _ESCAPES:
        return SetLiteral(_ESCAPES[this])
    if this[1] in _CATEGORY_LETTERS:
        return Category(this[1])
    if this[1] in _OCTDIGITS:
        return SetLiteral(int(this[1] + source.get_while(2, _OCTDIGITS), 8))
    return SetLiteral(_character(source, this))


def _unique(items: list[SetItem]) -> tuple[SetItem, ...]:
    return tuple(dict.fromkeys(items))
