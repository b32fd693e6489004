"""readable_text keeps what a browser shows of a page: its title and visible text, never markup, styles or scripts."""

from __future__ import annotations

import pytest

from mcp_gateway.primitives.html_text import looks_like_html, readable_text


def test_title_and_visible_text_without_scripts_styles_or_comments() -> None:
    page = (
        "<!doctype html><html><head><title>Blocked</title><style>p{color:red}</style>"
        "<script>var token = 'x';</script></head><body><noscript>enable js</noscript>"
        "<p>You&nbsp;are&#32;blocked &amp; logged</p><!-- hidden --><table><tr><td>a</td><td>b</td></tr></table>"
        "<svg><text>icon</text></svg>line<br>break</body></html>"
    )
    assert readable_text(page) == "Blocked: You are blocked & logged a b line break"


def test_a_title_the_body_repeats_is_said_once_and_a_page_without_text_is_empty() -> None:
    assert readable_text("<title>404 Not Found</title><h1>404 Not Found</h1><p>nginx</p>") == "404 Not Found nginx"
    assert readable_text("<title>Only a title</title>") == "Only a title"
    assert readable_text("<html><head><style>x{}</style></head><body></body></html>") == ""


def test_broken_markup_is_still_read() -> None:
    assert readable_text("<div><p>unclosed <b>bold <script>never closed") == "unclosed bold"
    assert readable_text("<p>a < b and c > d</p>") == "a < b and c > d"


@pytest.mark.parametrize(
    ("text", "media", "html"),
    [
        ("<p>x</p>", "text/html", True),
        ("  <!DOCTYPE html><html>", "", True),
        ("<html><body>x</body></html>", "text/plain", True),
        ("a < b", "text/plain", False),
        ("<error>xml</error>", "application/xml", False),
    ],
)
def test_what_looks_like_html(text: str, media: str, html: bool) -> None:
    assert looks_like_html(text, media) is html
