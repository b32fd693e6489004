"""``lookalikes``: words that read as another word, named for a human about to approve them."""

from __future__ import annotations

import pytest

from mcp_gateway.primitives.lookalikes import MAX_LOOKALIKES, lookalikes


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("pay https://аpple.com/x", "а is CYRILLIC SMALL LETTER A"),
        ("role ΤОР", "Τ is GREEK CAPITAL LETTER TAU"),  # no Latin letter at all: Greek beside Cyrillic
        ("user 𝐚𝐝𝐦𝐢𝐧", "𝐚 is MATHEMATICAL BOLD SMALL A"),
        ("amount １０００", "１ is FULLWIDTH DIGIT ONE"),
        ("ａｐｐｌｅ", "ａ is FULLWIDTH LATIN SMALL LETTER A"),
    ],
)
def test_a_word_that_passes_for_another_is_named(text: str, named: str) -> None:
    found = lookalikes(text)
    assert len(found) == 1 and named in found[0], found


@pytest.mark.parametrize(
    "text",
    [
        "plain ascii.example",
        "café naïve résumé",
        "Привет мир",
        "Ελληνικά",
        "東京タワー",
        "日本語のテキスト",
        "서울시청",
        "100m²",
        "ﬁle",
    ],
)
def test_words_of_one_writing_are_not(text: str) -> None:
    assert lookalikes(text) == ()


def test_at_most_a_few_words_are_named() -> None:
    assert len(lookalikes(" ".join(f"а{i}pple" for i in range(20)))) == MAX_LOOKALIKES
