"""A text in Unicode's composed form (NFC), and where each of its characters came from.

An upstream may echo a secret with some letters composed and others decomposed (``pä`` as one code
point each, then ``o`` and a combining diaeresis): it reads as the secret, yet it is neither the
secret's NFC nor its NFD spelling. Composed, such a text holds the secret's NFC form; a span found
there is mapped back here to the original text's characters, which normalizing made fewer (or more).
"""

from __future__ import annotations

import unicodedata

__all__ = ["composed"]


def composed(s: str) -> tuple[str, list[tuple[int, int]]] | None:
    """``s`` in NFC, and for each of its characters the span of ``s`` it came from; None when ``s`` is
    in NFC already (the common case, one check in C).

    ``s`` is cut into clusters: each character that is no combining mark and does not compose with the
    cluster before it (as a Hangul vowel does with its consonant) starts one. Each cluster is normalized
    on its own, so every character of the result comes from one cluster."""
    if s.isascii() or unicodedata.is_normalized("NFC", s):
        return None
    clusters: list[tuple[int, int]] = []
    start = 0
    for at in range(1, len(s) + 1):
        if at == len(s) or _starts_cluster(s[start:at], s[at]):
            clusters.append((start, at))
            start = at
    chars: list[str] = []
    spans: list[tuple[int, int]] = []
    for begin, end in clusters:
        part = unicodedata.normalize("NFC", s[begin:end])
        chars.append(part)
        spans.extend([(begin, end)] * len(part))
    return "".join(chars), spans


def _starts_cluster(before: str, char: str) -> bool:
    if unicodedata.combining(char):
        return False
    if char.isascii() and before.isascii():
        return True
    # A starter that composes with the cluster before it (Hangul jamo, some Indic vowel signs) joins it.
    apart = len(unicodedata.normalize("NFC", before)) + len(unicodedata.normalize("NFC", char))
    return len(unicodedata.normalize("NFC", before + char)) == apart
