"""The base of the links humans open (``public_url``), checked alike wherever it is given: the
manifest's ``public_url`` and ``serve`` / ``pages --public-url``. A value with its scheme forgotten
(``127.0.0.1:8765``) would mint links that are no URLs, and ``pages`` would listen on port 80. One
with a user or password (``https://u:pw@host/``) is refused too: every link handed to an agent or a
human would carry it."""

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
    if parts.username is not None or parts.password is not None:
        # A lone user name may be the secret (``https://TOKEN@host/``): none of it is quoted back.
        hidden = shown_url(parts._replace(netloc="***@" + parts.netloc.rpartition("@")[2]).geturl())
        return (
            f"{hidden!r} holds a user name or password, which every link handed to agents and humans would carry;"
            " drop the 'user:password@' part (put any login the pages need in front of them, not in their links)"
        )
    return None
