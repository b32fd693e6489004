"""Upstream text is untrusted input shown to a model: clean it, and flag what reads as orders.

Tool names, descriptions, titles, schemas, error messages and results come from servers and specs the
operator does not control. Two things can hide in them:

- **Characters a human reviewer never sees**: ANSI escape sequences, C0/C1 controls, zero-width and
  bidirectional controls, variation selectors and the Unicode *tag* block (U+E0000–U+E007F), which
  spells ASCII invisibly ("ASCII smuggling"). ``clean_text`` removes them all; a model then reads
  exactly what the operator's review page shows. Tab, line feed and carriage return are whitespace,
  not hidden text: specs written on Windows end their description lines with ``\r\n``.
- **Instructions aimed at the model** ("tool poisoning"): "ignore previous instructions",
  ``<IMPORTANT>`` blocks, requests to read local files or credentials, to keep something from the
  user, or to call another connector's tools. ``instruction_flags`` names each such finding so the
  action can be held for an operator's review with the reason shown; the text is never silently
  dropped, because the operator must see what the upstream tried.

Everything here is pure and linear in the input (no backtracking-prone patterns on agent-visible
text); it imports nothing from the gateway.
"""

from __future__ import annotations

import html
import re
import unicodedata
from collections.abc import Iterable, Mapping
from functools import cache
from typing import Any, Final

__all__ = [
    "INVISIBLE_RANGES",
    "MAX_DESCRIPTION_CHARS",
    "MAX_ERROR_CHARS",
    "MAX_TITLE_CHARS",
    "clean_json",
    "clean_text",
    "hidden_characters",
    "instruction_flags",
    "one_line_readings",
    "reveal",
    "revealed",
    "right_to_left",
]

MAX_TITLE_CHARS: Final = 200
MAX_DESCRIPTION_CHARS: Final = 4000
MAX_ERROR_CHARS: Final = 2000

# ESC [ … final byte (CSI), ESC ] … BEL or ESC \ (OSC: titles, hyperlinks), and two-byte escapes.
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]|\x9b[0-?]*[ -/]*[@-~]")

INVISIBLE_RANGES: Final = (
    (0x0000, 0x0008),  # C0 controls, keeping \t (09) and \n (0A)
    (0x000B, 0x001F),  # … and dropping \r, \v, \f and the rest
    (0x007F, 0x009F),  # DEL and C1 controls
    (0x00AD, 0x00AD),  # soft hyphen
    (0x034F, 0x034F),  # combining grapheme joiner: no width of its own
    (0x0600, 0x0605),  # Arabic number signs: format characters that join what follows
    (0x061C, 0x061C),  # Arabic letter mark (bidi)
    (0x06DD, 0x06DD),  # Arabic end of ayah
    (0x070F, 0x070F),  # Syriac abbreviation mark
    (0x0890, 0x0891),  # Arabic pound and piastre marks above
    (0x08E2, 0x08E2),  # Arabic disputed end of ayah
    (0x115F, 0x1160),  # Hangul fillers, rendered as nothing
    (0x17B4, 0x17B5),  # Khmer inherent vowels, rendered as nothing
    (0x180B, 0x180F),  # Mongolian free variation selectors and vowel separator
    (0x200B, 0x200F),  # zero-width space/joiners, LRM, RLM
    (0x202A, 0x202E),  # bidi embeddings and overrides
    (0x2060, 0x206F),  # word joiner, invisible operators, bidi isolates, deprecated format chars
    (0x3164, 0x3164),  # Hangul filler
    (0xFE00, 0xFE0F),  # variation selectors (can carry smuggled bytes)
    (0xFEFF, 0xFEFF),  # zero-width no-break space / BOM
    (0xFFA0, 0xFFA0),  # half-width Hangul filler
    (0xFFF9, 0xFFFB),  # interlinear annotation controls
    (0x110BD, 0x110BD),  # Kaithi number sign
    (0x110CD, 0x110CD),  # Kaithi number sign above
    (0x13430, 0x1343F),  # Egyptian hieroglyph format controls
    (0x1BCA0, 0x1BCA3),  # shorthand format controls
    (0x1D173, 0x1D17A),  # musical symbol formatting controls
    (0xE0000, 0xE0FFF),  # tag characters (invisible ASCII), variation selectors supplement, the rest
    # of the block reserved as default-ignorable: whatever is assigned there later renders as nothing
)
"""Characters that hide or rearrange text: removed from what a model reads, escaped on a terminal."""
_INVISIBLE = re.compile("[" + "".join(f"\\U{lo:08x}-\\U{hi:08x}" for lo, hi in INVISIBLE_RANGES) + "]")
_TAGS = re.compile("[\U000e0000-\U000e007f]+")
_SURROGATE = re.compile("[\ud800-\udfff]")


