"""Postman collections (v2.1, and v2.0 which differs only in how ``auth`` is spelled) to actions.

One action per request item, found by walking folders recursively. The rules (the same text is
in docs/manifest.md):

* **Path**: each enclosing folder's name, then the request's name, each snake_cased like OpenAPI
  operation ids, joined by ``.`` (``Articles`` / ``Create Article`` -> ``articles.create_article``).
  A request without a usable name is named from its method and URL; a name that starts with a
  digit gets an ``n`` prefix; a repeated name gets ``_2``, ``_3`` in collection order.
* **URL**: the part before the first path segment (scheme, host and port, or the ``{{variable}}``
  standing for them) is replaced by the connector's ``base_url``, so credentials only ever go
  to the origin the operator configured. When requests name a literal host, or a host variable
  the collection defines, the most common such origin is the connector's default ``base_url``;
  a request aimed at another origin says so in its description.
* **Arguments**: ``:name`` path segments, ``{{variables}}`` and ``<placeholder>`` values in the
  path, query, headers and body become arguments. A path variable is named by the variable;
  query, header and body values are named by their key (``?author={{USERNAME}}`` -> ``author``).
  A ``{{variable}}`` the collection defines, and any literal value, becomes the argument's
  ``default`` and is sent when the agent omits it (null leaves it out), so a bare call replays
  the collection; an undefined ``{{variable}}`` makes the argument required; a
  ``<placeholder>`` makes it optional; a disabled query or body entry is an optional argument
  without a default. A path segment of
  digits only (an example id) becomes an argument ``<segment before it, singular>_id`` whose
  default is that id. A path segment ``{name}`` (or URL-encoded, ``%7Bname%7D``: an
  OpenAPI-style template the collection kept) is a required argument ``name``. Literal headers
  are sent as they are, except those servers on the way read as another method, URL or client
  (``X-HTTP-Method-Override``, ``X-Original-URL``, ``X-Forwarded-*``: ``primitives.rerouting``),
  which are left out with a warning naming each: policy judges the request by its own method.
* **Bodies**: a raw JSON object's top-level fields become arguments (nested objects and arrays
  are one argument each, their shape from the example); other raw JSON, and raw text, is one
  ``body`` argument; ``urlencoded`` entries are form fields; ``formdata`` entries are multipart
  parts (a file entry takes ``{content, filename?, content_type?}``); a ``graphql`` body is the
  JSON ``{query, variables}``: the collection's document is fixed (``const``; only its variables
  are arguments) and a document of queries only is a ``read``; an empty one takes any document.
* **Credentials are never taken from a collection**: ``Authorization`` and other credential
  headers, the parameter an ``apikey`` auth names, and any header, query or body entry whose key
  or ``{{variable}}`` names a credential (``token``, ``api_key``, ``client_secret``, ``password``
  …) are dropped, never becoming an argument or a default; the connector's own ``auth`` is
  applied server-side instead. Request, folder and collection ``auth`` (inherited in that order)
  only decide what is dropped and what the description says.

Pre-request and test scripts, environments and saved responses are ignored.
"""

from __future__ import annotations

import logging
import ssl
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio.to_thread
import httpx2

from ..manifest import ConnectorConfig
from ..manifest import auth_headers as headers_written_by
from ..primitives.escapes import escaped
from ..primitives.rerouting import header_name, rerouting
from ..primitives.url_secrets import shown_url
from ..vocabulary.errors import SourceError
from ..vocabulary.model import Action, PostmanBinding, Risk, risk_of_method
from ._declared_base import declared_base_problem, unusable_base_error
from ._documents import document_trust, fetch_document, is_url, read_document
from ._fingerprint import file_fingerprint, reuse
from ._naming import snake_case, unique_name
from ._param_styles import FILE_PART
from ._postman_request import Arguments, Url, graphql_kind, path_template, text_of
from ._postman_values import PostmanVars, credential_name, is_placeholder, json_body_fields
from .base import LoadContext, Normalized
from .openapi import action_path, legacy_action_path

