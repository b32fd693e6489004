"""Database URLs: which store one selects, and how to show it without its password.

A PostgreSQL URL (``postgresql://user:password@host:5432/db?sslmode=require``) may carry a
password in its userinfo or as a ``password=`` parameter. It is read from the environment or
the command line once and handed to the store; anything shown to a person (an error, a log line,
a repr) goes through ``redact_url`` first, and driver messages through ``scrub``.
"""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

from ..primitives.url_secrets import KEYWORD_SECRET, QUERY_SECRET, redact_url, userinfo_span

__all__ = ["POSTGRES_SCHEMES", "is_postgres_url", "redact_url", "scrub", "unescaped_userinfo"]

POSTGRES_SCHEMES = ("postgresql", "postgres")


def is_postgres_url(url: str) -> bool:
    try:
        return urlsplit(url.strip()).scheme.lower() in POSTGRES_SCHEMES
    except ValueError:
        return False


def unescaped_userinfo(url: str) -> str | None:
    """What the URL's user or password holds unescaped that a URL parser reads as another part (``/``
    ``?`` ``#`` ``@``), as a sentence saying how to write it; None when nothing does. The driver would
    read part of the password as the host or the port, and quote it in its error."""
    text = url.strip()
    userinfo = userinfo_span(text)
    if userinfo is None:
        return None
    held = sorted({c for c in text[userinfo[0] : userinfo[1]] if c in _ESCAPES})
    if not held:
        return None
    return (
        "the database URL's user or password holds "
        + ", ".join(repr(c) for c in held)
        + " unescaped; write "
        + ", ".join(f"{c} as {_ESCAPES[c]}" for c in held)
        + " (percent-encoding), then try again"
    )


_ESCAPES = {"/": "%2F", "?": "%3F", "#": "%23", "@": "%40"}


def _secrets(url: str) -> list[str]:
    """Every spelling of a password the URL holds, longest first."""
    text = url.strip()
    found: list[str] = []
    userinfo = userinfo_span(text)
    if userinfo is not None and ":" in (info := text[userinfo[0] : userinfo[1]]):
        found.append(info.partition(":")[2])
    found += [m.group(0).partition("=")[2] for m in QUERY_SECRET.finditer(text)]
    if "://" not in text:
        found += [value for m in KEYWORD_SECRET.finditer(text) for value in (m.group(2), m.group(2).strip("'"))]
    return sorted({s for f in found for s in (f, unquote(f)) if s}, key=len, reverse=True)


def scrub(text: str, url: str) -> str:
    """``text`` (a driver's error message) with every password of ``url`` replaced by ``***``."""
    for secret in _secrets(url):
        text = text.replace(secret, "***")
    return text
