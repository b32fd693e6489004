"""policy/patterns.py and regex_shape.py: globs, searched regexes, refused shapes and how much of a value is read."""

from __future__ import annotations

import re
import time

import pytest

from mcp_gateway import policy
from mcp_gateway.policy import MAX_VALUE_CHARS, compile_matcher

# -- globs ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "name", "expected"),
    [
        ("issues.create", "issues.create", True),
        ("issues.create", "xissues.create", False),
        ("issues.create", "issues.created", False),
        ("issues.create", "issues_create", False),  # '.' in a glob is a literal dot
        ("issues.create", "Issues.CREATE", True),
        ("ISSUES.*", "issues.list", True),
        ("*.delete*", "github.repos.delete", True),  # '*' crosses dots
        ("*.delete*", "github.repos.delete_ref", True),
        ("*.delete*", "github.repos.undelete", False),
        ("github.*", "github.repos.issues.comments.list", True),
        ("github.*", "githubx.repos.list", False),
        ("issues.?reate", "issues.create", True),
        ("issues.?reate", "issues.reate", False),
        ("[ab]*", "admin.purge", True),
        ("[ab]*", "charges.create", False),
        ("*", "anything.at.all", True),
    ],
)
def test_glob_is_anchored_case_insensitive_and_star_crosses_dots(pattern: str, name: str, expected: bool) -> None:
    assert compile_matcher(pattern).matches(name) is expected


def test_module_docstring_documents_that_star_crosses_dots() -> None:
    assert policy.__doc__ is not None and "including dots" in policy.__doc__


def test_many_stars_do_not_backtrack_catastrophically() -> None:
    started = time.perf_counter()
    assert not compile_matcher("*a*a*a*a*a*a*a*a*b").matches("a" * 4000)
    assert time.perf_counter() - started < 0.5


# -- regexes ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "text"),
    [
        (r"refunds", "stripe.refunds.create"),
        (r"^stripe\.refunds\.", "stripe.refunds.create"),
        (r"^stripe\.refunds\.", "xstripe.refunds.create"),
        (r"create$", "issues.create"),
        (r"create$", "issues.create_many"),
        (r"^a$", "a"),
        (r"^a$", "ab"),
        (r"^a|b$", "ax"),  # alternation binds loosest: (^a)|(b$)
        (r"^a|b$", "xb"),
        (r"^a|b$", "bx"),
        (r"(get|list)_.*", "repos.list_for_org"),
        (r"(get|list)_.*", "repos.create"),
        (r"a.b", "a\nb"),  # '.' does not cross a newline without the s flag
        (r"a$", "a\n"),
        (r"\bdrop\b", "please drop it"),
        (r"\bdrop\b", "dropped"),
        (r"^$", ""),
    ],
)
def test_regex_is_searched_exactly_as_python_searches(body: str, text: str) -> None:
    assert compile_matcher(f"/{body}/").matches(text) is (re.search(body, text) is not None)


def test_regex_is_case_sensitive_unless_flagged_i() -> None:
    assert not compile_matcher(r"/^stripe\.refunds\./").matches("Stripe.Refunds.create")
    assert compile_matcher(r"/^stripe\.refunds\./i").matches("Stripe.Refunds.create")


def test_regex_flags_s_and_m() -> None:
    assert compile_matcher("/a.b/s").matches("a\nb")
    assert compile_matcher("/^b$/m").matches("a\nb\nc")
    assert not compile_matcher("/^b$/").matches("a\nb\nc")


@pytest.mark.parametrize(
    ("pattern", "says"),
    [
        ("/([a-z/", "invalid regex"),
        ("/a(/", "invalid regex"),
        ("/foo/x", "unknown regex flag 'x'"),
        ("/foo/I", "unknown regex flag 'I'"),
        ("//", "empty regex"),
    ],
)
def test_unusable_regex_never_matches_and_says_why(pattern: str, says: str) -> None:
    matcher = compile_matcher(pattern)
    assert matcher.regex is None and matcher.error is not None and says in matcher.error
    for text in ("", "a", "foo", "([a-z", pattern):
        assert not matcher.matches(text)
        assert matcher.check(text) is False


