"""Place an action's arguments on the wire: one ``httpx2.Request`` for an OpenAPI or HTTP binding.

Every argument value is agent-controlled, so it is treated as data and never as syntax:

- path values are percent-encoded as a whole segment (``/`` is ``%2F``, ``?`` is ``%3F``), and a
  value that *is* a dot segment (``.``, ``..``) or empty is refused, so no value can re-route the
  request to another endpoint of the same upstream;
- header values may not carry CR/LF (no header injection), and framing headers cannot be set;
- cookie values are percent-encoded, so a ``;`` cannot smuggle a second cookie in.

No credential is applied here: authentication is an ``httpx2.Auth`` that ``send`` applies at the
last moment (SPEC 2.1), so this module never sees a secret.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, version
from types import MappingProxyType
from typing import Any, assert_never
from urllib.parse import quote, quote_plus

import httpx2

from ..errors import ArgumentError
from ..model import Action, HttpBinding, OpenAPIBinding, ParamSpec, PostmanBinding

__all__ = ["DEFAULT_ACCEPT", "USER_AGENT", "build_request", "encode_form", "wire_text"]

try:
    _VERSION = version("mcp-gateway")
except PackageNotFoundError:  # running from a source tree that was never installed
    _VERSION = "0"

USER_AGENT = f"mcp-gateway/{_VERSION}"
DEFAULT_ACCEPT = "application/json, */*;q=0.5"

_PLACEHOLDER = re.compile(r"\{([^{}]+)\}")
# Headers that frame the message: letting an argument set them would desynchronize the exchange.
_FRAMING_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection"})
# RFC 6265 cookie-octet, minus "%" so that our own escapes stay unambiguous.
_COOKIE_SAFE = "".join(chr(c) for c in range(0x21, 0x7F) if chr(c) not in ' ",;\\%')
_PRINTABLE_ASCII = "".join(chr(c) for c in range(0x21, 0x7F))
_NO_HEADERS: Mapping[str, str] = MappingProxyType({})
_HttpLike = OpenAPIBinding | HttpBinding | PostmanBinding
_FAST_URL_LIMIT = 32 * 1024
"""Longer raw paths take the per-component parse (``_url``), whose length limits are httpx2's own."""


@dataclass(frozen=True)
class _Layout:
    """What a binding says about where arguments go: the same for every call, so derived once."""

    specs: dict[str, ParamSpec]
    placeholders: frozenset[str]
    path_names: dict[str, str]
    """Wire name of a path parameter -> its argument name."""
    template_path: str
    template_query: str


_LAYOUTS: dict[int, tuple[_HttpLike, _Layout]] = {}
_MAX_LAYOUTS = 4096


def _layout(binding: _HttpLike) -> _Layout:
    # Keyed by identity (a frozen model's hash would walk all its fields on every call); the entry
    # holds the binding itself, so its id cannot be reused while the entry lives.
    entry = _LAYOUTS.get(id(binding))
    if entry is not None and entry[0] is binding:
        return entry[1]
    template_path, _, template_query = binding.url.partition("?")
    layout = _Layout(
        specs={p.name: p for p in binding.params},
        placeholders=frozenset(_PLACEHOLDER.findall(binding.url)),
        path_names={p.on_wire: p.name for p in binding.params if p.location == "path"},
        template_path=template_path,
        template_query=template_query,
    )
    if len(_LAYOUTS) >= _MAX_LAYOUTS:  # catalogs reloaded many times over: start again
        _LAYOUTS.clear()
    _LAYOUTS[id(binding)] = (binding, layout)
    return layout


@dataclass
class _Placed:
    """Arguments sorted by where they go; values still as the agent passed them."""

    path: dict[str, tuple[str, Any]] = field(default_factory=dict)
    """Wire name in the template -> (argument name, value)."""
    query: list[tuple[ParamSpec, Any]] = field(default_factory=list)
    header: list[tuple[ParamSpec, Any]] = field(default_factory=list)
    cookie: list[tuple[ParamSpec, Any]] = field(default_factory=list)
    body: dict[str, Any] = field(default_factory=dict)
    whole_body: Any = None
    has_whole_body: bool = False