__all__ = ["NormalizedCollection", "PostmanLoader", "load_postman", "normalize_postman"]

logger = logging.getLogger(__name__)

_KIND = "Postman collection"

_MAX_SUMMARY = 300
_FRAMING_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection"})
_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH", "DELETE"})


@dataclass(frozen=True)
class NormalizedCollection:
    actions: list[Action]
    base_url: str | None
    """The most common origin the requests name (a literal host or a defined host variable)."""
    files: list[str]
    title: str
    base_url_problem: str | None = None
    """Why the most common origin cannot be used (then ``base_url`` is None), as a load error."""


async def load_postman(
    ref: str,
    *,
    connector: str,
    risk_overrides: Mapping[str, Risk] = {},
    auth_type: str = "none",
    auth_headers: frozenset[str] = frozenset(),
    client: httpx2.AsyncClient | None = None,
    verify: ssl.SSLContext | None = None,
) -> NormalizedCollection:
    """Read a collection from a file path or an http(s) URL and normalize it (in a worker thread).

    Args:
        auth_type: the connector's auth kind, named in descriptions.
        auth_headers: lower-cased header names the connector's auth writes; dropped like
            ``Authorization``.
        verify: the trust a collection is fetched with (``document_trust``), else the system's store.

    Raises:
        SourceError: the collection cannot be read, or is not a Postman v2 collection.
    """
    if is_url(ref):
        document, label = await fetch_document(ref, client, kind=_KIND, verify=verify), shown_url(ref)
    else:
        document, label = await anyio.to_thread.run_sync(_read_local, ref)
    files = [] if is_url(ref) else [label]
    return await anyio.to_thread.run_sync(
        lambda: normalize_postman(
            document,
            connector=connector,
            label=label,
            files=files,
            risk_overrides=risk_overrides,
            auth_type=auth_type,
            auth_headers=auth_headers,
        )
    )


def _read_local(ref: str) -> tuple[Any, str]:
    path = Path(ref).absolute()
    return read_document(path, kind=_KIND), str(path)


@dataclass(frozen=True)
class PostmanLoader:
    """``source: {postman: <file or URL>}`` as a ``Source``; the connector's auth shapes the actions
    (the headers it writes are dropped from them), so it is part of the fingerprint."""

    ref: str

    async def load(self, cfg: ConnectorConfig, ctx: LoadContext) -> Normalized:
        resolved = ctx.resolve(self.ref)
        reused = await reuse(cfg, ctx.cached, resolved)
        if reused is not None:
            return reused
        collection = await load_postman(
            resolved,
            connector=cfg.slug,
            risk_overrides=cfg.risk,
            auth_type=cfg.auth.type,
            auth_headers=headers_written_by(cfg.auth),
            verify=document_trust(ctx.resolve(cfg.ca_file), cfg.ca_file) if cfg.ca_file and is_url(resolved) else None,
        )
        if collection.base_url_problem and not cfg.base_url:
            raise SourceError(collection.base_url_problem)
        fingerprint = await file_fingerprint(cfg, collection.files, fallback="url")
        return Normalized(collection.actions, collection.base_url, fingerprint, collection.files)


