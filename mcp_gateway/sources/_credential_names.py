"""Names that say a value is a credential, whatever the source: ``Authorization``, ``X-Auth-Token``,
``api_key``, ``client_secret``. A header, variable or field so named carries the connector's
credential, which the gateway injects: an agent is never asked for it."""

from __future__ import annotations

import re

__all__ = ["credential_name"]

_NOT_ALNUM = re.compile(r"[^a-z0-9]")
_CREDENTIAL_NAMES = frozenset(
    {
        "authorization",
        "proxyauthorization",
        "cookie",
        "setcookie",
        "apikey",
        "xapikey",
        "apitoken",
        "apisecret",
        "accesskey",
        "secretkey",
        "privatekey",
        "clientsecret",
        "bearer",
        "jwt",
        "sessionid",
        "sessid",
        "xauth",
        "auth",
        "authkey",
        "xauthkey",
    }
)
# Tokens that page through results rather than authenticate.
_NOT_CREDENTIAL_TOKENS = (
    "page",
    "next",
    "continuation",
    "sync",
    "cursor",
    "resume",
    "prev",
    "start",
    "delta",
    "change",
)


def credential_name(name: str) -> bool:
    """Whether a key or variable name says it holds a credential (``Authorization``, ``api_key``,
    ``access_token``, ``client_secret``, ``password`` …). Paging tokens (``next_page_token``) do not."""
    n = _NOT_ALNUM.sub("", name.lower())
    if not n:
        return False
    if n in _CREDENTIAL_NAMES or "secret" in n or "password" in n or "passwd" in n or "apikey" in n:
        return True
    return n.endswith("token") and not any(word in n for word in _NOT_CREDENTIAL_TOKENS)
