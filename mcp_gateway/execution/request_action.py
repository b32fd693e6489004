"""Run the generic ``request`` action: the agent's method, path, query, headers and body, fenced in.

``prepare`` builds one ``httpx2.Request`` (pure, before any approval) and refuses, with a reason
the agent can act on:

- a URL off the connector's origin: an absolute URL must have the base_url's scheme, host and
  port, and a ``//host`` reference or another scheme is refused outright;
- ``..`` segments, literal or percent-encoded (``%2e%2e``, ``.%2E``, even double-encoded
  ``%252e%252e``), and backslash separators, which some servers read as ``/``;
- credentials set by the agent: the credential headers (``manifest.CREDENTIAL_HEADERS``), the
  header the connector's own auth writes, and an ``api_key`` query parameter the connector sends;
- framing headers (``Host``, ``Content-Length``, ...), method/URL/client override headers
  (``X-HTTP-Method-Override``, ``X-Original-URL``, ``X-Forwarded-*``, ``Forwarded``: ``primitives.rerouting``)
  and header values with line breaks.

``run`` sends it through the same path as every HTTP action (``send``: the connector's
last-meter auth, same-origin redirects only, one deadline, a capped answer).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, unquote

import httpx2

from ..auth import LastMeterAuth
from ..manifest import CREDENTIAL_HEADERS, ApiKeyAuth, ConnectorConfig, auth_headers
from ..primitives.rerouting import header_name, overrides_method, rerouting
from ..sources.generic_request import METHODS
from ..vocabulary.errors import ArgumentError, UpstreamError
from ..vocabulary.model import Action, RequestBinding
from .executor import HttpExecutor, Prepared
from .http_request import (
    DEFAULT_ACCEPT,
    USER_AGENT,
    decoded_path,
    dot_segment,
    encode_form,
    wire_text,
    with_own_body_type,
)
from .response import Outcome
from .send import RedirectJudge, send

__all__ = ["RequestExecutor", "build_generic_request"]

_FRAMING = frozenset(
    {"host", "content-length", "transfer-encoding", "connection", "te", "trailer", "upgrade", "keep-alive"}
)
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_PRINTABLE_ASCII = "".join(chr(c) for c in range(0x21, 0x7F))
_FORM = "application/x-www-form-urlencoded"
_TEXT = "text/plain; charset=utf-8"
_JSON = "application/json"
_METHOD_PARAM_REFUSAL = (
    "query parameter {name!r} makes servers use another method than the request says; give the method itself"
)
_METHOD_FIELD_REFUSAL = (
    "form field {name!r} makes servers use another method than the request says; give the method itself"
)
_METHOD_KEY_REFUSAL = (
    "JSON body key {name!r} makes servers use another method than the request says; give the method itself"
)


class RequestExecutor:
    """``request`` bindings: the agent's own HTTP request, through the HTTP executor's send path
    (so an mTLS connector's request goes through its certificate-holding client too)."""

    def __init__(self, http: HttpExecutor) -> None:
        self._http = http

    def prepare(
        self, action: Action, args: Mapping[str, Any], connector: ConnectorConfig, base_url: str | None
    ) -> Prepared:
        assert isinstance(action.binding, RequestBinding), action.binding.kind
        if not base_url:
            raise UpstreamError(
                "connector_error",
                f"Connector {connector.slug!r} has no base_url; the operator must set one in the manifest.",
            )
        return Prepared(action=action, connector=connector, request=build_generic_request(args, base_url, connector))

    async def run(
        self, prepared: Prepared, *, auth: LastMeterAuth, max_bytes: int, redirects: RedirectJudge | None = None
    ) -> Outcome:
        assert prepared.request is not None
        return await send(
            self._http.client_for(prepared.connector, auth),
            prepared.request,
            auth=auth,
            timeout=prepared.connector.timeout,
            max_bytes=max_bytes,
            trace_context=prepared.connector.trace_context,
            redirects=redirects,
        )


def build_generic_request(args: Mapping[str, Any], base_url: str, connector: ConnectorConfig) -> httpx2.Request:
    """The request ``args`` describe, on ``connector``'s origin. Raises ``ArgumentError`` naming the field."""
    method = str(args.get("method", "")).upper()
    if method not in METHODS:
        raise _refused("method", f"method must be one of {', '.join(METHODS)}")
    base = httpx2.URL(base_url)
    if base.scheme not in ("http", "https") or not base.host:
        raise UpstreamError("connector_error", f"Connector {connector.slug!r} has a base_url that is not http(s).")
    path, path_query = _target(str(args.get("path", "")), base, confine=connector.confine_to_base_path)
    headers = _headers(args.get("headers") or {}, connector)
    query = "&".join(q for q in (path_query, _query(args.get("query") or {}, connector)) if q)
    _check_query_names(path_query, connector)
    raw = path + (f"?{query}" if query else "")
    try:
        url = base.copy_with(raw_path=quote(raw, safe=_PRINTABLE_ASCII).encode("ascii"), fragment=None)
    except httpx2.InvalidURL:
        raise _refused("path", "the path and query make the URL invalid or too long; shorten them") from None
    given_type = "content-type" in headers
    content = _body(args, headers)
    request = httpx2.Request(method, url, headers=headers, content=content)
    if given_type or content is None:
        return request
    return with_own_body_type(request, _TEXT if isinstance(args.get("body"), str) else _JSON)


def _refused(field: str, message: str) -> ArgumentError:
    return ArgumentError(f"request refused: {message}", errors=[{"field": field, "message": message}])


def _target(path: str, base: httpx2.URL, *, confine: bool = True) -> tuple[str, str]:
    """(absolute path, query) of the request target, checked to stay within the connector's origin."""
    if not path.strip():
        raise _refused("path", "give a path below the base URL, e.g. '/items/42'")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in path):
        raise _refused("path", "the path contains control characters (a line break, a tab, NUL)")
    path = path.split("#", 1)[0]
    base_origin = f"{base.scheme}://{base.netloc.decode('ascii')}"
    if path.startswith(("//", "\\\\")):
        raise _refused("path", f"'//host' names another host; this action only reaches {base_origin}")
    absolute = path.lower().startswith(("http://", "https://"))
    if not absolute and _SCHEME.match(path):
        raise _refused("path", f"only paths or http(s) URLs on {base_origin} are allowed")
    target, _, query = path.partition("?")
    _check_segments(target)
    if absolute:
        try:
            url = httpx2.URL(path)
        except httpx2.InvalidURL:
            raise _refused("path", "the URL is not valid") from None
        if url.userinfo:
            # Not echoed: it may be a password. "a@b" reads as host "a" to a person and "b" to the client.
            raise _refused(
                "path",
                f"an absolute URL may not carry a user name or password ('user@' before the host); this action "
                f"only reaches {base_origin}, with the connector's own credential (use a path like '/items/42')",
            )
        if url.origin != base.origin:
            raise _refused(
                "path",
                f"{url.scheme}://{url.netloc.decode('ascii', 'replace')} is not this connector's origin; "
                f"this action only reaches {base_origin} (use a path like '/items/42')",
            )
        target, _, query = url.raw_path.decode("ascii").partition("?")
        if confine:
            _confine(target or "/", base.raw_path.decode("ascii").partition("?")[0], base_origin)
        return target or "/", query
    base_path = base.raw_path.decode("ascii").partition("?")[0]
    base_query = base.raw_path.decode("ascii").partition("?")[2]
    full = base_path.rstrip("/") + "/" + target.lstrip("/")
    return full, "&".join(q for q in (base_query, query) if q)


