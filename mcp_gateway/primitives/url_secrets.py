"""Secrets a URL may carry, and the URL as a person or an agent may be shown it.

An operator may write a credential into a URL: a password in its userinfo
(``https://user:pw@host/spec.json``, ``postgresql://gw:pw@db/x``) or a token in its query
(``?access_token=…``, ``?api_key=…``). Every message that quotes such a URL (a terminal line, a log
record, a connector's error the agent reads) quotes ``shown_url`` of it, or ``redact_url`` for a
database URL.
"""

from __future__ import annotations

import re
from functools import lru_cache
from itertools import pairwise
from urllib.parse import unquote_plus, urlsplit, urlunsplit

from .redaction import REDACTED

__all__ = [
    "KEYWORD_SECRET",
    "QUERY_SECRET",
    "redact_url",
    "secret_name",
    "secret_query_name",
    "shown_url",
    "userinfo_span",
]

# Words that, as part of a name, mark its value as a credential. Matched on the name's words (snake,
# kebab and camel case split), so ``access_token`` is hidden but ``max_tokens`` is not.
_SECRET_WORDS = frozenset(
    {
        "password",
        "passwd",
        "passphrase",
        "pwd",
        "secret",
        "token",
        "apikey",
        "authorization",
        "auth",
        "credential",
        "credentials",
        "cookie",
        "signature",
    }
)
_SECRET_PAIRS = frozenset({("api", "key"), ("private", "key"), ("access", "key"), ("secret", "key"), ("client", "key")})
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")


# A URL's query carries credentials under names too short or plain to mark an argument as one: Google
# APIs take ``?key=``, Azure Functions ``?code=``, an Azure SAS URL ``&sig=``, signed URLs and many
# APIs a ``session`` or a ``jwt``. Hiding a harmless value there costs little: the URL stays recognizable.
_QUERY_SECRET_NAMES = frozenset({"key", "sig", "code", "sid", "ticket", "otp", "jwt", "sas", "hmac"})
_QUERY_SECRET_WORDS = frozenset({"session", "sessionid", "jwt", "sig", "sas", "hmac"})


# Cached: every call's arguments are checked for its audit row, and argument names repeat.
@lru_cache(maxsize=4096)
def secret_name(name: str) -> bool:
    """Whether a value under ``name`` (an argument, a query parameter) is shown as ``[redacted]``."""
    words = [w.lower() for w in _WORD.findall(name)]
    if any(w in _SECRET_WORDS for w in words):
        return True
    return any(pair in _SECRET_PAIRS for pair in pairwise(words))


@lru_cache(maxsize=1024)
def secret_query_name(name: str) -> bool:
    """Whether a URL's query parameter ``name`` carries a credential: ``secret_name``'s, and names
    that say so only in a URL (``key``, ``sig``, ``code``, ``session``, a ``subscription-key`` or any
    other name ending in ``key``)."""
    if secret_name(name) or name.strip().lower() in _QUERY_SECRET_NAMES:
        return True
    words = [w.lower() for w in _WORD.findall(name)]
    return bool(words) and (words[-1] == "key" or any(w in _QUERY_SECRET_WORDS for w in words))


def redact_url(url: str) -> str:
    """The URL with any password (in the userinfo, a ``password=`` parameter, or a libpq keyword
    string's ``password=``) replaced by ``***``.

    The userinfo is read as libpq and people write it, not as ``urlsplit`` would: up to the last ``@``,
    so a password holding an unescaped ``/``, ``?`` or ``#`` is still all hidden."""
    text = url.strip()
    userinfo = userinfo_span(text)
    if userinfo is not None:
        start, end = userinfo
        user = text[start:end].partition(":")[0]
        hidden = f"{user}:***" if ":" in text[start:end] else user
        text = text[:start] + hidden + text[end:]
    text = QUERY_SECRET.sub(lambda m: m.group(1) + "***", text)
    return KEYWORD_SECRET.sub(lambda m: m.group(1) + "***", text) if "://" not in text else text


QUERY_SECRET = re.compile(r"(?i)([?&](?:ssl)?password=)[^&#]*")
KEYWORD_SECRET = re.compile(r"(?i)(\b(?:ssl)?password\s*=\s*)('(?:[^'\\]|\\.)*'|\S*)")
"""A libpq keyword string's password (``host=db password='a b' dbname=x``), quoted or not."""


def shown_url(url: str) -> str:
    """``url`` with its password as ``***`` (``redact_url``) and the value of every query parameter
    under a credential-like name (``access_token``, ``api_key``, ``key``, ``sig``: ``secret_query_name``)
    as ``[redacted]``; its fragment left
    out. The rest is kept as written, so the operator recognizes the URL."""
    try:
        parts = urlsplit(redact_url(url))
    except ValueError:
        return "(a URL that cannot be parsed)"
    shown: list[str] = []
    for pair in parts.query.split("&") if parts.query else []:
        name, eq, _value = pair.partition("=")
        shown.append(f"{name}={REDACTED}" if eq and secret_query_name(unquote_plus(name)) else pair)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "&".join(shown), ""))


def userinfo_span(text: str) -> tuple[int, int] | None:
    """Where the userinfo of URL ``text`` starts and ends (before its last ``@``), if it has one."""
    scheme_end = text.find("://")
    if scheme_end < 0:
        return None
    start = scheme_end + 3
    at = text.rfind("@", start)
    if at >= 0 and "=" in text[start:at].partition("?")[2]:
        # That "@" is a query parameter's (?application_name=a@b): the userinfo ends before the first "/".
        slash = text.find("/", start)
        at = text.find("@", start, slash if slash >= 0 else len(text))
    return (start, at) if at >= 0 else None
