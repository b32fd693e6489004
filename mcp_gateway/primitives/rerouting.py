"""The request headers that servers on the way read as another method, URL or client.

A proxy, load balancer or web framework that honours ``X-HTTP-Method-Override: DELETE`` performs a
DELETE; one that honours ``X-Original-URL`` serves another path; ``X-Forwarded-For`` makes the caller
another client. Policy and the approval page judge a call by its own method and URL, so none of these
may reach the wire: not from an agent's argument, nor from a description, a collection or the manifest.
Nor may a name that is no header name at all (``header_name``). The query and form fields the same
frameworks read as the method (``_method=DELETE``) are refused as well, wherever an agent could name one
(``overrides_method``).
"""

from __future__ import annotations

import re

__all__ = ["METHOD_FIELDS", "REROUTING_HEADERS", "header_name", "overrides_method", "rerouting"]

REROUTING_HEADERS = frozenset(
    {
        "x-http-method-override",
        "x-http-method",
        "x-method-override",
        "x-override-method",
        "x-original-method",
        "x-original-url",
        "x-rewrite-url",
        "x-override-url",
        "forwarded",
        "x-real-ip",
        "x-client-ip",
        "true-client-ip",
        "x-host",
    }
)
"""Lower-cased; every ``X-Forwarded-*`` header is one too (``rerouting``)."""


def rerouting(name: str) -> bool:
    """Whether header ``name`` tells a server on the way to use another method, URL or client
    (``X-HTTP-Method-Override``, ``X-Original-URL``, ``X-Forwarded-*``, ``Forwarded`` ...)."""
    lower = name.strip().lower()
    return lower in REROUTING_HEADERS or lower.startswith("x-forwarded-")


METHOD_FIELDS = frozenset(
    {"_method", "x-http-method-override", "x-method-override", "x-http-method", "x-override-method"}
)
"""Query parameters and form fields that frameworks read as the method (Rails, Laravel, Symfony, the
method-override middlewares), lower-cased."""


def overrides_method(name: str) -> bool:
    """Whether a query parameter or form field ``name`` is read as the request's method. A bracketed
    name counts as its base (``_method[]``: PHP and ``qs`` read it as ``_method``)."""
    return name.split("[", 1)[0].strip().lower() in METHOD_FIELDS


_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # RFC 9110 5.6.2


def header_name(name: str) -> bool:
    """Whether ``name`` can be a header's name (an RFC 9110 token): one with a space, a quote or a
    ``;`` is none, could never be sent, and would write its own words into the approval page's line."""
    return _TOKEN.fullmatch(name) is not None