_ASCII_HIDDEN: Final = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
"""The ASCII characters ``_INVISIBLE`` holds, but for the carriage return (ANSI escapes start with one
of them too)."""


def hidden_characters(text: str) -> list[str]:
    """What ``clean_text`` would remove, by kind (for the operator's review), most telling first."""
    if text.isascii() and not _ASCII_HIDDEN.search(text):
        return []  # the common case (a description with line breaks): one pass instead of three
    text = text.replace("\r", "")  # a line ending, which ``clean_text`` turns into ``\n``
    found: list[str] = []
    spelled = _spelled_tags(text)
    if spelled:
        found.append(f"invisible tag characters spelling {spelled[:200]!r}")
    if _ANSI.search(text):
        found.append("ANSI escape sequences")
    rest = _INVISIBLE.findall(_TAGS.sub("", text))
    if rest:
        codes = sorted({f"U+{ord(c):04X}" for c in rest})
        found.append(f"{len(rest)} invisible or control characters ({', '.join(codes[:6])})")
    return found


def _spelled_tags(text: str) -> str:
    """The ASCII the tag block mirrors at U+E0000, i.e. what invisible tag text says."""
    tags = "".join(_TAGS.findall(text))
    return "".join(chr(ord(c) - 0xE0000) for c in tags if 0x20 <= ord(c) - 0xE0000 < 0x7F)


def clean_text(text: str, *, max_chars: int | None = None) -> str:
    """``text`` without ANSI escapes and invisible characters; line breaks and tabs are kept,
    ``\\r\\n`` and a lone ``\\r`` become ``\\n``. With ``max_chars``, longer text is cut and ends
    with ``…``."""
    if text.isascii() and text.isprintable() and (max_chars is None or len(text) <= max_chars):
        return text  # the common case, without a regex pass
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _ANSI.sub("", text)
    text = _INVISIBLE.sub("", text)
    # A lone surrogate (JSON's "\ud800" parses to one) is no character: no encoder writes it, so one
    # left in would fail the answer's serialization, on stdio the whole session's.
    text = _SURROGATE.sub("\ufffd", text)
    if max_chars is not None and len(text) > max_chars:
        text = text[: max(0, max_chars - 1)].rstrip() + "…"
    return text


def clean_json(data: Any, *, max_string_chars: int | None = None) -> Any:
    """``data`` (decoded JSON) with every string, keys included, passed through ``clean_text``."""
    match data:
        case str():
            return clean_text(data, max_chars=max_string_chars)
        case Mapping():
            cleaned = [(str(k), clean_text(str(k)), v) for k, v in data.items()]
            kept = {written for written, key, _ in cleaned if key == written}
            out: dict[str, Any] = {}
            for written, key, v in cleaned:
                if key != written and (key in kept or key in out):
                    # Two keys that differ only by what cleaning takes out ("amount" and "amount\u200b"):
                    # the hidden one keeps its spelling, as visible escapes, rather than overwrite the other.
                    from .escapes import escaped  # here: escapes imports this module

                    key = escaped(written)
                out[key] = clean_json(v, max_string_chars=max_string_chars)
            return out
        case list() | tuple():
            return [clean_json(v, max_string_chars=max_string_chars) for v in data]
        case _:
            return data


# Phrases that address the model rather than describe an API. Each is a plain alternation over a
# bounded gap, so matching stays linear on hostile input.
_GAP = r"[^.\n]{0,40}?"