def normalize_postman(
    document: Any,
    *,
    connector: str,
    label: str = "<collection>",
    files: list[str] | None = None,
    risk_overrides: Mapping[str, Risk] = {},
    auth_type: str = "none",
    auth_headers: frozenset[str] = frozenset(),
) -> NormalizedCollection:
    """Normalize an already-parsed collection (rules in the module docstring).

    Raises:
        SourceError: not a Postman v2 collection.
    """
    info, items = _check(document, label)
    ctx = _Context(
        connector=connector,
        variables=PostmanVars.from_collection(document.get("variable")),
        risk_overrides=risk_overrides,
        auth_type=auth_type,
        drop_headers=frozenset(h.lower() for h in auth_headers),
    )
    _walk(ctx, items, (), _auth_of(document.get("auth")))
    for where in ctx.rerouting:
        logger.warning(
            "connector %s: header %s is left out: servers on the way read it as another method, URL or client "
            "than the request's",
            connector,
            escaped(where[:600]),
        )
    for where in ctx.unnamed:
        logger.warning(
            "connector %s: header %s is left out: it is no header name (RFC 9110 allows no space, quote, comma, "
            "';' or other separator in one), so no request could carry it",
            connector,
            escaped(where[:600]),
        )
    origins = Counter(o for o in ctx.origins if o)
    base_url = origins.most_common(1)[0][0] if origins else None
    problem = declared_base_problem(base_url) if base_url else None
    return NormalizedCollection(
        actions=[_finish(ctx, draft, origins) for draft in ctx.drafts],
        base_url=None if problem else base_url,
        files=files or [],
        title=str(info.get("name") or "").strip(),
        base_url_problem=problem
        and unusable_base_error(label, problem.replace("its server URL", "its requests' host")),
    )


def _check(document: Any, label: str) -> tuple[dict[str, Any], list[Any]]:
    if not isinstance(document, dict):
        raise SourceError(f"{label}: a Postman collection is a JSON object; this file holds something else.")
    if "requests" in document and "order" in document:
        raise SourceError(
            f"{label}: this is a Postman v1 collection; export it again as Collection v2.1 (Postman: Export)."
        )
    info = document.get("info")
    items = document.get("item")
    if not isinstance(info, dict) or not isinstance(items, list):
        raise SourceError(
            f"{label}: not a Postman collection (it needs 'info' and an 'item' list). "
            "Point the source at a collection exported as v2.1."
        )
    schema = str(info.get("schema") or "")
    if schema and "/v2." not in schema:
        raise SourceError(f"{label}: collection schema {schema!r} is not v2.0 or v2.1; export it again as v2.1.")
    return info, items


# -- walking the tree -------------------------------------------------------------------------


@dataclass(frozen=True)
class _Auth:
    """What a collection says about auth, without ever holding its values."""

    type: str
    apikey_name: str | None = None
    apikey_in: str = "header"


@dataclass
class _Draft:
    """One request, read; finished into an Action once every origin is known."""

    path: str
    method: str
    summary: str
    description: str
    origin: str | None
    notes: list[str]
    args: Arguments
    url: str
    headers: tuple[tuple[str, str], ...]
    aliases: tuple[str, ...] = ()


@dataclass
class _Context:
    connector: str
    variables: PostmanVars
    risk_overrides: Mapping[str, Risk]
    auth_type: str
    drop_headers: frozenset[str]
    taken: set[str] = field(default_factory=set)
    drafts: list[_Draft] = field(default_factory=list)
    origins: list[str | None] = field(default_factory=list)
    rerouting: list[str] = field(default_factory=list)
    """``<header> of <request>`` for each header left out as rerouting, for the load's warnings."""
    unnamed: list[str] = field(default_factory=list)
    """``<key> of <request>`` for each header left out because its key is no header name."""


def _auth_of(raw: Any) -> _Auth | None:
    if not isinstance(raw, dict) or not isinstance(raw.get("type"), str):
        return None
    kind = raw["type"]
    if kind != "apikey":
        return _Auth(kind)
    # Only the parameter's name and place are read; its value is a credential and stays unread.
    settings = raw.get("apikey")
    pairs: dict[str, Any] = {}
    if isinstance(settings, list):  # v2.1: [{key, value}]
        wanted = [e for e in settings if isinstance(e, dict) and e.get("key") in ("key", "in")]
        pairs = {e["key"]: e.get("value") for e in wanted}
    elif isinstance(settings, dict):  # v2.0: {key, value, in}
        pairs = {k: settings.get(k) for k in ("key", "in")}
    name = pairs.get("key") if isinstance(pairs.get("key"), str) else "X-API-Key"
    where = "query" if pairs.get("in") == "query" else "header"
    return _Auth("apikey", apikey_name=name, apikey_in=where)


