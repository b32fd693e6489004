"""The readable text of an HTML page: its title and the text a browser would show, nothing else.

Error pages from proxies, CDNs and frameworks are whole HTML documents whose first kilobytes are
markup, inline CSS and scripts; the sentence that says what happened ("Sorry, you have been blocked")
comes after them. Quoting the page's start hands an agent style sheets. ``readable_text`` keeps the
title and the visible text, in order, one space between runs; scripts, styles and templates go.
"""

from __future__ import annotations

from html.parser import HTMLParser
from typing import Final, NamedTuple

__all__ = ["CodeParts", "code_parts", "looks_like_html", "readable_text"]

_HIDDEN: Final = frozenset({"script", "style", "noscript", "template", "svg", "math", "iframe", "object"})
"""Elements whose content a reader never sees as text."""
_VOID: Final = frozenset(
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source", "track", "wbr"}
)
_HTML_TYPES: Final = frozenset({"text/html", "application/xhtml+xml"})
_HTML_STARTS: Final = ("<!doctype html", "<html", "<head", "<body")


def looks_like_html(text: str, media_type: str = "") -> bool:
    """Whether ``text`` is an HTML document: labelled so, or, unlabelled or mislabelled, opening like one."""
    if media_type in _HTML_TYPES:
        return True
    return text.lstrip()[:20].lower().startswith(_HTML_STARTS)


def readable_text(html: str) -> str:
    """``html``'s title, then its visible text (``"Title: text …"`` when they differ), whitespace
    collapsed; ``""`` for a page with no text."""
    reader = _Reader()
    try:
        reader.feed(html)
        reader.close()
    except (AssertionError, ValueError):  # html.parser is lenient, but not about everything it is fed
        pass
    title = " ".join("".join(reader.title).split())
    body = " ".join("".join(reader.text).split())
    if not title or body.startswith(title):
        return body or title
    return f"{title}: {body}" if body else title


class _Reader(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.title: list[str] = []
        self.text: list[str] = []
        self._hidden = 0
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _HIDDEN:
            self._hidden += 1
        elif tag == "title":
            self._in_title = True
        elif tag not in _VOID or tag == "br":
            self.text.append(" ")  # a new element is a new run of text (<td>a</td><td>b</td> is "a b")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.text.append(" ")

    def handle_endtag(self, tag: str) -> None:
        if tag in _HIDDEN:
            self._hidden = max(0, self._hidden - 1)
        elif tag == "title":
            self._in_title = False
        else:
            self.text.append(" ")

    def handle_data(self, data: str) -> None:
        if self._hidden:
            return
        (self.title if self._in_title else self.text).append(data)


class CodeParts(NamedTuple):
    """What a framework's debug page (Werkzeug's, Django's) shows of code: its text areas (the
    copy-and-paste traceback) and the lines of its ``<pre>`` elements outside tables (the frames'
    source; the tables hold local variables, settings and request headers, which are values, not code)."""

    text_areas: list[str]
    code_lines: list[str]


def code_parts(html: str) -> CodeParts:
    """``html``'s text areas and its code lines (``CodeParts``), as written there, character references undone."""
    reader = _CodeReader()
    try:
        reader.feed(html)
        reader.close()
    except (AssertionError, ValueError):
        pass
    lines = [line for block in reader.pres for line in "".join(block).split("\n")]
    return CodeParts(["".join(area) for area in reader.areas], lines)


class _CodeReader(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.areas: list[list[str]] = []
        self.pres: list[list[str]] = []
        self._tables = 0
        self._in: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self._tables += 1
        elif tag == "textarea":
            self._in = "textarea"
            self.areas.append([])
        elif tag == "pre" and not self._tables and self._in is None:
            self._in = "pre"
            self.pres.append([])

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._tables = max(0, self._tables - 1)
        elif tag == self._in:
            self._in = None

    def handle_data(self, data: str) -> None:
        if self._in == "textarea":
            self.areas[-1].append(data)
        elif self._in == "pre":
            self.pres[-1].append(data)
