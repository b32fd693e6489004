"""Secrets the gateway never held, taken out of an upstream's error text by their shape.

An upstream that fails often says more than it should: a stack trace with its database URL, an
environment dump, the headers of a request it made elsewhere. The gateway redacts every credential
it opened for the call (``redaction``); these are someone else's, so only their shape can find them.
The shapes are few and written so that prose never matches them; each becomes ``[redacted]``:

- a PEM private key block, ``-----BEGIN … PRIVATE KEY-----`` to its END line (or the end of the text);
- the userinfo of a URL, ``scheme://user:password@host`` (``jdbc:mysql://app:pw@db``,
  ``https://token@host``): all of it, user included; a password runs to the last ``@`` before
  whitespace, so one holding ``@`` or ``/`` is hidden whole (and with it, rarely, more of the URL);
- the value of a ``name=value`` pair whose name ends in a word that says it is a credential
  (``password=``, ``AWS_SECRET_ACCESS_KEY=``, ``client_secret=``, ``api_key=``, ``access_token=``;
  not ``token_count=``), up to whitespace, ``&``, ``,``, ``;``, a quote or a bracket, or the quoted
  value whole;
- the credential after ``Bearer``, ``Basic`` or ``Token`` when it looks like one: 8 or more token
  characters with a digit or trailing ``=`` (so "Bearer token required" stays as it is).

Not matched, on purpose: ``name: value`` and JSON ``"password": "…"`` (an error names a field and
what is wrong with it that way: "password: must be at least 8 characters").
"""

from __future__ import annotations

import re
from typing import Final

from .redaction import REDACTED

__all__ = ["hide_secret_spans", "hide_userinfo"]

_PEM: Final = re.compile(
    r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z0-9 ]{0,40}PRIVATE KEY-----|\Z)"
)
# A password runs to the last ``@`` before whitespace, as libpq reads one: it may hold an unescaped
# ``@``, ``/`` or ``?``. A userinfo without a password (``https://token@host``) holds none of those.
_USERINFO: Final = re.compile(
    r"(?i)\b([a-z][a-z0-9+.-]{0,30}://)([^\s/?#@:\[\]<>\"']*:[^\s\"'<>]*|[^\s/?#@:\[\]<>\"']+)@(?=[^\s@/])"
)
_PAIR: Final = re.compile(
    r"(?<![\w.-])([A-Za-z_][\w.-]{0,80})(=)(?!=)(\"[^\"\n]{0,500}\"|'[^'\n]{0,500}'|[^\s&,;'\"<>()\[\]{}]+)"
)
_MASK: Final = "***"
_WORD: Final = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_SECRET_LAST: Final = frozenset(
    {"password", "passwd", "pwd", "passphrase", "secret", "token", "apikey", "authorization", "auth", "credential"}
    | {"credentials", "signature", "cookie"}
)
_SECRET_PAIRS: Final = frozenset({("api", "key"), ("private", "key"), ("access", "key"), ("secret", "key")})
_SCHEME: Final = re.compile(r"\b(Bearer|bearer|BEARER|Basic|Token)(\s+)([A-Za-z0-9\-._~+/]{8,}=*)")


def hide_secret_spans(text: str) -> str:
    """``text`` with every secret-shaped span listed in the module docstring made ``[redacted]``;
    ``text`` itself when there is none. Hiding twice changes nothing."""
    if "-----BEGIN" in text:
        text = _PEM.sub(REDACTED, text)
    if "://" in text:
        text = _USERINFO.sub(_userinfo, text)
    if "=" in text:
        text = _PAIR.sub(_pair, text)
    return _SCHEME.sub(_scheme, text)


def hide_userinfo(text: str) -> str:
    """``text`` with only the userinfo of every URL it quotes made ``[redacted]`` (a ``user:***``
    already hidden stays): for a line a library writes about a URL it was given."""
    return _USERINFO.sub(_userinfo, text) if "://" in text and "@" in text else text


_HIDDEN: Final = frozenset({"", REDACTED, _MASK})
"""Values already hidden: the gateway's own ``[redacted]``, or ``***`` (``url_secrets.shown_url``)."""


def _userinfo(match: re.Match[str]) -> str:
    scheme, userinfo = match.group(1), match.group(2)
    if userinfo == REDACTED or userinfo.endswith(f":{_MASK}"):
        return match.group(0)
    return f"{scheme}{REDACTED}@"


def _pair(match: re.Match[str]) -> str:
    name, value = match.group(1), match.group(3)
    if not _names_a_secret(name) or value.strip("\"'") in _HIDDEN:
        return match.group(0)
    quote = value[0] if value[0] in "\"'" else ""
    return f"{name}={quote}{REDACTED}{quote}"


def _scheme(match: re.Match[str]) -> str:
    value = match.group(3)
    if not (any(c.isdigit() for c in value) or value.endswith("=")):
        return match.group(0)
    return f"{match.group(1)}{match.group(2)}{REDACTED}"


def _names_a_secret(name: str) -> bool:
    """Whether ``name``'s last word (or two) says its value is a credential: ``db_password``,
    ``AWS_SECRET_ACCESS_KEY``, ``accessToken``; not ``token_count`` or ``password_policy``."""
    words = [w.lower() for w in _WORD.findall(name)]
    if not words:
        return False
    return words[-1] in _SECRET_LAST or (len(words) > 1 and (words[-2], words[-1]) in _SECRET_PAIRS)
