"""The base of the links humans open (``public_url``), checked alike wherever it is given: the
manifest's ``public_url`` and ``serve`` / ``pages --public-url``. A value with its scheme forgotten
(``127.0.0.1:8765``) would mint links that are no URLs, and ``pages`` would listen on port 80."""

from __future__ import annotations

from urllib.parse import urlsplit

from .url_secrets import shown_url

__all__ = ["public_url_problem"]


def public_url_problem(value: str) -> str | None:
    """Why ``value`` cannot be the base of links (quoting it with any password hidden), or None."""
    shown = repr(shown_url(value))
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError as exc:  # an unclosed IPv6 bracket, a port out of range or not a number
        return f"{shown} is not a valid URL ({exc})"
    if parts.scheme not in ("http", "https"):
        return f"{shown} is not an http(s) URL"
    if not parts.hostname:
        return f"{shown} names no host"
    if port == 0:
        return f"{shown} names port 0; give the port humans open, from 1 to 65535"
    return None