def build_request(
    action: Action,
    args: Mapping[str, Any],
    *,
    base_url: str,
    static_headers: Mapping[str, str] = _NO_HEADERS,
) -> httpx2.Request:
    """Build the upstream request for ``action`` called with ``args``.

    Args:
        action: an action whose binding is HTTP-like (``openapi``, ``http`` or ``postman``). A
            ``postman`` action's arguments that the agent omits are sent with their schema
            ``default`` (the collection's own value), so calling it bare replays the collection;
            an argument passed as null is left out.
        args: the agent's arguments, already validated against the input schema by the caller.
        base_url: the connector's base URL; its path prefix is kept (``https://x/api`` + ``/users``).
        static_headers: connector-level, non-secret headers (``Accept``, ``X-GitHub-Api-Version``).
            They replace our defaults; header arguments replace them in turn.

    Raises:
        ArgumentError: an unknown argument, a missing or dot-segment path value, a header value
            with a line break, or a body the binding cannot carry. ``errors`` names each field.
        ValueError: ``base_url`` is not an absolute http(s) URL or the binding's URL is absolute
            (a manifest bug, caught at validation; not the agent's fault).
    """
    binding = _http_binding(action)
    if isinstance(binding, PostmanBinding):
        args = _with_defaults(action, args)
    placed = _place(action, binding, args)
    try:
        url = _url(base_url, binding, placed)
    except httpx2.InvalidURL:
        # Almost always a path or query value too long for a URL; the URL itself is not echoed.
        raise ArgumentError(
            "the arguments make the request URL invalid or too long; shorten the path and query values",
            errors=[
                {"field": name, "message": "too long for a URL"}
                for name in (*(n for n, _ in placed.path.values()), *(spec.name for spec, _ in placed.query))
            ],
        ) from None
    if isinstance(binding, PostmanBinding) and binding.headers:
        # The collection's headers first; the operator's static headers and header arguments override them.
        static_headers = {**dict(binding.headers), **static_headers}
    headers = _headers(placed, static_headers)
    content, content_type = _body(action, binding, placed)
    if content is not None and "content-type" not in headers:
        # An operator-declared Content-Type (a vendor JSON type, say) wins over our generic one.
        headers["Content-Type"] = content_type
    return httpx2.Request(binding.method, url, headers=headers, content=content)


def _http_binding(action: Action) -> _HttpLike:
    binding = action.binding
    match binding:
        case OpenAPIBinding() | HttpBinding() | PostmanBinding():
            return binding
        case _:
            raise TypeError(f"{action.qualified_name} is a {binding.kind} action, not an HTTP request")


def _with_defaults(action: Action, args: Mapping[str, Any]) -> dict[str, Any]:
    properties = action.input_schema.get("properties") or {}
    filled = {
        name: schema["default"]
        for name, schema in properties.items()
        if name not in args and isinstance(schema, Mapping) and "default" in schema
    }
    # null means "leave it out" for these (the agent's way to not send a default).
    return {name: value for name, value in {**filled, **args}.items() if value is not None}


def _place(action: Action, binding: _HttpLike, args: Mapping[str, Any]) -> _Placed:
    layout = _layout(binding)
    specs, placeholders = layout.specs, layout.placeholders
    placed = _Placed()
    unknown: list[str] = []
    for name, value in args.items():
        if binding.body_param is not None and name == binding.body_param:
            placed.whole_body, placed.has_whole_body = value, True
            continue
        spec = specs.get(name)
        if spec is None and name in placeholders:
            # The template itself names it, so its place is unambiguous even without a ParamSpec.
            spec = ParamSpec(name=name, location="path")
        if spec is None:
            unknown.append(name)
            continue
        match spec.location:
            case "path":
                placed.path[spec.on_wire] = (name, value)
            case "query":
                placed.query.append((spec, value))
            case "header":
                placed.header.append((spec, value))
            case "cookie":
                placed.cookie.append((spec, value))
            case "body":
                placed.body[spec.on_wire] = value
            case _:  # pragma: no cover
                assert_never(spec.location)
    if unknown:
        names: set[str] = {*specs, *placeholders}
        if binding.body_param:
            names.add(binding.body_param)
        accepted = sorted(names)
        listed = ", ".join(accepted[:30]) + (", ..." if len(accepted) > 30 else "")
        raise ArgumentError(
            f"{action.qualified_name} has no argument {', '.join(map(repr, sorted(unknown)))}; "
            f"it accepts {listed or 'no arguments'} (describe shows the schema)",
            errors=[{"field": n, "message": "unknown argument"} for n in sorted(unknown)],
        )
    return placed


