"""Words that read as another word, found in what a human is asked to approve so the page, the overview
and the terminal can say so: letters of two alphabets in one word (``аpple.com`` with a Cyrillic "а";
``ΤОР``, a Greek "Τ" before Cyrillic "О" and "Р"), and letters or digits in a compatibility form that
is a plain one in another typeface (full-width ``ａｄｍｉｎ``, mathematical bold ``𝐚𝐝𝐦𝐢𝐧``, ``１０００``).
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter

__all__ = ["MAX_LOOKALIKES", "lookalikes"]

_WORD = re.compile(r"[^\s\"'<>()\[\]{},;]+")
MAX_LOOKALIKES = 5
_NAMED = 3
"""Letters named per word."""

_ONE_WRITING: dict[str, str] = dict.fromkeys(
    ("CJK", "HIRAGANA", "KATAKANA", "KATAKANA-HIRAGANA", "HANGUL", "IDEOGRAPHIC"), "HAN"
)
"""Scripts one language writes together (Japanese mixes kanji and kana in a word; Korean, hangul and hanja)."""


def lookalikes(text: str) -> tuple[str, ...]:
    """The words of ``text`` that mix alphabets or hold a disguised letter or digit, each shown with the
    letters that make it so named (at most ``MAX_LOOKALIKES`` words)."""
    found: list[str] = []
    for word in dict.fromkeys(_WORD.findall(text)):
        if word.isascii():
            continue
        letters = [char for char in word if char.isalpha()]
        scripts = Counter(_script(char) for char in letters)
        disguised = [char for char in word if _disguised(char)]
        if len(scripts) < 2 and not disguised:
            continue
        # Latin is what the rest pass for; otherwise the word's most common alphabet.
        usual = "LATIN" if "LATIN" in scripts else scripts.most_common(1)[0][0] if scripts else ""
        odd = dict.fromkeys([*disguised, *(char for char in letters if _script(char) != usual)])
        named = ", ".join(f"{c} is {unicodedata.name(c, f'U+{ord(c):04X}')}" for c in list(odd)[:_NAMED])
        found.append(f"{word} ({named})")
        if len(found) == MAX_LOOKALIKES:
            break
    return tuple(found)


def _script(char: str) -> str:
    """The alphabet a letter belongs to, as the first word of its Unicode name (LATIN, CYRILLIC, GREEK...),
    read from its plain form (a full-width "ａ" is Latin)."""
    plain = unicodedata.normalize("NFKC", char)[:1] or char
    script = unicodedata.name(plain, "UNKNOWN").split(" ", 1)[0]
    return _ONE_WRITING.get(script, script)


_DISGUISES = ("<wide>", "<font>")
"""Compatibility forms that are a plain letter or digit in another typeface (full-width, mathematical);
a superscript "²" or a ligature "ﬁ" does not pass for the plain one."""


def _disguised(char: str) -> bool:
    """A full-width or mathematical form of an ASCII letter or digit."""
    if char.isascii() or not char.isalnum() or not unicodedata.decomposition(char).startswith(_DISGUISES):
        return False
    plain = unicodedata.normalize("NFKC", char)
    return plain.isascii() and plain.isalnum()
