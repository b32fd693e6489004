"""Place an action's arguments on the wire: one ``httpx2.Request`` for an OpenAPI or HTTP binding.

Every argument value is agent-controlled, so it is treated as data and never as syntax:

- path values are percent-encoded as a whole segment (``/`` is ``%2F``, ``?`` is ``%3F``), and a
  value that is empty, or holds a dot segment in any spelling a server on the way may decode
  (``..``, ``../../admin``, ``%2e%2e``, ``.%2E``, full-width dots: ``dot_segment``), is refused, so
  no value can re-route the request to another endpoint of the same upstream;
- header values may not carry CR/LF (no header injection), framing headers cannot be set, and
  neither can the headers proxies and frameworks read as another method, URL or client
  (``X-HTTP-Method-Override``, ``X-Original-URL``, ``X-Forwarded-*``, ``Forwarded``:
  ``primitives.rerouting``), by an argument or by a fixed header (a collection's, the connector's);
- cookie values are percent-encoded, so a ``;`` cannot smuggle a second cookie in;
- the names a value chooses itself (an exploded object's keys in the query, a free-form form body's
  fields) may not be the method (``_method``: ``primitives.rerouting``) nor a query parameter the
  action names (``limit``): policy judges that parameter by its own argument, so no other argument
  may write it.

No credential is applied here: authentication is an ``httpx2.Auth`` that ``send`` applies at the
last moment, so this module never sees a secret.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, version
from types import MappingProxyType
from typing import Any, assert_never
from urllib.parse import quote, quote_plus, unquote, unquote_to_bytes

import httpx2

from ..primitives.rerouting import overrides_method, rerouting
from ..vocabulary.errors import ArgumentError, UpstreamError
from ..vocabulary.model import Action, HttpBinding, OpenAPIBinding, ParamSpec, PostmanBinding
from .multipart import multipart_body
from .param_styles import (
    cookie_text,
    escaped,
    free_keys,
    header_text,
    nested_leaves,
    path_text,
    query_parts,
    wire_text,
)

__all__ = [
    "DEFAULT_ACCEPT",
    "OWN_BODY_TYPE",
    "USER_AGENT",
    "build_request",
    "decoded_path",
    "dot_segment",
    "encode_form",
    "sent_arguments",
    "wire_text",
    "with_own_body_type",
]

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
_EMPTY_BODY_LENGTH = frozenset({"POST", "PUT", "PATCH", "QUERY"})
"""Methods httpx2 sends ``Content-Length: 0`` for when they have no body."""
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
    body_specs: dict[str, ParamSpec]
    """Wire name of a body argument -> its spec (how a multipart part is written)."""
    query_names: dict[str, str]
    """The query names the action writes itself, as ``_query_name`` reads them -> the argument that
    writes each (empty for one its URL template sets)."""


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
        body_specs={p.on_wire: p for p in binding.params if p.location == "body"},
        query_names={
            **dict.fromkeys(_query_names(template_query), ""),
            **{_query_name(p.on_wire): p.name for p in binding.params if p.location == "query"},
        },
    )
    if len(_LAYOUTS) >= _MAX_LAYOUTS:  # catalogs reloaded many times over: start again
        _LAYOUTS.clear()
    _LAYOUTS[id(binding)] = (binding, layout)
    return layout


@dataclass(frozen=True)
class _Wire:
    """What every request of one binding through one connector shares, derived once: the URL's
    fixed parts in their final (escaped) form, and the headers before any argument's.

    Only made when the result is what the general path (``_url``, ``_headers`` and
    ``httpx2.Request``'s own preparation) would build, part for part: ``_wire`` returns None for a
    template or base URL outside that (a literal ``#``, an absolute template, a framing header among
    the static ones), and those calls take the general path."""

    base: httpx2.URL
    url_parts: tuple[Any, str, str, str, int | None] | None
    """``_url_parts(base)``, or None when the URL must be parsed after all."""
    prefix: str
    """``scheme://authority`` of the base URL, for a URL that must be parsed after all."""
    path_pieces: tuple[str, ...]
    """The path template split at its placeholders: escaped literal text at even indexes, the
    wire name of a placeholder at odd ones."""
    base_path: str
    fixed_query: str
    """The base URL's and the template's own query, escaped, joined."""
    normal: bool
    """The fixed parts are in httpx2's normal form (``_NORMAL_PATH``, ``_NORMAL_QUERY``), so with
    escaped values added the URL needs no parse."""
    headers: httpx2.Headers
    """``Host``, the defaults and the static headers, as ``httpx2.Request`` lays them out for a request
    without a body (with ``Content-Length: 0`` for the methods that get one)."""
    body_headers: httpx2.Headers
    """The same for a request with a body (its ``Content-Length`` is added last, per call)."""


_WIRES: dict[int, tuple[_HttpLike, str, dict[str, str], _Wire | None]] = {}


def _wire(binding: _HttpLike, base_url: str, static_headers: Mapping[str, str]) -> _Wire | None:
    # Keyed like _LAYOUTS; the connector's base URL and static headers are checked by value, so a
    # changed manifest gets a new entry.
    entry = _WIRES.get(id(binding))
    if entry is not None and entry[0] is binding and entry[1] == base_url and entry[2] == static_headers:
        return entry[3]
    wire = _make_wire(binding, base_url, static_headers)
    if len(_WIRES) >= _MAX_LAYOUTS:
        _WIRES.clear()
    _WIRES[id(binding)] = (binding, base_url, dict(static_headers), wire)
    return wire


def _make_wire(binding: _HttpLike, base_url: str, static_headers: Mapping[str, str]) -> _Wire | None:
    layout = _layout(binding)
    template_path = layout.template_path
    if "://" in template_path or template_path.startswith("//") or "#" in binding.url:
        return None  # the general path refuses or parses these, as it always did
    try:
        base, prefix, base_path, base_query = _base(base_url)
    except ValueError:
        return None
    headers = _defaults(_static_headers(binding, static_headers))
    if any(name in headers for name in _FRAMING_HEADERS):
        return None  # httpx2 would keep the operator's own framing headers: left to it
    pieces = tuple(
        quote(piece, safe=_PRINTABLE_ASCII) if index % 2 == 0 else piece
        for index, piece in enumerate(_PLACEHOLDER.split(template_path))
    )
    fixed_query = quote("&".join(q for q in (base_query, layout.template_query) if q), safe=_PRINTABLE_ASCII)
    base_path = quote(base_path, safe=_PRINTABLE_ASCII)
    # Escaped values are in normal form, so the URL is when each fixed piece is on its own (then
    # no '%XX' can be split between a piece and a value).
    url_parts = _url_parts(base)
    normal = (
        url_parts is not None
        and all(_NORMAL_PATH.fullmatch("/" + piece) for piece in (base_path, *pieces[0::2]))
        and _NORMAL_QUERY.fullmatch(fixed_query) is not None
    )
    host = [(b"Host", base.netloc)]
    bodiless = [*host, (b"Content-Length", b"0")] if binding.method.upper() in _EMPTY_BODY_LENGTH else host
    return _Wire(
        base=base,
        url_parts=url_parts,
        prefix=prefix,
        path_pieces=pieces,
        base_path=base_path,
        fixed_query=fixed_query,
        normal=normal,
        headers=httpx2.Headers(bodiless + headers.raw),
        body_headers=httpx2.Headers(host + headers.raw),
    )


def _prepared_request(action: Action, binding: _HttpLike, placed: _Placed, wire: _Wire) -> httpx2.Request:
    """``build_request`` for a binding with a ``_Wire``: the same request, part for part, from its
    prepared parts; only what the arguments add is worked out."""
    pieces = wire.path_pieces
    if len(pieces) == 1:
        path = pieces[0]
    else:
        parts = list(pieces)
        for index in range(1, len(pieces), 2):
            parts[index] = _path_value(placed, pieces[index], _layout(binding))
        path = "".join(parts)
    full_path = wire.base_path + "/" + path.lstrip("/")
    query = wire.fixed_query
    if placed.query:
        arguments = _query_string(placed.query)
        query = f"{query}&{arguments}" if query and arguments else query or arguments
    try:
        url = _fast_url(wire, full_path, query) if wire.normal else None
        if url is None:
            raw = full_path + (f"?{query}" if query else "")
            if len(raw) > _FAST_URL_LIMIT:
                url = wire.base.copy_with(raw_path=raw.encode("ascii"), fragment=None)
            else:
                url = httpx2.URL(wire.prefix + raw)
    except httpx2.InvalidURL:
        raise _url_too_long(placed) from None
    arguments_headers = _header_arguments(placed) if placed.header else ()
    content, content_type = _body(action, binding, placed)
    headers = wire.headers if content is None else wire.body_headers
    own_type = False
    if arguments_headers or placed.cookie or content is not None:
        headers = httpx2.Headers(headers)  # the template stays as it is
        for name, text in arguments_headers:
            headers[name] = text
        _add_cookies(headers, placed)
        if content is not None:
            own_type = "content-type" not in headers
            if own_type:
                headers["Content-Type"] = content_type
            headers["Content-Length"] = str(len(content))
    # With ``stream=`` (public API) httpx2 takes the headers as they are: they already hold what its
    # own preparation would add (Host, Content-Length), so that is not worked out again per call.
    request = httpx2.Request(binding.method, url, headers=headers, stream=httpx2.ByteStream(content or b""))
    request.read()  # as Request(content=...) does: the body stays replayable (redirects, signing)
    if own_type and binding.body_type is None:
        with_own_body_type(request, content_type)
    return request


OWN_BODY_TYPE = "mcp_gateway.own_body_type"
"""The request extension holding the ``Content-Type`` the gateway gave the body it encoded, when it set
one itself: the approval page leaves that one out, and shows any other (an agent's, a connector's)."""


def with_own_body_type(request: httpx2.Request, content_type: str) -> httpx2.Request:
    """``request``, marked as carrying ``content_type``, the ``Content-Type`` the gateway gave its body
    (``OWN_BODY_TYPE``). Given, not read back: reading a header fixes the headers' encoding, and one the
    auth adds later (beyond ASCII) would then fail."""
    request.extensions = {**request.extensions, OWN_BODY_TYPE: content_type}
    return request


def _path_value(placed: _Placed, wire_name: str, layout: _Layout) -> str:
    if wire_name not in placed.path:
        name = layout.path_names.get(wire_name, wire_name)
        raise ArgumentError(
            f"missing path argument {name!r}; it is required to build the URL",
            errors=[{"field": name, "message": "required"}],
        )
    name, value = placed.path[wire_name]
    spec = layout.specs.get(name)
    if spec is None or spec.style is None:
        return _path_segment(name, value)
    if value is None:
        return _path_segment(name, value)  # refused as null
    text = path_text(spec, value, lambda item: _path_segment(name, item))
    if not text or dot_segment(text, single=True):
        raise ArgumentError(
            f"path argument {name!r} cannot be empty or '.' once written in its {spec.style} style; "
            "pass the actual values",
            errors=[{"field": name, "message": "must not be empty"}],
        )
    _no_dot_segments(name, text)
    return text


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
    _own_names_kept(action, binding, placed, base_url)
    _json_method_kept(action, binding, placed)
    wire = _wire(binding, base_url, static_headers)
    if wire is not None:
        return _prepared_request(action, binding, placed, wire)
    try:
        url = _url(base_url, binding, placed)
    except httpx2.InvalidURL:
        raise _url_too_long(placed) from None
    headers = _headers(placed, _static_headers(binding, static_headers))
    content, content_type = _body(action, binding, placed)
    if content is None or "content-type" in headers:
        # An operator-declared Content-Type (a vendor JSON type, say) wins over our generic one.
        return httpx2.Request(binding.method, url, headers=headers, content=content)
    headers["Content-Type"] = content_type
    request = httpx2.Request(binding.method, url, headers=headers, content=content)
    # The description's own media type is shown to an approver: only the gateway's generic one is not.
    return request if binding.body_type is not None else with_own_body_type(request, content_type)


def _url_too_long(placed: _Placed) -> ArgumentError:
    # Almost always a path or query value too long for a URL; the URL itself is not echoed.
    return ArgumentError(
        "the arguments make the request URL invalid or too long; shorten the path and query values",
        errors=[
            {"field": name, "message": "too long for a URL"}
            for name in (*(n for n, _ in placed.path.values()), *(spec.name for spec, _ in placed.query))
        ],
    )


def _static_headers(binding: _HttpLike, static_headers: Mapping[str, str]) -> Mapping[str, str]:
    fixed = static_headers
    if isinstance(binding, PostmanBinding) and binding.headers:
        # The collection's headers first; the operator's static headers and header arguments override them.
        fixed = {**dict(binding.headers), **static_headers}
    if any(rerouting(name) for name in fixed):
        # Sync and the manifest leave these out already; a catalog stored before they did, or a
        # binding built by hand, must not send one either: policy judged this method and URL.
        return {name: value for name, value in fixed.items() if not rerouting(name)}
    return fixed


def _http_binding(action: Action) -> _HttpLike:
    binding = action.binding
    match binding:
        case OpenAPIBinding() | HttpBinding() | PostmanBinding():
            return binding
        case _:
            raise TypeError(f"{action.qualified_name} is a {binding.kind} action, not an HTTP request")


def sent_arguments(action: Action, args: Mapping[str, Any]) -> Mapping[str, Any]:
    """The arguments a call of ``action`` sends: ``args``, and for a Postman request the collection's
    values of those left out (what an approver must see, since they are sent as much as the agent's)."""
    return _with_defaults(action, args) if isinstance(action.binding, PostmanBinding) else args


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
        named = sorted(unknown)
        said = ", ".join(repr(n[:60]) for n in named[:10]) + (
            f" and {len(named) - 10:,} more" if len(named) > 10 else ""
        )
        raise ArgumentError(
            f"{action.qualified_name} has no argument {said}; "
            f"it accepts {listed or 'no arguments'} (describe shows the schema)",
            errors=[{"field": n, "message": "unknown argument"} for n in named],
        )
    return placed


def _query_name(name: str) -> str:
    """A query or form name as frameworks group it: case aside, and a bracketed one as its base
    (PHP, Rails and ``qs`` read ``limit[]=1`` as ``limit``)."""
    return name.split("[", 1)[0].strip().lower()


def _query_names(query: str) -> list[str]:
    return [_query_name(unquote(pair.partition("=")[0])) for pair in query.split("&") if pair]


def _own_names_kept(action: Action, binding: _HttpLike, placed: _Placed, base_url: str) -> None:
    """Refuse a name an argument's value chooses (an exploded object's key, a free-form form body's
    field) that is read as the method, or is a query parameter the action writes itself: a rule on
    ``limit`` judges the ``limit`` argument, so ``limit`` may not reach the wire through another one.

    Raises:
        ArgumentError: naming the argument, the key, and what to do instead.
    """
    form_body = (
        placed.has_whole_body and binding.body in ("form", "multipart") and isinstance(placed.whole_body, Mapping)
    )
    if not placed.query and not form_body:
        return
    chosen = [(spec.name, key) for spec, value in placed.query for key in free_keys(spec, value)]
    if form_body:
        chosen += [(str(binding.body_param), str(key)) for key in placed.whole_body]
    if not chosen:
        return
    own = _layout(binding).query_names
    fixed = _query_names(_base(base_url)[3])
    writers: dict[str, str] = {}
    for name, key in chosen:
        field_name = f"{name}.{key}"
        if overrides_method(key):
            raise ArgumentError(
                f"argument {name!r} cannot hold the key {key!r}: servers read it as the request's method, "
                f"which must be {binding.method.upper()} as the action says; leave it out",
                errors=[{"field": field_name, "message": "read as the method"}],
            )
        base = _query_name(key)
        owner = own.get(base)
        if owner:
            raise ArgumentError(
                f"argument {name!r} cannot hold the key {key!r}: the query parameter {base!r} has an argument "
                f"of its own; pass it as {owner!r}",
                errors=[{"field": field_name, "message": f"pass it as {owner!r}"}],
            )
        if owner is not None or base in fixed:
            raise ArgumentError(
                f"argument {name!r} cannot hold the key {key!r}: the action's URL sets {base!r} itself; leave it out",
                errors=[{"field": field_name, "message": "set by the action's URL"}],
            )
        other = writers.setdefault(base, name)
        if other != name:
            raise ArgumentError(
                f"arguments {other!r} and {name!r} both hold the key {key!r}; give it in one of them",
                errors=[{"field": field_name, "message": f"also in {other!r}"}],
            )


def _json_method_kept(action: Action, binding: _HttpLike, placed: _Placed) -> None:
    """Refuse a free-form JSON body's top-level key that is read as the method: Laravel and the other
    frameworks that merge a JSON body into the request's input take ``{"_method": "DELETE"}`` in a POST
    as a DELETE, which policy and the approver never judged. A key the body's own schema declares is
    the upstream's design and is sent.

    Raises:
        ArgumentError: naming the argument and the key.
    """
    if not (placed.has_whole_body and binding.body == "json" and isinstance(placed.whole_body, Mapping)):
        return
    name = str(binding.body_param)
    declared = _declared_keys(action.input_schema.get("properties", {}).get(name))
    for key in placed.whole_body:
        if overrides_method(str(key)) and str(key) not in declared:
            raise ArgumentError(
                f"argument {name!r} cannot hold the key {key!r}: servers read it as the request's method, "
                f"which must be {binding.method.upper()} as the action says; leave it out",
                errors=[{"field": f"{name}.{key}", "message": "read as the method"}],
            )


def _declared_keys(schema: Any) -> set[str]:
    """The property names a body schema declares, its ``allOf``/``anyOf``/``oneOf`` branches' too."""
    if not isinstance(schema, Mapping):
        return set()
    properties = schema.get("properties")
    keys = {str(key) for key in properties} if isinstance(properties, Mapping) else set()
    for combinator in ("allOf", "anyOf", "oneOf"):
        branches = schema.get(combinator)
        if isinstance(branches, list):
            for branch in branches:
                keys |= _declared_keys(branch)
    return keys


# -- URL -------------------------------------------------------------------------------------


def _url(base_url: str, binding: _HttpLike, placed: _Placed) -> httpx2.URL:
    base, prefix, base_path, base_query = _base(base_url)
    layout = _layout(binding)
    template_path = layout.template_path
    if "://" in template_path or template_path.startswith("//"):
        raise ValueError("an action's url must be a path relative to the connector's base_url")

    def fill(match: re.Match[str]) -> str:
        return _path_value(placed, match.group(1), layout)

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
    # One parse of the whole URL, the same result as the per-component copy above (the authority
    # is httpx2's own normalized form, the raw path has no '#', so the first '?' splits the query).
    # Only bindings without a ``_Wire`` come here; the others skip the parse (``_fast_url``).
    return httpx2.URL(prefix + raw)


_NORMAL_PATH = re.compile(r"/(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/]|%[0-9A-Fa-f]{2})*")
"""A path httpx2's parser leaves exactly as it is: unreserved characters, sub-delimiters, ``:@/``
and well-formed ``%XX`` escapes only (it would escape anything else)."""
_NORMAL_QUERY = re.compile(r"(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/?]|%[0-9A-Fa-f]{2})*")
_DOT_SEGMENT = re.compile(r"/\.\.?(?:/|$)")
_URL_PARTS = ("scheme", "userinfo", "host", "port", "path", "query", "fragment")


def _fast_url(wire: _Wire, path: str, query: str) -> httpx2.URL | None:
    """The URL ``path`` and ``query`` (already escaped, and normal but for dot segments) make on a
    ``_Wire``'s base authority, made without parsing it again; None when it must be parsed.

    httpx2's parse of the whole URL (validation, the host's IP address parse, two escaping passes)
    was most of the cost of building a request; its parse result is a named tuple of the URL's
    normalized parts, which for such a path and query are the base's scheme, userinfo, host and
    port with them. ``test_request.py`` checks the two agree."""
    parts = wire.url_parts
    if parts is None or len(path) + len(query) + bool(query) > _FAST_URL_LIMIT or _DOT_SEGMENT.search(path):
        return None
    make, scheme, userinfo, host, port = parts
    url = httpx2.URL.__new__(httpx2.URL)
    url._uri_reference = make(scheme, userinfo, host, port, path, query or None, None)
    return url


def _url_parts(base: httpx2.URL) -> tuple[Any, str, str, str, int | None] | None:
    """The parse result's type and the base's scheme, userinfo, host and port, to make the parse
    result of a URL on the same authority; None for another httpx2 than this was written against."""
    reference = getattr(base, "_uri_reference", None)
    if reference is None or getattr(reference, "_fields", None) != _URL_PARTS:
        return None
    return type(reference), reference.scheme, reference.userinfo, reference.host, reference.port


@lru_cache(maxsize=256)
def _base(base_url: str) -> tuple[httpx2.URL, str, str, str]:
    """A connector's base URL parsed once: the URL, its ``scheme://authority``, its path without a
    trailing slash, and its query."""
    try:
        base = httpx2.URL(base_url)
    except httpx2.InvalidURL:
        base = None
    if base is None or base.scheme not in ("http", "https") or not base.host:
        # The manifest's base_url is checked when it loads; this one came from the description.
        raise UpstreamError(
            "connector_error",
            "The connector's base URL is not an absolute http(s) URL; the operator must set base_url in the "
            "manifest to the API's http(s) address.",
            sent=False,
        )
    base_path, _, base_query = base.raw_path.decode("ascii").partition("?")
    prefix = str(base.copy_with(raw_path=b"", fragment=None))
    return base, prefix, base_path.rstrip("/"), base_query


def decoded_path(text: str) -> str:
    """``text`` as a server on the way may read it: percent-decoded up to three times (some stacks
    decode more than once), then NFKC-folded (full-width and compatibility forms such as ``．`` and
    ``／`` become ASCII).

    Raises:
        ValueError: the decoded bytes are not UTF-8 (overlong forms of ``.`` and ``/`` that old
            decoders accept, ``%c0%ae``); the message says so.
    """
    raw = text.encode("utf-8", "surrogatepass")
    for _ in range(3):
        once = unquote_to_bytes(raw)
        if once == raw:
            break
        raw = once
    try:
        decoded = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("the path is not valid UTF-8 once percent-decoded (overlong forms are refused)") from None
    return unicodedata.normalize("NFKC", decoded)


def dot_segment(segment: str, *, single: bool = False) -> bool:
    """Whether a decoded path segment climbs (or, with ``single``, stays) like ``..`` (``.``): cut at
    ``;`` (Tomcat and Spring strip ``;params``, so ``..;`` is ``..``) and stripped of trailing spaces
    (Windows servers drop trailing dots and spaces), it is dots and nothing else."""
    bare = segment.split(";", 1)[0].rstrip(" \t")
    return bool(bare) and set(bare) == {"."} and (single or len(bare) >= 2)


_SEPARATORS = re.compile(r"[/\\]")


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
    if "." in text or "%" in text or not text.isascii():  # what can spell a dot segment once decoded
        _no_dot_segments(name, text)
    return escaped(text)


def _no_dot_segments(name: str, text: str) -> None:
    """Refuse a path value holding a ``.`` or ``..`` segment in any spelling: the value goes out as
    one escaped segment (``..%2F..%2Fadmin``), but servers and proxies that decode ``%2F`` before
    routing would climb out of the action's endpoint."""
    try:
        decoded = decoded_path(text)
    except ValueError as exc:
        raise ArgumentError(
            f"path argument {name!r} is refused: {exc}", errors=[{"field": name, "message": str(exc)}]
        ) from None
    if any(dot_segment(segment, single=True) for segment in _SEPARATORS.split(decoded)):
        raise ArgumentError(
            f"path argument {name!r} cannot hold '.' or '..' path segments (also percent-encoded or "
            "full-width): it would reach another endpoint than this action's; pass the actual identifier",
            errors=[{"field": name, "message": "contains a '.' or '..' path segment"}],
        )


def _query_string(items: Iterable[tuple[ParamSpec, Any]]) -> str:
    return "&".join(part for spec, value in items if value is not None for part in query_parts(spec, value))


# -- headers and cookies ---------------------------------------------------------------------


def _headers(placed: _Placed, static_headers: Mapping[str, str]) -> httpx2.Headers:
    headers = _defaults(static_headers)
    for name, text in _header_arguments(placed):
        headers[name] = text
    _add_cookies(headers, placed)
    return headers


def _defaults(static_headers: Mapping[str, str]) -> httpx2.Headers:
    headers = httpx2.Headers({"User-Agent": USER_AGENT, "Accept": DEFAULT_ACCEPT})
    for name, value in static_headers.items():
        headers[name] = value
    return headers


def _header_arguments(placed: _Placed) -> list[tuple[str, str]]:
    """Header arguments as (wire name, text), each checked."""
    out: list[tuple[str, str]] = []
    for spec, value in placed.header:
        if value is None:
            continue
        if spec.on_wire.lower() in _FRAMING_HEADERS:
            raise ArgumentError(
                f"header argument {spec.name!r} cannot set {spec.on_wire}",
                errors=[{"field": spec.name, "message": "framing header"}],
            )
        if rerouting(spec.on_wire):
            raise ArgumentError(
                f"header argument {spec.name!r} cannot set {spec.on_wire}: servers on the way read it as another "
                "method, URL or client than this action's; leave it out",
                errors=[{"field": spec.name, "message": "method, URL or client override header"}],
            )
        text = header_text(spec, value)
        if any(c in text for c in "\r\n\0"):
            raise ArgumentError(
                f"header argument {spec.name!r} must not contain line breaks or NUL",
                errors=[{"field": spec.name, "message": "contains CR, LF or NUL"}],
            )
        out.append((spec.on_wire, text))  # non-ASCII goes out as UTF-8 (httpx2.Headers' own choice)
    return out


def _add_cookies(headers: httpx2.Headers, placed: _Placed) -> None:
    cookies = [f"{spec.on_wire}={_cookie_value(spec, value)}" for spec, value in placed.cookie if value is not None]
    if cookies:
        existing = headers.get("cookie")
        headers["Cookie"] = "; ".join([existing, *cookies] if existing else cookies)


def _cookie_value(spec: ParamSpec, value: Any) -> str:
    return quote(cookie_text(spec, value), safe=_COOKIE_SAFE)


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
        return value.encode("utf-8"), binding.body_type or "text/plain; charset=utf-8"
    if binding.body == "multipart":
        return multipart_body(action, _layout(binding).body_specs, value)
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


def encode_form(value: Mapping[str, Any]) -> str:
    """Stripe-style nesting: ``a[b]=1`` for objects, ``a[0]=x`` for arrays; null is left out.
    Brackets stay literal (readable, and what Stripe documents); everything else is form-escaped."""
    return "&".join(
        f"{quote_plus(str(key) + ''.join(f'[{sub}]' for sub in keys), safe='[]')}={quote_plus(text)}"
        for key, item in value.items()
        for keys, text in nested_leaves(item)
    )
