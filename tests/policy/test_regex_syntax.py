"""policy/regex_syntax.py: our reading of Python's regex syntax, which the backtracking analysis walks."""

from __future__ import annotations

import re

import pytest

from mcp_gateway.policy.regex_syntax import (
    UNBOUNDED,
    At,
    Atomic,
    Backref,
    Branch,
    Category,
    CharSet,
    Conditional,
    Group,
    Literal,
    Look,
    NotLiteral,
    Range,
    Repeat,
    SetLiteral,
    parse,
)


def items(pattern: str, flags: int = 0) -> tuple[object, ...]:
    re.compile(pattern, flags)  # only what re accepts is ever parsed
    return parse(pattern, flags).items


def test_one_character_alternatives_fold_into_a_set_as_the_stdlib_parser_does() -> None:
    (folded,) = items(r"\w|\d|a")
    assert folded == CharSet((Category("w"), Category("d"), SetLiteral(ord("a"))))


def test_common_leading_items_move_out_of_a_branch() -> None:
    first, branch = items("ab|ac")
    assert first == Literal(ord("a"))
    assert isinstance(branch, CharSet) and branch.items == (SetLiteral(ord("b")), SetLiteral(ord("c")))
    a, rest = items("a(x)|a(y)")
    assert a == Literal(ord("a")) and isinstance(rest, Branch)  # groups never compare equal


def test_sets() -> None:
    assert items("[a]") == (Literal(ord("a")),)
    assert items("[^a]") == (NotLiteral(ord("a")),)
    assert items(r"[]a-c\d-]") == (
        CharSet((SetLiteral(ord("]")), Range(ord("a"), ord("c")), Category("d"), SetLiteral(ord("-")))),
    )
    assert items(r"[^\s\x41]") == (CharSet((Category("s"), SetLiteral(0x41)), negate=True),)
    assert items(r"[\b]") == (Literal(8),)  # backspace inside a set, a word boundary outside
    assert items(r"\b") == (At("boundary"),)


def test_quantifiers() -> None:
    (star,) = items("(?:ab)*?")
    assert isinstance(star, Repeat) and (star.low, star.high, star.mode) == (0, UNBOUNDED, "lazy")
    assert star.body == (Literal(ord("a")), Literal(ord("b")))  # the non-capturing group is unwrapped
    (bounded,) = items("a{2,5}+")
    assert isinstance(bounded, Repeat) and (bounded.low, bounded.high, bounded.mode) == (2, 5, "possessive")
    assert items("a{,x}") == tuple(Literal(ord(c)) for c in "a{,x}")  # not a quantifier: literal braces
    (capturing,) = items("(a)+")
    assert isinstance(capturing, Repeat) and isinstance(capturing.body[0], Group)


def test_groups_lookarounds_backreferences_and_conditionals() -> None:
    group, ref, named_ref = items(r"(?P<x>a)\1(?P=x)")
    assert isinstance(group, Group) and group.group == 1 and ref == Backref(1) and named_ref == Backref(1)
    (atomic,) = items("(?>a+)")
    assert isinstance(atomic, Atomic)
    behind, ahead = items("(?<!a)(?=b)")
    assert isinstance(behind, Look) and behind.behind and behind.negative
    assert isinstance(ahead, Look) and not ahead.behind and not ahead.negative
    _, conditional = items("(a)?(?(1)b|c)")
    assert isinstance(conditional, Conditional) and conditional.group == 1 and conditional.no is not None
    (scoped,) = items("(?i:a)")
    assert isinstance(scoped, Group) and scoped.add_flags & re.IGNORECASE
    assert items("(?#a comment)a") == (Literal(ord("a")),)


def test_flags_and_verbose_mode() -> None:
    parsed = parse("(?mx) a b  # a comment\n c")
    assert parsed.flags & re.MULTILINE and parsed.flags & re.VERBOSE
    assert parsed.items == tuple(Literal(ord(c)) for c in "abc")
    assert items(r"a\ b", re.VERBOSE) == tuple(Literal(ord(c)) for c in "a b")


def test_escapes() -> None:
    assert items(r"\x41\u00e9\N{EM DASH}\101\0\n\.") == tuple(
        Literal(c) for c in (0x41, 0xE9, 0x2014, 0o101, 0, 10, ord("."))
    )
    assert items(r"\A\Z") == (At("beginning_string"), At("end_string"))


@pytest.mark.parametrize(
    "pattern",
    [
        r"^(?:[a-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[a-z0-9!#$%&'*+/=?^_`{|}~-]+)*)@(?:[a-z0-9-]+\.)+[a-z]{2,}$",
        r"(?P<year>\d{4})-(?P<month>\d\d)(?:-(?P=month))?",
        r"(?i)(?<=\s)(select|drop)\s+\w+(?!\w)",
        r"[\]\[\\^-]{1,3}?|\{\}|x{}",
    ],
)
def test_real_world_patterns_parse(pattern: str) -> None:
    assert items(pattern)