def _walk(
    ctx: _Context,
    items: list[Any],
    folders: tuple[str, ...],
    inherited: _Auth | None,
    former: tuple[str, ...] = (),
) -> None:
    """``former``: the folders' names as the previous release spelled them (``snake_case(former=True)``)."""
    for item in items:
        if not isinstance(item, dict):
            continue
        auth = _auth_of(item.get("auth")) or inherited
        if isinstance(item.get("item"), list):
            text = str(item.get("name") or "")
            name = snake_case(text) or "folder"
            _walk(ctx, item["item"], (*folders, name), auth, (*former, snake_case(text, former=True) or "folder"))
        elif "request" in item:
            request = item["request"]
            if isinstance(request, str):  # v2.1 allows a bare URL for a GET
                request = {"method": "GET", "url": request}
            if isinstance(request, dict):
                _request(ctx, item, request, folders, _auth_of(request.get("auth")) or auth, former)


def _request(
    ctx: _Context,
    item: dict[str, Any],
    request: dict[str, Any],
    folders: tuple[str, ...],
    auth: _Auth | None,
    former: tuple[str, ...],
) -> None:
    method = str(request.get("method") or "GET").upper()
    if method not in _METHODS:
        method = "GET" if not method.isalpha() else method
    notes: list[str] = []
    args = Arguments(ctx.variables)
    url = Url.read(request.get("url"), ctx.variables)
    template = path_template(url, args)
    dropped: list[str] = []
    apikey = auth.apikey_name if auth is not None and auth.type == "apikey" else None
    for entry in url.query:
        key = entry.get("key")
        if not isinstance(key, str) or not key:
            continue
        if _is_credential(key, entry.get("value"), ctx.variables) or (apikey and key == apikey):
            dropped.append(f"{key} (query)")
            continue
        args.add_text(key, "query", entry.get("value"), disabled=entry.get("disabled") is True, about=entry)
    rerouted: list[str] = []
    unnamed: list[str] = []
    headers = _headers(ctx, request.get("header"), args, apikey, dropped, rerouted, unnamed)
    body = request.get("body")
    if isinstance(body, dict) and body.get("disabled") is not True:
        headers = _body(body, headers, args, ctx.variables, dropped)
    name = str(item.get("name") or "").strip()
    leaf = snake_case(name) or action_path(None, method, template)
    path = ".".join((*folders, leaf))
    path = unique_name(f"n{path}" if path[0].isdigit() else path, ctx.taken)
    legacy = None if snake_case(name) else legacy_action_path(None, method, template)
    aliases = (".".join((*folders, legacy)),) if legacy is not None else ()
    # Names with an apostrophe were split at it before (``get_a_file_s_lock``): they keep resolving.
    spelled = ".".join((*former, snake_case(name, former=True) or leaf))
    aliases += (spelled,) if spelled != path and legacy is None else ()
    if auth is not None and auth.type not in ("noauth", "inherit"):
        notes.append(
            f"The collection authenticates this request with {auth.type}; the gateway applies the connector's "
            f"{ctx.auth_type} credential instead."
        )
    elif auth is not None and auth.type == "noauth" and ctx.auth_type != "none":
        notes.append(
            f"The collection sends this request without auth; the gateway still applies the connector's "
            f"{ctx.auth_type} credential."
        )
    if rerouted:
        ctx.rerouting += [f"{key!r} of {method} {url.display_path} ({name or 'unnamed'})" for key in rerouted]
        notes.append(
            "Left out because servers on the way read them as another method, URL or client: "
            + ", ".join(rerouted)
            + "."
        )
    if unnamed:
        ctx.unnamed += [f"{key!r} of {method} {url.display_path} ({name or 'unnamed'})" for key in unnamed]
        notes.append(f"{len(unnamed)} collection header(s) left out: their keys are no header names.")
    if [d for d in dropped if d != "Authorization (header)"]:
        # A dropped Authorization header is the normal case; other drops tell the agent a field is missing.
        notes.append(
            "Left out as credentials (the connector's auth supplies what the API needs): " + ", ".join(dropped) + "."
        )
    ctx.origins.append(url.origin)
    ctx.drafts.append(
        _Draft(
            path=path,
            method=method,
            summary=_summary(name, method, url.display_path),
            description=text_of(request.get("description") or item.get("description")),
            origin=url.origin,
            notes=notes,
            args=args,
            url=template,
            headers=headers,
            aliases=tuple(alias for alias in aliases if alias != path),
        )
    )


