"""Text shown on an operator's terminal or in a log line, with every control and invisible character
spelled out as a visible escape (``\\x1b``, ``\\u202e``).

Agents choose tool names and arguments; upstreams choose tool names, descriptions, error messages
and whatever a stdio child prints. Written raw to a terminal, an ESC or C1 sequence clears the
screen, retitles the window, writes the clipboard (OSC 52) or moves the cursor to hide rows; a
newline forges a table row or a log line; bidi overrides reorder what is read ("\\u202e0001" shows
as "1000"); zero-width and tag characters hide text. ``escaped`` keeps the text but makes each of
these visible, so the operator sees what was sent rather than what it does to the terminal.
``sanitize.clean_text`` is the other treatment, for text a model reads: it removes them.

Backslashes are left as they are: paths and patterns stay readable, and a literal ``\\x1b`` in a
name is harmless text either way.
"""

from __future__ import annotations

import re
from typing import Final

from .sanitize import INVISIBLE_RANGES

__all__ = ["escaped", "escaped_json"]

_RANGES: Final = (
    (0x0000, 0x001F),  # every C0 control, TAB and LF included: a table cell or log line shows them escaped
    *INVISIBLE_RANGES,  # what ``sanitize`` removes for a model: DEL, C1, bidi, zero-width, tag characters, …
    (0x2028, 0x2029),  # line and paragraph separators: a terminal may break the line there
    (0xD800, 0xDFFF),  # lone surrogates (undecodable bytes): not even writable as UTF-8
)
_CLASS: Final = "".join(f"\\U{lo:08x}-\\U{hi:08x}" for lo, hi in _RANGES)
_ALL: Final = re.compile(f"[{_CLASS}]")
_BUT_LINES: Final = re.compile(f"[{_CLASS}](?<![\\n\\t])")
_JSON_RAW: Final = re.compile(f"[{_CLASS}](?<![\\x00-\\x1f])")
"""What ``json.dumps(..., ensure_ascii=False)`` leaves raw: it escapes C0 itself, nothing else."""
_ASCII_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]")


_NAMED: Final = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _visible(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def escaped(text: str, *, lines: bool = False) -> str:
    """``text`` with control and invisible characters as visible escapes: one table cell or one log
    line (a newline shown as the two characters ``\\n``), or with ``lines`` a block whose newlines and
    tabs stay (a diff, a multi-line error)."""
    if text.isascii() and not _ASCII_CONTROL.search(text):
        return text  # the common case: one scan in C
    return (_BUT_LINES if lines else _ALL).sub(_visible, text)


def _json_escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000  # JSON spells a character past the BMP as its UTF-16 surrogate pair
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def escaped_json(text: str) -> str:
    """JSON text (from ``json.dumps(..., ensure_ascii=False)``) with the characters it leaves raw
    (DEL, C1, bidi, zero-width, tags) written as ``\\u`` escapes: the same JSON value, safe on a
    terminal. Those characters can only sit inside strings, so the whole text is rewritten at once."""
    if text.isascii() and "\x7f" not in text:
        return text
    return _JSON_RAW.sub(_json_escape, text)