def _check_segments(target: str) -> None:
    """Refuse every spelling of a ``..`` segment that some server on the way may read as one
    (``request.decoded_path``, ``request.dot_segment``), encoded control characters and backslashes."""
    try:
        decoded = decoded_path(target)
    except ValueError as exc:
        raise _refused("path", str(exc)) from None
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in decoded):
        raise _refused("path", "the path contains encoded control characters (a line break, a tab, NUL)")
    if "\\" in decoded:
        raise _refused("path", "backslashes are not allowed in the path (some servers read them as '/')")
    if any(dot_segment(segment) for segment in decoded.split("/")):
        raise _refused("path", "'..' segments (also encoded, with ';' parameters or full-width dots) are not allowed")


def _confine(target: str, base_path: str, base_origin: str) -> None:
    """An absolute same-origin URL must stay below ``base_url``'s path (``confine_to_base_path``)."""
    prefix = base_path.rstrip("/")
    if not prefix:
        return
    if target != prefix and not target.startswith(prefix + "/"):
        raise _refused(
            "path",
            f"this action only reaches URLs below {base_origin}{prefix}/; give a path relative to it "
            "(e.g. '/items/42')",
        )


def _query(query: Any, connector: ConnectorConfig) -> str:
    if not isinstance(query, Mapping):
        raise _refused("query", "query must be an object of parameter names to values")
    credential = _credential_param(connector)
    parts: list[str] = []
    for name, value in query.items():
        if credential is not None and str(name).lower() == credential:
            raise _refused("query", f"query parameter {name!r} carries the connector's credential; the gateway adds it")
        if overrides_method(str(name)):
            raise _refused("query", _METHOD_PARAM_REFUSAL.format(name=name))
        if value is None:
            continue
        key = quote(str(name), safe="")
        for item in value if isinstance(value, list | tuple) else [value]:
            if item is not None:
                parts.append(f"{key}={quote(wire_text(item), safe='')}")
    return "&".join(parts)