# -- URL -------------------------------------------------------------------------------------


def _url(base_url: str, binding: _HttpLike, placed: _Placed) -> httpx2.URL:
    base, prefix, base_path, base_query = _base(base_url)
    layout = _layout(binding)
    template_path = layout.template_path
    if "://" in template_path or template_path.startswith("//"):
        raise ValueError("an action's url must be a path relative to the connector's base_url")

    def fill(match: re.Match[str]) -> str:
        wire = match.group(1)
        if wire not in placed.path:
            name = layout.path_names.get(wire, wire)
            raise ArgumentError(
                f"missing path argument {name!r}; it is required to build the URL",
                errors=[{"field": name, "message": "required"}],
            )
        name, value = placed.path[wire]
        return _path_segment(name, value)

    path = _PLACEHOLDER.sub(fill, template_path) if "{" in template_path else template_path
    full_path = base_path + "/" + path.lstrip("/")
    query = "&".join(q for q in (base_query, layout.template_query, _query_string(placed.query)) if q)
    raw = full_path + (f"?{query}" if query else "")
    # Argument values are escaped already; this only escapes what the template or base_url spelled
    # literally (a space, a non-ASCII letter), keeping every ASCII delimiter and existing %XX.
    raw = quote(raw, safe=_PRINTABLE_ASCII)
    if "#" in raw or len(raw) > _FAST_URL_LIMIT:
        # Per component, as httpx2 checks them: a literal '#' is refused rather than read as a fragment.
        return base.copy_with(raw_path=raw.encode("ascii"), fragment=None)
    url = _normal_url(base, raw)
    if url is not None:
        return url
    # One parse of the whole URL, the same result as the per-component copy above (the authority
    # is httpx2's own normalized form, the raw path has no '#', so the first '?' splits the query).
    return httpx2.URL(prefix + raw)


_NORMAL_PATH = re.compile(r"/(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/]|%[0-9A-Fa-f]{2})*")
"""A path httpx2's parser leaves exactly as it is: unreserved characters, sub-delimiters, ``:@/``
and well-formed ``%XX`` escapes only (it would escape anything else)."""
_NORMAL_QUERY = re.compile(r"(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/?]|%[0-9A-Fa-f]{2})*")
_DOT_SEGMENT = re.compile(r"/\.\.?(?:/|$)")
_URL_PARTS = ("scheme", "userinfo", "host", "port", "path", "query", "fragment")


def _normal_url(base: httpx2.URL, raw: str) -> httpx2.URL | None:
    """``base`` with the raw path ``raw``, made without parsing the URL again, when ``raw`` is already
    in the form httpx2 would normalize it to (the common case: a template of plain segments, values
    escaped whole by ``_path_segment``); None otherwise, and the caller parses.

    httpx2's parse of the whole URL (validation, the host's IP address parse, two escaping passes)
    was most of the cost of building a request; its parse result is a named tuple of the URL's
    normalized parts, which for such a ``raw`` are the base's scheme, userinfo, host and port with
    ``raw``'s path and query. ``test_request.py`` checks the two agree."""
    reference = getattr(base, "_uri_reference", None)
    if reference is None or getattr(reference, "_fields", None) != _URL_PARTS:
        return None  # another httpx2 than the one this was written against: parse
    path, mark, query = raw.partition("?")
    if not _NORMAL_PATH.fullmatch(path) or _DOT_SEGMENT.search(path):
        return None
    if mark and not _NORMAL_QUERY.fullmatch(query):
        return None
    url = httpx2.URL.__new__(httpx2.URL)
    url._uri_reference = reference._replace(path=path, query=query if mark else None, fragment=None)
    return url


