"""``api_key``: the key in a header, a query parameter or a cookie.

Whatever the agent put under the same name (a header, a query parameter or a cookie it was
allowed to set) is replaced, not joined: the credential the gateway holds is the one that goes.
Everything else already on the request is kept byte for byte.
"""

from __future__ import annotations

from urllib.parse import quote, unquote_plus

import httpx2

from ..manifest import ApiKeyAuth
from ..primitives.secrets import SecretValue
from ..vocabulary.errors import CredentialError
from ._base import check_header_value, secret_text

__all__ = ["apply_api_key"]


def apply_api_key(request: httpx2.Request, config: ApiKeyAuth, secret: SecretValue) -> None:
    value = config.prefix + secret_text("api_key", secret)
    match config.in_:
        case "header":
            request.headers[config.name] = check_header_value("api_key", f"header {config.name!r}", value)
        case "query":
            request.url = _with_query_param(request.url, config.name, value)
        case "cookie":
            _set_cookie(request, config.name, value)


def _with_query_param(url: httpx2.URL, name: str, value: str) -> httpx2.URL:
    # Work on the raw query rather than re-encoding ``url.params``: re-encoding could change how
    # the other parameters are spelled (``%20`` -> ``+``, ``,`` -> ``%2C``), which some APIs and
    # every signature over the URL care about.
    kept = [p for p in url.query.split(b"&") if p and unquote_plus(p.split(b"=", 1)[0].decode("latin-1")) != name]
    pair = f"{quote(name, safe='')}={quote(value, safe='')}".encode("ascii")
    return url.copy_with(query=b"&".join([*kept, pair]))


def _set_cookie(request: httpx2.Request, name: str, value: str) -> None:
    # RFC 6265 section 4.2.1: pairs are separated by "; ", so a ';' or line break in the value
    # would split it or end the header.
    if any(c in value for c in ";\r\n\0"):
        raise CredentialError(
            "the api_key secret cannot go in a cookie: it contains ';', a line break or NUL; "
            "enter it again with `mcp-gateway secret set`, or place it in a header"
        )
    pairs: list[str] = []
    for header in request.headers.get_list("cookie"):
        for part in header.split(";"):
            part = part.strip()
            if part and part.split("=", 1)[0].strip() != name:
                pairs.append(part)
    pairs.append(f"{name}={value}")
    request.headers["Cookie"] = "; ".join(pairs)