@pytest.mark.parametrize(
    "pattern",
    [
        "/(a+)+$/",
        "/(.*)*x/",
        r"/(\w+\s?)+$/",
        r"/([a-zA-Z]+)*$/",
        r"/(\d+)*$/",
        r"/(x+x+)+y/",
        r"/^(([a-z])+.)+[A-Z]([a-z])+$/",
        "/(.*a){12}/",
        "/(a|aa)+$/",
        "/(a|a?)+$/",
        "/(a|a)+$/",
        r"/(?:\w+|\d)+$/",
        "/(?i:(a+)+)$/",
    ],
)
def test_catastrophic_shapes_are_refused(pattern: str) -> None:
    matcher = compile_matcher(pattern)
    assert matcher.regex is None
    assert matcher.error is not None and "catastrophic" in matcher.error
    assert not matcher.matches("a" * 30 + "!")


@pytest.mark.parametrize(
    "pattern",
    [
        r"/^stripe\.refunds\./i",
        "/(get|list)_.*/",
        "/(get|list)+/",
        r"/^[a-z]+(\.[a-z]+)*$/",
        r"/^[a-z][a-z0-9_-]*(\.[a-z0-9_-]+)*$/",
        r"/(?:[^/]+/)*[^/]+/",
        r"/(\d{3}-)+\d{4}/",
        r"/(\s*,\s*\w+)*/",
        r"/^[\w.+-]+@[\w-]+(\.[\w-]+)+$/",
        r"/^v\d+(\.\d+){0,2}$/",
        r"/\bdrop\s+table\b/i",
        r"/(?:ab|cd)+/",
        r"/(?:\w|\d)+$/",  # Python's parser folds one-character alternatives into a set
        "/(a++)+b/",  # possessive: never gives back, so no choice to undo
        "/.*delete.*/",
        "/a.*b.*c/",
    ],
)
def test_ordinary_patterns_compile(pattern: str) -> None:
    matcher = compile_matcher(pattern)
    assert matcher.error is None and matcher.regex is not None


def test_analysis_of_a_long_pattern_is_fast() -> None:
    compile_matcher.cache_clear()
    started = time.perf_counter()
    assert compile_matcher("/" + "a?" * 2000 + "b/").error is None
    assert compile_matcher("/^" + "[a-z]*," * 300 + "$/").error is None
    assert time.perf_counter() - started < 1.0


def test_compiled_matchers_are_cached() -> None:
    assert compile_matcher("/^issues\\./") is compile_matcher("/^issues\\./")


def test_read_length_shrinks_with_the_number_of_overlapping_repeats() -> None:
    assert compile_matcher("/^[a-z]+$/").max_chars == MAX_VALUE_CHARS
    assert compile_matcher("/.*x/").max_chars == 2048
    assert compile_matcher("/a.*b.*c/").max_chars == 161
    refused = compile_matcher("/.*.*.*.*x/")
    assert refused.regex is None and refused.error is not None and "overlapping repeats" in refused.error


@pytest.mark.parametrize(
    ("pattern", "unit"),
    [
        (r"/\s*\s*x/", " "),
        (r"/(\w+)\s(\w+)\s*$/", "a"),
        (r"/[a-z]+[0-9]+[a-z]+[0-9]+!/", "a1"),
        ("/a.*b.*c.*d/", "abc"),
        ("/.*.*=.*;/", "="),
    ],
)
def test_worst_case_text_for_an_accepted_pattern_stays_fast(pattern: str, unit: str) -> None:
    """Polynomial backtracking is bounded by reading fewer characters, not by refusing the pattern."""
    matcher = compile_matcher(pattern)
    assert matcher.regex is not None
    text = (unit * MAX_VALUE_CHARS)[: matcher.max_chars]
    started = time.perf_counter()
    matcher.check(text)
    assert time.perf_counter() - started < 0.5


def test_too_long_text_is_undecided_unless_a_match_was_found_well_inside() -> None:
    megabyte = "a" * 1_000_000
    started = time.perf_counter()
    assert compile_matcher("/^abc/").check("abc" + megabyte) is True
    assert compile_matcher("/drop/i").check("DROP " + megabyte) is True
    assert compile_matcher("/xyz$/").check(megabyte + "xyz") is None
    assert compile_matcher("/drop/").check(megabyte + "drop") is None  # padding cannot hide it
    assert compile_matcher("/^[a-z]+$/").check(megabyte) is None
    assert compile_matcher("/a.*b.*c/").check("ab" * 500_000) is None
    # A lookahead may look past the cut, so even an early match proves nothing.
    assert compile_matcher("/(?=a)a/").check(megabyte) is None
    assert compile_matcher("*").check(megabyte) is None
    assert time.perf_counter() - started < 0.5