@lru_cache(maxsize=256)
def _base(base_url: str) -> tuple[httpx2.URL, str, str, str]:
    """A connector's base URL parsed once: the URL, its ``scheme://authority``, its path without a
    trailing slash, and its query."""
    base = httpx2.URL(base_url)
    if base.scheme not in ("http", "https") or not base.host:
        raise ValueError("base_url must be an absolute http(s) URL")
    base_path, _, base_query = base.raw_path.decode("ascii").partition("?")
    prefix = str(base.copy_with(raw_path=b"", fragment=None))
    return base, prefix, base_path.rstrip("/"), base_query


def _path_segment(name: str, value: Any) -> str:
    if value is None:
        raise ArgumentError(f"path argument {name!r} cannot be null", errors=[{"field": name, "message": "required"}])
    if isinstance(value, list | tuple):
        # OpenAPI "simple" style: elements escaped one by one, joined by a literal comma.
        return ",".join(_path_segment(name, item) for item in value)
    text = wire_text(value)
    if text in ("", ".", ".."):
        # Each would change which endpoint is hit ("/repos/x/.." is "/repos"), not just a value.
        raise ArgumentError(
            f"path argument {name!r} cannot be {text!r}; pass the actual identifier",
            errors=[{"field": name, "message": "must not be empty, '.' or '..'"}],
        )
    return quote(text, safe="")


def _query_string(items: Iterable[tuple[ParamSpec, Any]]) -> str:
    parts: list[str] = []
    for spec, value in items:
        if value is None:
            continue
        key = quote(spec.on_wire, safe="")
        if isinstance(value, list | tuple):
            values = [quote(wire_text(v), safe="") for v in value if v is not None]
            if spec.style_explode:
                parts.extend(f"{key}={v}" for v in values)
            elif values:
                # Literal commas: servers split "a=1,2" on the separator, not on "%2C".
                parts.append(f"{key}={','.join(values)}")
        else:
            parts.append(f"{key}={quote(wire_text(value), safe='')}")
    return "&".join(parts)