@cache
def _flags() -> tuple[tuple[str, re.Pattern[str]], ...]:
    """The phrases, compiled on first use: only a review scans for them, and every start imports this module."""
    return (
        (
            "asks the model to ignore its instructions",
            re.compile(
                rf"\b(ignore|disregard|forget|override)\b{_GAP}\b(previous|prior|above|earlier|all|any|system|other)\b"
                rf"{_GAP}\b(instructions?|prompts?|rules|directions|guidelines|context)\b",
                re.I,
            ),
        ),
        (
            "contains a hidden-priority tag such as <IMPORTANT>",
            re.compile(r"<\s*/?\s*(important|system|instructions?|secret|hidden|admin|prompt)\b[^>]{0,40}>", re.I),
        ),
        (
            "asks to read local files or keys",
            re.compile(
                r"(~/\.(ssh|aws|config|netrc|gnupg|kube|docker)|\bid_(rsa|ed25519|ecdsa)\b|/etc/(passwd|shadow)"
                r"|\.env\b|\bmcp\.json\b|claude_desktop_config|\.cursor/)",
                re.I,
            ),
        ),
        (
            "asks for credentials or secrets",
            re.compile(
                rf"\b(read|send|include|pass|provide|give|share|upload|post|leak|exfiltrate|append|attach|reveal)\b"
                rf"{_GAP}\b(api[ _-]?keys?|tokens?|passwords?|secrets?|credentials?|private keys?|session cookies?)\b",
                re.I,
            ),
        ),
        (
            "asks to hide something from the user",
            re.compile(
                rf"\b(do not|don't|never|without)\b{_GAP}\b(tell|telling|inform|informing|mention|mentioning|show|"
                rf"showing|notify|notifying|alert|alerting)\b{_GAP}\b(the )?(user|human|operator)\b",
                re.I,
            ),
        ),
        (
            "addresses the model directly",
            re.compile(
                r"\b(you are now|as an ai|system prompt|assistant must|the assistant should|before using this tool"
                r"|before (calling|using) any other tool|instead of (calling|using) the)\b",
                re.I,
            ),
        ),
    )


def instruction_flags(text: str, *, other_tools: Iterable[str] = (), one_line: bool = False) -> list[str]:
    """Why ``text`` looks like instructions aimed at the model rather than a description; empty
    when it does not. ``other_tools`` are names of other connectors' actions (qualified or bare):
    a description that mentions one is trying to steer calls elsewhere. ``one_line``: ``text`` is
    shown as one line (an upstream's error), so it is judged as a model reads it there too
    (``one_line_readings``), not line by line.
    """
    flags = [f"hides text: {found}" for found in hidden_characters(text)]
    # Judge what the tag block spells as well as what is visible: hidden orders are still orders. And
    # as a reader sees it: full-width or Cyrillic look-alike letters, words joined by underscores (a
    # parameter named ignore_previous_instructions) read as the plain words.
    plain = clean_text(text) + "\n" + _spelled_tags(text)
    readings = [_as_read(plain)]
    if one_line:
        readings += [_as_read(reading) for reading in one_line_readings(text)]
    flags += [reason for reason, pattern in _flags() if any(pattern.search(seen) for seen in readings)]
    lowered = plain.lower()
    mentioned = sorted({name for name in other_tools if len(name) >= 4 and _mentions(lowered, name.lower())})
    if mentioned:
        flags.append(f"mentions other connectors' tools: {', '.join(mentioned[:5])}")
    return flags


_MARKUP: Final = re.compile(r"<[^<>]{0,200}>")
"""An HTML or XML tag, which a model reads past."""


def one_line_readings(text: str) -> tuple[str, str, str]:
    """``text`` as a model reads it once it is shown on one line: every run of whitespace (line
    breaks included) one space; invisible characters taken out (``ig\u200bnore`` is ``ignore``) and,
    read again, as spaces (``ignore\u200bprevious``); entities decoded and tags read past
    (``ignore<br/>previous``). Each a separate reading: the phrases are looked for in all of them."""
    joined = " ".join(clean_text(text).split())
    apart = " ".join(_INVISIBLE.sub(" ", html.unescape(text)).split())
    return joined, apart, " ".join(_MARKUP.sub(" ", apart).split())


_LOOKALIKES: Final = str.maketrans(
    "аеорсухіјѕԁӏАВЕНКМОРСТХІЈЅαεορτυνκΑΒΕΗΙΚΜΝΟΡΤΥΧ",
    "aeopcyxijsdlABEHKMOPCTXIJSaeoptuvkABEHIKMNOPTYX",
)
"""Cyrillic and Greek letters drawn like Latin ones, as Latin."""


def _as_read(text: str) -> str:
    return unicodedata.normalize("NFKC", text).translate(_LOOKALIKES).replace("_", " ")


def _mentions(text: str, name: str) -> bool:
    start = text.find(name)
    while start != -1:
        end = start + len(name)
        before = text[start - 1] if start else " "
        after = text[end] if end < len(text) else " "
        if not (before.isalnum() or before == "_") and not (after.isalnum() or after == "_"):
            return True
        start = text.find(name, start + 1)
    return False