def _finish(ctx: _Context, draft: _Draft, origins: Counter[str]) -> Action:
    notes = list(draft.notes)
    main = origins.most_common(1)[0][0] if origins else None
    if draft.origin and main and draft.origin != main:
        notes.insert(
            0, f"The collection sends this to {draft.origin}; the gateway sends it to the connector's base_url."
        )
    if draft.args.defaults:
        notes.append(
            "Arguments you omit are sent with their default (the collection's value); pass null to leave one out."
        )
    description = "\n\n".join(p for p in (draft.description, " ".join(notes)) if p)
    return Action(
        connector=ctx.connector,
        path=draft.path,
        summary=draft.summary,
        description=description,
        input_schema=draft.args.input_schema(),
        risk=_risk(ctx, draft),
        binding=PostmanBinding(
            method=draft.method,
            url=draft.url,
            params=tuple(draft.args.specs),
            body=draft.args.body_kind,
            body_param=draft.args.body_param,
            headers=draft.headers,
        ),
        group=" / ".join(draft.path.split(".")[:-1]),  # the folder path
        aliases=draft.aliases,
    )


def _risk(ctx: _Context, draft: _Draft) -> Risk:
    """The manifest's override, under the action's path or a name it had earlier, else a fixed GraphQL
    document's (a query reads whatever the method), else the method's."""
    for name in (draft.path, *draft.aliases):
        if name in ctx.risk_overrides:
            return ctx.risk_overrides[name]
    if draft.args.graphql_kind is not None:
        return draft.args.graphql_kind
    return risk_of_method(draft.method)


def _summary(name: str, method: str, path: str) -> str:
    line = " ".join(name.split()) or f"{method} {path}"
    return line if len(line) <= _MAX_SUMMARY else line[: _MAX_SUMMARY - 1].rstrip() + "…"


def _is_credential(key: str, value: Any, variables: PostmanVars) -> bool:
    return credential_name(key) or any(credential_name(v) for v in variables.names_in(value))


# -- headers and bodies -----------------------------------------------------------------------


def _headers(
    ctx: _Context,
    raw: Any,
    args: Arguments,
    apikey: str | None,
    dropped: list[str],
    rerouted: list[str],
    unnamed: list[str],
) -> tuple[tuple[str, str], ...]:
    fixed: list[tuple[str, str]] = []
    for entry in raw if isinstance(raw, list) else ():
        if not isinstance(entry, dict) or entry.get("disabled") is True:
            continue
        key, value = entry.get("key"), entry.get("value")
        if not isinstance(key, str) or not key.strip():
            continue
        lowered = key.strip().lower()
        if lowered in _FRAMING_HEADERS:
            continue
        if not header_name(key.strip()):
            unnamed.append(key.strip())
            continue
        if rerouting(lowered):
            rerouted.append(key.strip())
            continue
        if (
            credential_name(key)
            or lowered in ctx.drop_headers
            or (apikey is not None and lowered == apikey.lower())
            or any(credential_name(v) for v in ctx.variables.names_in(value))
        ):
            dropped.append(f"{key} (header)")
            continue
        text = "" if value is None else str(value)
        resolved = ctx.variables.resolve(text)
        if resolved is not None and not is_placeholder(resolved) and "\n" not in resolved and "\r" not in resolved:
            fixed.append((key.strip(), resolved))
        else:
            args.add_text(key.strip(), "header", value, disabled=False, about=entry)
    return tuple(fixed)


