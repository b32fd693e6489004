"""Whether a base URL a description declares (OpenAPI ``servers``, Swagger ``schemes``/``host``, a
Postman collection's host) can be a connector's ``base_url``.

A description is the upstream's text: an ``ftp://`` scheme, a ``file:///etc`` host variable or a
server variable with no default would otherwise become the address every call is built on, and
each call would fail without saying why. Such a connector loads in error until the manifest says
where its API is.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from ..primitives.url_secrets import shown_url

__all__ = ["declared_base_problem", "unusable_base_error"]

_VARIABLE = re.compile(r"\{([^{}]*)\}")


def declared_base_problem(url: str) -> str | None:
    """Why ``url`` cannot be used as a base URL, in words for the operator; None when it can."""
    if (variable := _VARIABLE.search(url)) is not None:
        return f"its server URL has the variable {{{variable.group(1)[:60]}}}, with no default to fill it"
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("http", "https"):
        scheme = f"uses {parts.scheme[:20]}:" if parts.scheme else "is not absolute"
        return f"its server URL ({shown_url(url)[:200]}) {scheme}, not http(s)"
    if not parts.hostname:
        return f"its server URL ({shown_url(url)[:200]}) names no host"
    return None


def unusable_base_error(label: str, problem: str) -> str:
    """The load error of a connector whose only base URL is the description's unusable one."""
    return (
        f"{label}: {problem}, so the gateway cannot tell where to send calls. Set base_url: in the manifest "
        "to the API's http(s) address."
    )