def wire_text(value: Any) -> str:
    """One scalar as wire text: JSON spellings for booleans, compact JSON for objects."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# -- headers and cookies ---------------------------------------------------------------------


def _headers(placed: _Placed, static_headers: Mapping[str, str]) -> httpx2.Headers:
    headers = httpx2.Headers({"User-Agent": USER_AGENT, "Accept": DEFAULT_ACCEPT})
    for name, value in static_headers.items():
        headers[name] = value
    for spec, value in placed.header:
        if value is None:
            continue
        if spec.on_wire.lower() in _FRAMING_HEADERS:
            raise ArgumentError(
                f"header argument {spec.name!r} cannot set {spec.on_wire}",
                errors=[{"field": spec.name, "message": "framing header"}],
            )
        text = ", ".join(wire_text(v) for v in value) if isinstance(value, list | tuple) else wire_text(value)
        if any(c in text for c in "\r\n\0"):
            raise ArgumentError(
                f"header argument {spec.name!r} must not contain line breaks or NUL",
                errors=[{"field": spec.name, "message": "contains CR, LF or NUL"}],
            )
        headers[spec.on_wire] = text  # non-ASCII goes out as UTF-8 (httpx2.Headers' own choice)
    cookies = [f"{spec.on_wire}={_cookie_value(value)}" for spec, value in placed.cookie if value is not None]
    if cookies:
        existing = headers.get("cookie")
        headers["Cookie"] = "; ".join([existing, *cookies] if existing else cookies)
    return headers


def _cookie_value(value: Any) -> str:
    text = ",".join(wire_text(v) for v in value) if isinstance(value, list | tuple) else wire_text(value)
    return quote(text, safe=_COOKIE_SAFE)


# -- body ------------------------------------------------------------------------------------


def _body(action: Action, binding: _HttpLike, placed: _Placed) -> tuple[bytes | None, str]:
    if placed.has_whole_body and placed.body:
        raise ArgumentError(
            f"{action.qualified_name} takes its whole body from {binding.body_param!r}; "
            f"put {', '.join(sorted(placed.body))} inside it",
            errors=[{"field": n, "message": "conflicts with the body argument"} for n in sorted(placed.body)],
        )
    if not placed.has_whole_body and not placed.body:
        return None, ""
    if binding.body == "none":
        names = [binding.body_param] if placed.has_whole_body else sorted(placed.body)
        raise ArgumentError(
            f"{action.qualified_name} sends no body, so it cannot take {', '.join(map(str, names))}",
            errors=[{"field": str(n), "message": "this action has no body"} for n in names],
        )
    value = placed.whole_body if placed.has_whole_body else placed.body
    if binding.body == "raw":
        if not isinstance(value, str):
            raise ArgumentError(
                f"the body of {action.qualified_name} is sent as is, so {binding.body_param!r} must be a string",
                errors=[{"field": str(binding.body_param), "message": "must be a string"}],
            )
        return value.encode("utf-8"), "text/plain; charset=utf-8"
    if binding.body == "multipart":
        return _multipart(action, value)
    if binding.body == "json":
        try:
            encoded = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ArgumentError(f"the body of {action.qualified_name} is not valid JSON: {exc}") from None
        return encoded.encode("utf-8"), "application/json"
    if not isinstance(value, Mapping):
        raise ArgumentError(
            f"{action.qualified_name} sends a form; {binding.body_param!r} must be an object",
            errors=[{"field": str(binding.body_param), "message": "must be an object"}],
        )
    return encode_form(value).encode("ascii"), "application/x-www-form-urlencoded"


def _multipart(action: Action, value: Any) -> tuple[bytes, str]:
    """multipart/form-data: scalars are text parts, ``{content, filename?, content_type?}`` a file part."""
    if not isinstance(value, Mapping):
        raise ArgumentError(f"{action.qualified_name} sends form-data; its body must be an object of fields")
    parts: list[tuple[str, tuple[str | None, bytes] | tuple[str, bytes, str]]] = []
    for key, item in value.items():
        if item is None:
            continue
        if isinstance(item, Mapping) and isinstance(item.get("content"), str):
            filename = str(item.get("filename") or key)
            content_type = str(item.get("content_type") or "application/octet-stream")
            parts.append((str(key), (filename, item["content"].encode("utf-8"), content_type)))
        else:
            parts.append((str(key), (None, wire_text(item).encode("utf-8"))))  # no filename: a text part
    # httpx2 encodes (and picks the boundary); the bytes are kept so redirects can replay the body.
    encoded = httpx2.Request("POST", "http://multipart.invalid/", files=parts)
    return encoded.read(), encoded.headers["content-type"]


def encode_form(value: Mapping[str, Any]) -> str:
    pairs: list[tuple[str, str]] = []
    for key, item in value.items():
        _form_pairs(str(key), item, pairs)
    # Brackets stay literal (readable, and what Stripe documents); everything else is form-escaped.
    return "&".join(f"{quote_plus(k, safe='[]')}={quote_plus(v)}" for k, v in pairs)


def _form_pairs(key: str, value: Any, out: list[tuple[str, str]]) -> None:
    """Stripe-style nesting: ``a[b]=1`` for objects, ``a[0]=x`` for arrays; null is left out."""
    if value is None:
        return
    if isinstance(value, Mapping):
        for sub, item in value.items():
            _form_pairs(f"{key}[{sub}]", item, out)
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            _form_pairs(f"{key}[{index}]", item, out)
    else:
        out.append((key, wire_text(value)))
