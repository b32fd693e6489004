"""Words that read as another word: letters of two alphabets in one word (``аpple.com`` with a Cyrillic
"а"), found in what a human is asked to approve so the page, the overview and the terminal can say so.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["MAX_LOOKALIKES", "lookalikes"]

_WORD = re.compile(r"[^\s\"'<>()\[\]{},;]+")
MAX_LOOKALIKES = 5


def lookalikes(text: str) -> tuple[str, ...]:
    """The words of ``text`` whose letters are of two alphabets or more, Latin among them (a host name
    spelled with a Cyrillic "а": ``аpple.com``), each shown with its letters that are not Latin named
    (at most ``MAX_LOOKALIKES``)."""
    found: list[str] = []
    for word in dict.fromkeys(_WORD.findall(text)):
        scripts = {_script(char): char for char in word if char.isalpha()}
        if len(scripts) > 1 and "LATIN" in scripts:
            others = dict.fromkeys(c for c in word if c.isalpha() and _script(c) != "LATIN")
            named = ", ".join(f"{c} is {unicodedata.name(c, f'U+{ord(c):04X}')}" for c in list(others)[:3])
            found.append(f"{word} ({named})")
            if len(found) == MAX_LOOKALIKES:
                break
    return tuple(found)


def _script(char: str) -> str:
    """The alphabet a letter belongs to, as the first word of its Unicode name (LATIN, CYRILLIC, GREEK...)."""
    return unicodedata.name(char, "UNKNOWN").split(" ", 1)[0]