# What a human must not be shown raw on a page where they decide: everything ``clean_text`` removes,
# the other format characters (Unicode category Cf) and the characters that break or overwrite a
# line without looking like a break (CR, the Unicode line and paragraph separators).
_OTHER_FORMAT: Final = ((0x0600, 0x0605), (0x06DD, 0x06DD), (0x070F, 0x070F), (0x0890, 0x0891), (0x08E2, 0x08E2))
_MORE_FORMAT: Final = ((0x110BD, 0x110BD), (0x110CD, 0x110CD), (0x13430, 0x1343F), (0x1BCA0, 0x1BCA3))
_BLANK: Final = ((0x2800, 0x2800), (0xFFFC, 0xFFFC), (0x1D159, 0x1D159))
"""Characters drawn as nothing or as a bare space although they are none: the braille blank (a value
of one looks empty), the object replacement character, the musical null notehead."""
_OVERLAID: Final = (
    (0x0334, 0x0338),
    (0x0488, 0x0489),
    (0x1ABE, 0x1ABE),
    (0x1CD4, 0x1CD4),
    (0x1CE2, 0x1CE8),
    (0x20D2, 0x20D3),
    (0x20D8, 0x20DA),
    (0x20DD, 0x20E0),
    (0x20E2, 0x20E6),
    (0x20EA, 0x20EB),
    (0xA670, 0xA672),
    (0x10A39, 0x10A39),
    (0x16AF0, 0x16AF4),
    (0x1BC9E, 0x1BC9E),
    (0x1D167, 0x1D169),
)
"""Combining marks drawn over or around their neighbours rather than beside them: the overlays
(combining class 1: ``inv̸oice`` strikes a letter through) and the enclosing marks (a circle, a
keycap drawn around what precedes them)."""
_REVEALED = re.compile(
    "(["
    + "".join(
        f"\\U{lo:08x}-\\U{hi:08x}" for lo, hi in (*INVISIBLE_RANGES, *_OTHER_FORMAT, *_MORE_FORMAT, *_BLANK, *_OVERLAID)
    )
    + "\\r\\u2028\\u2029])"
)
MAX_STACKED_MARKS: Final = 4
"""More combining marks on one letter than any writing system stacks (Vietnamese two, pointed Hebrew
and Tibetan up to four): a taller stack spills over the lines around it, so it is shown as codes."""
_NON_ASCII_STRETCH = re.compile(f"[^\\x00-\\x7f]{{{MAX_STACKED_MARKS + 1},}}")


def reveal(text: str) -> list[tuple[str, bool]]:
    """``text`` as runs of what shows as itself (False) and of characters spelled as escapes,
    ``\\u202e`` (True): hidden or direction-changing ones, blank-looking ones (U+2800), marks drawn
    over their neighbours, and stacks of more than ``MAX_STACKED_MARKS`` combining marks. A page shows
    the second kind marked, so "\\u202e0001" cannot pass for "1000", nor "\\u2800" for nothing. The
    one rule for the approval page, the operator's overview and ``approvals show`` (``revealed``)."""
    if text.isascii() and text.isprintable():
        return [(text, False)] if text else []
    runs: list[tuple[str, bool]] = []
    for i, part in enumerate(_REVEALED.split(text)):
        if not part:
            continue
        if i % 2:
            runs.append((_code(part), True))
        else:
            runs.extend(_stacks_revealed(part))
    return runs


def revealed(text: str) -> str:
    """``text`` as ``reveal`` spells it, in one piece: for a terminal, where nothing can be marked."""
    return "".join(piece for piece, _ in reveal(text))


def _code(char: str) -> str:
    code = ord(char)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def _stacks_revealed(text: str) -> list[tuple[str, bool]]:
    """``text`` with each stack of more than ``MAX_STACKED_MARKS`` combining marks as codes. Only
    stretches of that many characters beyond ASCII are looked at one by one (they must hold any such stack)."""
    runs: list[tuple[str, bool]] = []
    done = 0
    for stretch in _NON_ASCII_STRETCH.finditer(text):
        start = stretch.start()
        while start < stretch.end():
            end = start
            while end < stretch.end() and unicodedata.category(text[end]) in ("Mn", "Me"):
                end += 1
            if end - start > MAX_STACKED_MARKS:
                if start > done:
                    runs.append((text[done:start], False))
                runs.append(("".join(_code(char) for char in text[start:end]), True))
                done = end
            start = end + 1
    if done < len(text):
        runs.append((text[done:], False))
    return runs


def right_to_left(text: str) -> bool:
    """Whether ``text`` holds a right-to-left letter (Hebrew, Arabic, Syriac, Thaana, N'Ko …): shown by
    the bidi algorithm, it turns the digits and punctuation after it around (``"א 5, 5000"`` reads
    ``"5000 ,5 א"``). The pages show such text in the order it was written, and say so."""
    if text.isascii():
        return False
    return any(unicodedata.bidirectional(char) in ("R", "AL") for char in text if ord(char) >= 0x0590)
