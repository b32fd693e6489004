"""Database URLs: which store one selects, and how to show it without its password.

A PostgreSQL URL (``postgresql://user:password@host:5432/db?sslmode=require``) may carry a
password in its userinfo or as a ``password=`` parameter. It is read from the environment or
the command line once and handed to the store; anything shown to a person (an error, a log line,
a repr) goes through ``redact_url`` first, and driver messages through ``scrub``.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

__all__ = ["POSTGRES_SCHEMES", "is_postgres_url", "redact_url", "scrub"]

POSTGRES_SCHEMES = ("postgresql", "postgres")
_SECRET_PARAMS = frozenset({"password", "sslpassword"})


def is_postgres_url(url: str) -> bool:
    try:
        return urlsplit(url.strip()).scheme.lower() in POSTGRES_SCHEMES
    except ValueError:
        return False


def redact_url(url: str) -> str:
    """The URL with any password (in the userinfo or a ``password=`` parameter) replaced by ``***``."""
    try:
        parts = urlsplit(url.strip())
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, _, hosts = netloc.rpartition("@")
            user, sep, _password = userinfo.partition(":")
            netloc = f"{user}{':***' if sep else ''}@{hosts}"
        pairs = parse_qsl(parts.query, keep_blank_values=True)
        query = urlencode([(k, "***" if k.lower() in _SECRET_PARAMS else v) for k, v in pairs], safe="*")
        return urlunsplit((parts.scheme, netloc, parts.path, query, ""))
    except ValueError:
        return "(an unparsable database URL)"


def _secrets(url: str) -> list[str]:
    """Every spelling of a password the URL holds, longest first."""
    found: list[str] = []
    try:
        parts = urlsplit(url.strip())
        userinfo = parts.netloc.rpartition("@")[0]
        if ":" in userinfo:
            found.append(userinfo.partition(":")[2])
        found += [v for k, v in parse_qsl(parts.query) if k.lower() in _SECRET_PARAMS]
    except ValueError:
        pass
    return sorted({s for f in found for s in (f, unquote(f)) if s}, key=len, reverse=True)


def scrub(text: str, url: str) -> str:
    """``text`` (a driver's error message) with every password of ``url`` replaced by ``***``."""
    for secret in _secrets(url):
        text = text.replace(secret, "***")
    return text