def _check_query_names(query: str, connector: ConnectorConfig) -> None:
    credential = _credential_param(connector)
    if not query:
        return
    for pair in query.split("&"):
        name = unquote(pair.split("=", 1)[0])
        if overrides_method(name):
            raise _refused("path", _METHOD_PARAM_REFUSAL.format(name=name))
        if credential is not None and name.lower() == credential:
            raise _refused("path", "the path's query carries the connector's credential parameter; the gateway adds it")


def _credential_param(connector: ConnectorConfig) -> str | None:
    auth = connector.auth
    return auth.name.lower() if isinstance(auth, ApiKeyAuth) and auth.in_ == "query" else None


def _headers(given: Any, connector: ConnectorConfig) -> httpx2.Headers:
    if not isinstance(given, Mapping):
        raise _refused("headers", "headers must be an object of header names to string values")
    forbidden = CREDENTIAL_HEADERS | auth_headers(connector.auth)
    headers = httpx2.Headers({"User-Agent": USER_AGENT, "Accept": DEFAULT_ACCEPT})
    for name, value in connector.headers.items():
        headers[name] = value
    seen: set[str] = set()
    for name, value in given.items():
        lower = str(name).lower()
        if not header_name(str(name)):
            raise _refused("headers", f"{name!r} is not a valid header name")
        if lower in seen:
            # One header given twice in two spellings: which one is sent would hang on their order,
            # which neither an approver nor the call's fingerprint sees.
            raise _refused("headers", f"header {name!r} is given twice (header names ignore case); give it once")
        seen.add(lower)
        if lower in forbidden or lower.startswith("proxy-"):
            raise _refused(
                "headers",
                f"header {name!r} carries credentials; the gateway applies the connector's credential itself, "
                "so remove it",
            )
        if lower in _FRAMING:
            raise _refused("headers", f"header {name!r} frames the message; the gateway sets it")
        if rerouting(lower):
            raise _refused(
                "headers",
                f"header {name!r} makes servers on the way use another method, URL or client than the request "
                "says; give the method and path themselves instead",
            )
        text = value if isinstance(value, str) else wire_text(value)
        if any(c in text for c in "\r\n\0"):
            raise _refused("headers", f"the value of header {name!r} contains a line break or NUL")
        headers[str(name)] = text
    return headers


def _body(args: Mapping[str, Any], headers: httpx2.Headers) -> bytes | None:
    body = args.get("body")
    if body is None:
        return None
    content_type = headers.get("content-type", "").partition(";")[0].strip().lower()
    if content_type == _FORM:
        if not isinstance(body, Mapping):
            raise _refused("body", "a form-encoded body must be an object")
        for name in body:
            if overrides_method(str(name)):
                raise _refused("body", _METHOD_FIELD_REFUSAL.format(name=name))
        return encode_form(body).encode("ascii")
    if isinstance(body, str):
        headers.setdefault("Content-Type", _TEXT)
        if _is_json(headers.get("content-type", "")):
            _json_method_kept(_parsed(body))
        return body.encode("utf-8")
    headers.setdefault("Content-Type", _JSON)
    _json_method_kept(body)
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _json_method_kept(body: Any) -> None:
    """Laravel and the other frameworks that merge a JSON body into the request's input read its
    top-level ``_method`` as the method, as they read a form field's."""
    if isinstance(body, Mapping):
        for name in body:
            if overrides_method(str(name)):
                raise _refused("body", _METHOD_KEY_REFUSAL.format(name=name))


def _is_json(content_type: str) -> bool:
    media = content_type.partition(";")[0].strip().lower()
    return media.endswith("/json") or media.endswith("+json")


def _parsed(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None
