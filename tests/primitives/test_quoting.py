"""``quoted`` and ``long_words_cut``: a long name is quoted by its start and its length."""

from __future__ import annotations

from mcp_gateway.primitives.quoting import LONG_QUOTE, long_words_cut, quoted


def test_a_short_name_is_quoted_whole() -> None:
    assert quoted("api.items.get") == "'api.items.get'"
    assert quoted("x" * LONG_QUOTE) == repr("x" * LONG_QUOTE)


def test_a_long_name_is_quoted_by_its_start_and_length() -> None:
    shown = quoted("a" * 100_000)
    assert shown == f"{'a' * 60!r}… (100000 characters)"


def test_long_words_are_cut_and_the_sentence_kept() -> None:
    text = f"unknown agent {'b' * 5000} (declare it first)"
    assert long_words_cut(text) == f"unknown agent {'b' * 60}… (5000 characters) (declare it first)"
    assert long_words_cut("short words only") == "short words only"
