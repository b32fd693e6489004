from __future__ import annotations

import unicodedata

from mcp_gateway.primitives.composed import composed


def test_a_text_in_nfc_needs_no_map() -> None:
    assert composed("plain ascii") is None
    assert composed(unicodedata.normalize("NFC", "päßwörd 한국")) is None


def test_each_composed_character_maps_to_the_characters_it_came_from() -> None:
    # ä decomposed, then o with two marks: composed with the one below (ọ), the other kept beside it
    s = "xa\u0308yo\u0308\u0323z"
    found = composed(s)
    assert found is not None
    text, spans = found
    assert text == unicodedata.normalize("NFC", s)
    assert len(spans) == len(text)
    assert [s[a:b] for a, b in spans] == ["x", "a\u0308", "y", "o\u0308\u0323", "o\u0308\u0323", "z"]


def test_hangul_jamo_compose_across_starters() -> None:
    s = "k\u1100\u1161\u11a8!"  # ㄱ ㅏ ㄱ as jamo: one syllable composed
    found = composed(s)
    assert found is not None
    text, spans = found
    assert text == unicodedata.normalize("NFC", s) == "k\uac01!"
    assert spans == [(0, 1), (1, 4), (4, 5)]