def _body(
    body: dict[str, Any],
    headers: tuple[tuple[str, str], ...],
    args: Arguments,
    variables: PostmanVars,
    dropped: list[str],
) -> tuple[tuple[str, str], ...]:
    """Adds the body's arguments; returns the headers, less a Content-Type the encoder must set."""
    mode = body.get("mode")
    content_type = next((v for k, v in headers if k.lower() == "content-type"), "")
    if mode == "raw":
        raw = body.get("raw")
        if not isinstance(raw, str) or not raw.strip():
            return headers
        language = ((body.get("options") or {}).get("raw") or {}).get("language")
        fields = json_body_fields(raw, variables) if language in (None, "json") or "json" in content_type else None
        if isinstance(fields, dict):
            for key, (schema, required, default) in fields.items():
                if credential_name(key):
                    dropped.append(f"{key} (body)")
                    continue
                args.add_body(key, schema, required=required, default=default)
            args.encoding = "json"
        elif fields is not None:
            schema, required, default = fields
            args.add_whole_body(schema, required=required, default=default, encoding="json")
        else:
            text = variables.resolve(raw)
            schema = {"type": "string", "description": "The raw request body, sent as is."}
            if text is None:
                schema["description"] += " The collection's template: " + raw[:500]
            args.add_whole_body(schema, required=text is None, default=text, encoding="raw")
        return headers
    if mode in ("urlencoded", "formdata"):
        entries = body.get(mode)
        for entry in entries if isinstance(entries, list) else ():
            if not isinstance(entry, dict) or not isinstance(entry.get("key"), str) or not entry["key"]:
                continue
            key = entry["key"]
            if _is_credential(key, entry.get("value"), variables):
                dropped.append(f"{key} (body)")
                continue
            if entry.get("type") == "file":
                args.add_body(key, FILE_PART, required=False, default=None)
            else:
                args.add_text(key, "body", entry.get("value"), disabled=entry.get("disabled") is True, about=entry)
        args.encoding = "form" if mode == "urlencoded" else "multipart"
        if mode == "formdata":
            # The multipart encoder writes Content-Type with its boundary; a literal one would lack it.
            headers = tuple((k, v) for k, v in headers if k.lower() != "content-type")
        return headers
    if mode == "graphql":
        given = body.get("graphql")
        spec: dict[str, Any] = given if isinstance(given, dict) else {}
        given_query = spec.get("query")
        query = given_query if isinstance(given_query, str) else ""
        query_schema: dict[str, Any] = {"type": "string", "description": "The GraphQL document."}
        if query.strip():
            # The collection's document is the request: an agent passes its variables, never another
            # document (a "Get User" that took any text would run a mutation under a read's name and rules).
            query_schema["const"] = query
            query_schema["description"] = "The collection's GraphQL document, sent as is: " + query[:500]
            args.graphql_kind = graphql_kind(query)
        args.add_body("query", query_schema, required=not query, default=query or None)
        variables_text = spec.get("variables")
        variables_schema: dict[str, Any] = {"type": "object", "description": "The GraphQL variables."}
        example: dict[str, Any] | None = None
        unresolved: list[str] = []
        if isinstance(variables_text, str) and variables_text.strip():
            # Read as a raw JSON body is: ``{"a": {{amt}}}`` is no JSON until its variables are filled in.
            fields = json_body_fields(variables_text, variables)
            if isinstance(fields, dict):
                unresolved = [key for key, (_, required, _) in fields.items() if required]
                if unresolved:  # what no collection variable fills in, the agent gives
                    variables_schema["properties"] = {key: schema for key, (schema, _, _) in fields.items()}
                    variables_schema["required"] = unresolved
                else:
                    example = {key: default for key, (_, _, default) in fields.items()}
        args.add_body("variables", variables_schema, required=bool(unresolved), default=example)
        args.encoding = "json"
        return headers
    if mode == "file":
        args.add_whole_body(
            {"type": "string", "description": "The request body (the collection uploads a file here)."},
            required=True,
            default=None,
            encoding="raw",
        )
    return headers
