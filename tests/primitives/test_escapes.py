"""Visible escapes for text shown on a terminal or in a log line: what an agent or an upstream
chose can neither drive the terminal nor hide, reorder or forge what the operator reads."""

from __future__ import annotations

import json
import unicodedata

import pytest

from mcp_gateway.primitives.escapes import escaped, escaped_json

HOSTILE = "tool\x1b]0;pwned\x07\x1b[2J\x1b]52;c;ZXZpbA==\x07\x9b31m\x9d0;t\x9c\x7f\u202e0001\u202c\u2066x\u2069"
HIDDEN = "a\u200bb\u200dc\ufeffd" + "".join(chr(0xE0000 + ord(c)) for c in "run rm") + "\U000e007f"


def dangerous(text: str) -> list[str]:
    """Characters a terminal acts on or shows as nothing: controls (Cc), format characters (Cf:
    bidi, zero-width, tags), separators of lines and paragraphs, lone surrogates."""
    return [c for c in text if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp", "Cs")]


def test_controls_escapes_and_invisible_characters_become_visible_escapes() -> None:
    shown = escaped(HOSTILE)
    assert dangerous(shown) == []
    assert shown == (
        "tool\\x1b]0;pwned\\x07\\x1b[2J\\x1b]52;c;ZXZpbA==\\x07\\x9b31m\\x9d0;t\\x9c\\x7f"
        "\\u202e0001\\u202c\\u2066x\\u2069"
    )
    hidden = escaped(HIDDEN)
    assert dangerous(hidden) == []
    assert hidden.startswith("a\\u200bb\\u200dc\\ufeffd\\U000e0072\\U000e0075\\U000e006e")


def test_every_character_a_terminal_acts_on_or_shows_as_nothing_is_escaped() -> None:
    # All of Unicode this Python knows: a list of ranges misses the rare ones (the Arabic number signs
    # U+0600-0605, the Egyptian hieroglyph and shorthand format controls).
    everything = "".join(chr(c) for c in range(0x110000) if unicodedata.category(chr(c)) in ("Cc", "Cf", "Zl", "Zp"))
    assert dangerous(escaped(everything)) == []
    written = escaped_json(json.dumps(everything, ensure_ascii=False))
    assert dangerous(written) == [] and json.loads(written) == everything


def test_a_cell_is_one_line_and_a_block_keeps_its_lines() -> None:
    assert escaped("row\r\nforged\tcell\u2028x") == "row\\r\\nforged\\tcell\\u2028x"
    assert escaped("line one\n\tline two\x1b[2K\r", lines=True) == "line one\n\tline two\\x1b[2K\\r"


@pytest.mark.parametrize("text", ["plain ascii", "café — naïve ✓ 日本語", "C:\\path\\x1b is text", ""])
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert escaped(text) == text
    assert escaped(text, lines=True) == text


def test_a_lone_surrogate_becomes_writable() -> None:
    shown = escaped("bad \udce9 byte")
    assert shown == "bad \\udce9 byte"
    shown.encode("utf-8")  # would raise on the raw surrogate


def test_json_text_keeps_its_value_and_loses_every_raw_dangerous_character() -> None:
    data = {"tool": HOSTILE, "hidden": HIDDEN, HOSTILE: ["\udce9", "plain — ✓"]}
    raw = json.dumps(data, indent=2, ensure_ascii=False)
    assert dangerous(raw.replace("\n", "")) != []  # json.dumps leaves C1, DEL, bidi and tags raw
    safe = escaped_json(raw)
    assert dangerous(safe.replace("\n", "")) == []  # the indentation's newlines are all that is left
    assert json.loads(safe) == json.loads(raw)
    assert "plain — ✓" in safe  # readable text stays as it is
