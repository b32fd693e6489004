"""OpenAPI 3.0 / 3.1 and Swagger 2.0 documents to ``model.Action``s.

One action per operation (get/put/post/delete/options/head/patch/trace under ``paths``). Its
``input_schema`` is one flat JSON Schema object: every parameter is a property, and the
properties of an object request body are merged in beside them; the ``OpenAPIBinding`` records
where each argument goes on the wire. Credential parameters are not arguments: the gateway
injects the credential server-side. They are an ``apiKey`` scheme's parameter, a header named
``Authorization``, whatever the connector's ``auth`` writes (its header, its api_key parameter),
and the names the source's ``credential_params`` lists, in any location but the path (Slack
declares its ``token`` in the query, a header or the form of most methods). A header parameter
that servers on the way read as another method, URL or client (``X-HTTP-Method-Override``,
``X-Forwarded-For``: ``primitives.rerouting``) is left out with a warning naming it.

Action path naming (deterministic; the same text is in docs/manifest.md):

* With an ``operationId``: split it on ``/``; convert each part to snake_case (camelCase and
  PascalCase words are split, an acronym is one word, ``-``, spaces and any other punctuation become
  ``_``, the result is lowercased and repeated ``_`` collapsed); join the parts with ``.``.
  ``issues/create`` -> ``issues.create``, ``repos/get-content`` -> ``repos.get_content``,
  ``addPet`` -> ``add_pet``, ``GetCustomersCustomer`` -> ``get_customers_customer``,
  ``chat_postMessage`` -> ``chat_post_message``, ``listRedirectURLs`` -> ``list_redirect_urls``.
* Without one: verb first, then the resource (``_naming.rest_path``): ``GET /pet/{petId}`` ->
  ``get_pet``, ``GET /deployments/{id}/builds`` -> ``list_deployment_builds``; an RPC-style method
  as its API writes it, ``POST /api/v1/chat.postMessage`` -> ``chat_post_message`` (its dotted
  ``chat.post_message`` kept in ``Action.aliases``). A GET on a URL another path extends with a
  ``{param}`` lists (``GET /setup/flow`` -> ``list_setup_flows``). The names earlier releases gave it
  (``pet.by_pet_id.get``, ``get_setup_flow_2``) are kept in ``Action.aliases``, but one another
  action now holds.
* An ``operationId`` that is a database id or a UUID (``547636a6f918230da8553640``) is none.
* An ``operationId`` several operations share (given twice, or one handler's name under FastAPI's
  URL-and-method ending) names none of them: each gets the name above.
* An ``operationId`` that only spells out its method and whole URL (``post-api-v1-chat.delete``) is
  none (``_naming.restates_url``); one opening with the method and the URL's version segments loses
  them (``post-api-v1-im.close`` -> ``im_close``), and so do Spring's and FastAPI's generated endings
  (``getUserUsingGET`` -> ``get_user``, ``read_item_items__item_id__get`` -> ``read_item``:
  ``_naming.without_scaffolding``). Its own spelling stays an alias.
* A name that starts with a digit gets an ``n`` prefix. When two operations get the same name,
  the later ones in document order get ``_2``, ``_3`` ... appended.
  Every name matches ``^[a-z0-9_]+(\\.[a-z0-9_]+)*$``.

Argument naming: a parameter keeps its name when it is an identifier (``petId``, ``per_page``);
otherwise it is lowercased with runs of other characters turned into ``_`` (``X-Request-Id`` ->
``x_request_id``) and the binding keeps the wire name. A second parameter with the same argument
name becomes ``<in>_<name>``; a body property that collides with a parameter becomes
``body_<name>``. A body that is not an object with properties is one argument, ``body``
(``binding.body_param``); an object body that admits nothing (no properties and
``additionalProperties: false``) adds no argument. ``binding.body`` is ``none`` exactly when no
argument goes to the body.
"""

from __future__ import annotations

import logging
import re
import ssl
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urljoin, urlsplit

import anyio.to_thread
import httpx2

from ..manifest import AuthConfig, ConnectorConfig, auth_params
from ..policy.review import origin_of
from ..primitives.escapes import escaped
from ..primitives.rerouting import header_name, rerouting
from ..primitives.url_secrets import shown_url
from ..vocabulary.errors import SourceError
from ..vocabulary.model import Action, OpenAPIBinding, ParamLocation, ParamSpec, Risk, risk_of_method
from ._declared_base import declared_base_problem, unusable_base_error
from ._documents import document_trust, fetch_document, is_url, read_document
from ._fingerprint import file_fingerprint, reuse
from ._naming import (
    HTTP_METHODS,
    legacy_rest_path,
    rest_path,
    restates_url,
    rpc_spelling,
    snake_case,
    unique_name,
    without_scaffolding,
)
from ._param_styles import Written, file_field_schema, form_field_style, multipart_field, param_style
from ._refs import Dialect, RefError, Resolver, SchemaInliner
from .base import LoadContext, Normalized

__all__ = [
    "HTTP_METHODS",
    "PATH_RE",
    "NormalizedSource",
    "OpenAPILoader",
    "action_path",
    "arg_name",
    "credential_places",
    "declared_base_url",
    "legacy_action_path",
    "load_openapi",
    "normalize_openapi",
    "snake_case",
]

PATH_RE = re.compile(r"^[a-z0-9_]+(\.[a-z0-9_]+)*$")

_MAX_SUMMARY = 300
_MAX_DESCRIPTION = 2000
logger = logging.getLogger(__name__)

_MAX_FETCH_ROUNDS = 8  # remote refs that lead to more remote refs: stop somewhere


@dataclass(frozen=True)
class NormalizedSource:
    actions: list[Action]
    base_url: str | None
    """``servers[0].url`` (3.x, variables at their defaults) or scheme://host/basePath (2.0); None if unknown."""
    files: list[str]
    """Absolute paths of every local file read, main one first (for change fingerprints); empty for URLs."""
    title: str
    description: str
    """``info.description``'s first paragraph, at most 300 characters."""
    base_url_problem: str | None = None
    """Why the base URL the document declares cannot be used (then ``base_url`` is None), as a load error."""
    left_out: tuple[str, ...] = ()
    """Why each operation that could not be made into an action was left out (logged by the loaders)."""
    warnings: tuple[str, ...] = ()
    """What of an action's description its requests cannot honour, and what they send instead (logged)."""


async def load_openapi(
    ref: str,
    *,
    connector: str,
    risk_overrides: Mapping[str, Risk] = {},
    client: httpx2.AsyncClient | None = None,
    credentials: Collection[tuple[str, str]] = (),
    verify: ssl.SSLContext | None = None,
) -> NormalizedSource:
    """Load an OpenAPI/Swagger document from an absolute file path or an http(s) URL and normalize it.
    ``credentials`` are ``(in, name)`` of parameters that carry the connector's credential, beside
    the ones the document's apiKey schemes name (``credential_places`` makes them from a connector);
    ``verify`` the trust documents are fetched with (``document_trust``), else the system's store.

    Parsing and normalizing run in a worker thread: GitHub's spec takes about a second of CPU
    and the event loop keeps serving meanwhile. Remote documents that refs point at are fetched
    here, then the document is normalized again (refs cannot be fetched from the sync code).

    Raises:
        SourceError: the document cannot be read, parsed or normalized; the message names it.
    """
    if is_url(ref):
        document = await fetch_document(ref, client, verify=verify)
        location = ref.split("#", 1)[0]
    else:
        document, location = await anyio.to_thread.run_sync(_read_local, ref)
    resolver = Resolver(document, location)
    for _ in range(_MAX_FETCH_ROUNDS):
        try:
            result: NormalizedSource | None = await anyio.to_thread.run_sync(
                lambda: _normalize(
                    document, resolver, connector=connector, risk_overrides=risk_overrides, credentials=credentials
                )
            )
        except SourceError:
            if not resolver.pending:
                raise
            result = None
        if not resolver.pending and result is not None:
            _warn_left_out(connector, result)
            return result
        for url in sorted(resolver.pending):
            try:
                resolver.add_document(url, await fetch_document(url, client, origin=origin_of(location), verify=verify))
            except SourceError as exc:
                resolver.add_failure(url, str(exc))
        resolver.pending.clear()
    raise SourceError(
        f"{shown_url(location)}: remote $refs nest more than {_MAX_FETCH_ROUNDS} documents deep; bundle the spec."
    )


def _read_local(ref: str) -> tuple[Any, str]:
    path = Path(ref).absolute()
    return read_document(path), str(path)


@dataclass(frozen=True)
class OpenAPILoader:
    """``source: {openapi: <file or URL>}`` as a ``Source``: a local spec whose files are unchanged
    is not parsed again; a URL is fetched and normalized on every sync."""

    ref: str
    credential_params: tuple[str, ...] = ()

    async def load(self, cfg: ConnectorConfig, ctx: LoadContext) -> Normalized:
        resolved = ctx.resolve(self.ref)
        reused = await reuse(cfg, ctx.cached, resolved)
        if reused is not None:
            return reused
        credentials = credential_places(cfg.auth, self.credential_params)
        verify = document_trust(ctx.resolve(cfg.ca_file), cfg.ca_file) if cfg.ca_file and is_url(resolved) else None
        spec = await load_openapi(
            resolved, connector=cfg.slug, risk_overrides=cfg.risk, credentials=credentials, verify=verify
        )
        if spec.base_url_problem and not cfg.base_url:
            raise SourceError(spec.base_url_problem)
        fingerprint = await file_fingerprint(cfg, spec.files, fallback="url")
        return Normalized(spec.actions, spec.base_url, fingerprint, spec.files)


def normalize_openapi(
    document: dict[str, Any],
    *,
    connector: str,
    source_file: Path | None = None,
    risk_overrides: Mapping[str, Risk] = {},
    credentials: Collection[tuple[str, str]] = (),
) -> NormalizedSource:
    """Normalize an already-parsed document. ``source_file`` anchors relative-file ``$ref``s;
    ``credentials`` as in ``load_openapi``.

    Raises:
        SourceError: not an OpenAPI/Swagger document (an operation whose own ``$ref`` is broken is left out).
    """
    location = str(source_file.absolute()) if source_file is not None else ""
    result = _normalize(
        document,
        Resolver(document, location),
        connector=connector,
        risk_overrides=risk_overrides,
        credentials=credentials,
    )
    _warn_left_out(connector, result)
    return result


def _warn_left_out(connector: str, result: NormalizedSource) -> None:
    for reason in result.left_out:
        logger.warning("connector %s: an operation is left out: %s", connector, escaped(reason[:600]))
    for warning in result.warnings:
        logger.warning("connector %s: %s", connector, escaped(warning[:600]))


def credential_places(auth: AuthConfig, names: Iterable[str] = ()) -> frozenset[tuple[str, str]]:
    """``(in, name)`` of the parameters that carry a connector's credential: where its ``auth``
    writes, and each of ``names`` (the source's ``credential_params``) in every location a
    parameter can have but the path, which the URL cannot do without."""
    places = {(location, name) for name in names for location in ("query", "header", "cookie", "formData")}
    return frozenset(_credential_key(location, name) for location, name in places | auth_params(auth))


# -- naming -----------------------------------------------------------------------------------

_NOT_NAME = re.compile(r"[^a-z0-9]+")
_TEMPLATE_VAR = re.compile(r"\{([^}]*)\}")
_FILLABLE_VAR = re.compile(r"\{([^{}]*)\}")


def _unfillable(url: str) -> bool:
    """Whether a path has a brace that is not one ``{name}`` with a name in it (``{}``, ``{{d}}``, ``{a``)."""
    rest = _FILLABLE_VAR.sub(lambda match: "" if match.group(1).strip() else "{", url)
    return "{" in rest or "}" in rest


_HTML_TAG = re.compile(r"</?[a-zA-Z][^>]*>")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# A database id or a UUID given as an operationId (API Management exports: ``547636a6f918230da8553640``).
_GENERATED_ID = re.compile(r"^\s*(?:[0-9a-fA-F]{16,}|[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12})\s*$")


def action_path(
    operation_id: str | None,
    method: str,
    url: str,
    base_path: str = "",
    *,
    collection: bool = False,
    former: bool = False,
) -> str:
    """The action path of one operation before collisions are resolved (rule in the module docstring).
    ``base_path``: the path of the URL the document's paths are relative to (``/api/v1``), which a
    generated operationId spells out too; it never enters a name the URL makes. ``collection`` and
    ``former`` as in ``rest_path``."""
    parts = _id_parts(operation_id, method, url, base_path)
    name = ".".join(parts) if parts else rest_path(method, url, collection=collection, former=former)
    return f"n{name}" if name[0].isdigit() else name


def legacy_action_path(operation_id: str | None, method: str, url: str, base_path: str = "") -> str | None:
    """The path earlier releases gave an operation named after its method and URL, kept resolving as an
    alias of its verb-first path: ``pet.by_pet_id.get`` without an ``operationId``, the ``operationId``'s
    own spelling when it only restates the URL; None when the operation has a name of its own (its name
    did not change but for acronyms, and those fold to the same key)."""
    parts = [p for p in (snake_case(seg) for seg in operation_id.split("/")) if p] if operation_id else []
    if parts and _id_parts(operation_id, method, url, base_path) == parts:
        return None
    name = ".".join(parts) if parts else legacy_rest_path(method, url)
    return f"n{name}" if name[0].isdigit() else name


def _id_parts(operation_id: str | None, method: str, url: str, base_path: str = "") -> list[str]:
    """The ``operationId``'s parts in snake_case, less what a generator added around its own words
    (``without_scaffolding``); empty when there is none or it only restates the URL (with or without
    the document's base path)."""
    if not operation_id or _GENERATED_ID.match(operation_id):
        return []
    full = base_path.rstrip("/") + url if base_path.strip("/") else url
    if restates_url(operation_id, url) or restates_url(operation_id, full):
        return []
    own = without_scaffolding(operation_id, method, url)
    if own == operation_id and full != url:
        own = without_scaffolding(operation_id, method, full)
    return [p for p in (snake_case(seg) for seg in own.split("/")) if p]


def _base_path(document: dict[str, Any], dialect: Dialect) -> str:
    """The path part of the URL the document's paths are relative to: 2.0's ``basePath``, else its first
    server's (``https://chat.example/api/v1`` -> ``/api/v1``); empty when it names none."""
    if dialect == "2.0":
        base = document.get("basePath")
    else:
        servers = document.get("servers")
        first = servers[0] if isinstance(servers, list) and servers and isinstance(servers[0], dict) else {}
        base = urlsplit(first["url"]).path if isinstance(first.get("url"), str) else None
    return base if isinstance(base, str) else ""


def arg_name(name: str) -> str:
    """An argument name for a wire name (rule in the module docstring)."""
    if _IDENTIFIER.match(name):
        return name
    cleaned = _NOT_NAME.sub("_", name.lower()).strip("_") or "param"
    return f"n{cleaned}" if cleaned[0].isdigit() else cleaned


# -- the document -----------------------------------------------------------------------------


@dataclass
class _Context:
    """What every operation of one document shares."""

    label: str
    dialect: Dialect
    resolver: Resolver
    inliner: SchemaInliner
    credentials: frozenset[tuple[str, str]]
    connector: str
    risk_overrides: Mapping[str, Risk]
    base_path: str = ""
    collections: frozenset[str] = frozenset()
    """URLs (less a trailing slash) that another path of the document extends with a ``{param}``."""
    taken: set[str] = field(default_factory=set)
    former_taken: set[str] = field(default_factory=set)
    consumes: tuple[str, ...] = ()
    """Swagger 2's document-wide ``consumes``: the media types its operations take."""
    warnings: list[str] = field(default_factory=list)
    shared_ids: frozenset[str] = frozenset()
    """``operationId``s whose own words more than one operation shares (one id given twice, against the
    specification, or FastAPI's ``dispatcher_qrcode_sms_post`` and ``dispatcher_qrcode_geo_post``, one
    handler's name): no one's name."""


def _dialect(document: Any, label: str) -> Dialect:
    if not isinstance(document, dict):
        kind = "a list" if isinstance(document, list) else f"a {type(document).__name__}"
        raise SourceError(
            f"{label}: the document is {kind}, not a mapping. An OpenAPI document is a mapping that starts "
            "with 'openapi: 3.x' (or 'swagger: \"2.0\"'); point the source at one."
        )
    version = document.get("openapi")
    if isinstance(version, str) and version.startswith("3."):
        return "3.0" if version.startswith("3.0") else "3.1"
    if str(document.get("swagger", "")) == "2.0":
        return "2.0"
    if version is not None:
        raise SourceError(f"{label}: OpenAPI version {version!r} is not supported; use 3.0, 3.1 or Swagger 2.0.")
    raise SourceError(
        f"{label}: not an OpenAPI or Swagger document (no 'openapi' or 'swagger' field). "
        "Point the source at the API's OpenAPI description."
    )


def _credential_params(document: dict[str, Any], dialect: Dialect, resolver: Resolver) -> frozenset[tuple[str, str]]:
    """``(in, name)`` of every apiKey scheme: those parameters are credentials the gateway injects."""
    if dialect == "2.0":
        schemes = document.get("securityDefinitions")
    else:
        components = document.get("components")
        schemes = components.get("securitySchemes") if isinstance(components, dict) else None
    found: set[tuple[str, str]] = set()
    for raw in (schemes or {}).values() if isinstance(schemes, dict) else ():
        try:
            scheme, _ = resolver.deref(raw, resolver.root_location)
        except RefError:
            continue  # an unusable scheme declares nothing; do not fail the whole spec for it
        if isinstance(scheme, dict) and scheme.get("type") == "apiKey":
            location, name = scheme.get("in"), scheme.get("name")
            if isinstance(location, str) and isinstance(name, str):
                found.add(_credential_key(location, name))
    return frozenset(found)


def _credential_key(location: str, name: str) -> tuple[str, str]:
    return location, name.lower() if location == "header" else name


def _base_url(document: dict[str, Any], dialect: Dialect, origin: str) -> tuple[str | None, str | None]:
    """The base URL the document declares, or None; and why the one it declares cannot be used."""
    if dialect == "2.0":
        host, base_path = document.get("host"), document.get("basePath") or ""
        schemes = document.get("schemes") or []
        if isinstance(host, str) and host:
            scheme = "https" if not schemes or "https" in schemes else "http" if "http" in schemes else str(schemes[0])
            url: str | None = f"{scheme}://{host}{base_path}".rstrip("/")
        else:
            url = base_path or None
    else:
        servers = document.get("servers")
        server = servers[0] if isinstance(servers, list) and servers and isinstance(servers[0], dict) else {}
        url = server.get("url") if isinstance(server.get("url"), str) else None
        variables = server.get("variables") if isinstance(server.get("variables"), dict) else {}
        for name, spec in (variables or {}).items():
            if url and isinstance(spec, dict) and "default" in spec:
                url = url.replace(f"{{{name}}}", str(spec["default"]))
    if not url:
        return None, None
    if is_url(origin) and not urlsplit(url).scheme:  # a relative server URL is relative to where the document is served
        url = urljoin(origin, url)
    elif not urlsplit(url).scheme:
        return None, None  # relative to a file: nowhere; a call says to set base_url
    problem = declared_base_problem(url)
    return (None, problem) if problem else (url.rstrip("/"), None)


def declared_base_url(document: Any, location: str) -> str | None:
    """The base URL ``document`` names (its first ``servers`` entry, or 2.0's host and basePath), a
    relative one resolved against ``location``, the URL it was fetched from; None when it names none
    or one that cannot be used."""
    if not isinstance(document, dict):
        return None
    dialect: Dialect = "2.0" if str(document.get("swagger", "")).startswith("2") else "3.0"
    return _base_url(document, dialect, location)[0]


def _first_paragraph(text: Any, limit: int) -> str:
    if not isinstance(text, str):
        return ""
    paragraph = " ".join(re.split(r"\n\s*\n", text.strip(), maxsplit=1)[0].split())
    return paragraph if len(paragraph) <= limit else paragraph[: limit - 1].rstrip() + "…"


def _normalize(
    document: Any,
    resolver: Resolver,
    *,
    connector: str,
    risk_overrides: Mapping[str, Risk],
    credentials: Collection[tuple[str, str]] = (),
) -> NormalizedSource:
    root = resolver.root_location
    label = (shown_url(root) if is_url(root) else root) or "<document>"
    dialect = _dialect(document, label)
    paths = document.get("paths")
    if not isinstance(paths, dict):
        raise SourceError(
            f"{label}: the document has no 'paths' mapping, so there are no operations to turn into actions. "
            "Check that this is the full API description, not a fragment."
        )
    ctx = _Context(
        label=label,
        dialect=dialect,
        resolver=resolver,
        inliner=SchemaInliner(resolver, dialect),
        credentials=_credential_params(document, dialect, resolver)
        | {_credential_key(location, name) for location, name in credentials},
        connector=connector,
        risk_overrides=risk_overrides,
        base_path=_base_path(document, dialect),
        collections=_collections(str(url) for url in paths),
        consumes=_media_types(document.get("consumes")),
    )
    ctx.shared_ids = _shared_ids(paths, ctx.base_path)
    actions: list[Action] = []
    left_out: list[str] = []
    for url, raw_item in paths.items():
        url = str(url)
        try:
            item, item_base = _deref_top(ctx, raw_item, resolver.root_location, f"path item {url}")
        except SourceError as exc:
            left_out.append(str(exc))
            continue
        if not isinstance(item, dict):
            continue
        for method, operation in item.items():
            if isinstance(method, str) and method.lower() in HTTP_METHODS and isinstance(operation, dict):
                try:
                    actions.append(_action(ctx, url, method.upper(), operation, item, item_base))
                except SourceError as exc:
                    # One operation whose parameter or body cannot be resolved is one action less,
                    # not a connector without any (GitHub's spec has 1,223 operations).
                    left_out.append(str(exc))
    names = {action.path for action in actions}
    actions = [
        action.model_copy(update={"aliases": tuple(a for a in action.aliases if a not in names)})
        if names.intersection(action.aliases)
        else action
        for action in actions
    ]
    info = document.get("info") if isinstance(document.get("info"), dict) else {}
    base_url, base_problem = _base_url(document, dialect, resolver.root_location)
    return NormalizedSource(
        actions=actions,
        base_url=base_url,
        base_url_problem=base_problem and unusable_base_error(label, base_problem),
        left_out=tuple(left_out),
        warnings=tuple(ctx.warnings),
        files=list(resolver.files),
        title=str(info.get("title") or "").strip(),
        description=_first_paragraph(info.get("description"), 300),
    )


def _media_types(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list):
        return ()
    return tuple(m.split(";", 1)[0].strip().lower() for m in value if isinstance(m, str))


def _collections(urls: Iterable[str]) -> frozenset[str]:
    """The URLs a ``{param}`` segment extends in another path (``/setup/flow`` for
    ``/setup/flow/{id}``): a GET on one reads the collection, however its noun is spelled."""
    out: set[str] = set()
    for url in urls:
        head, _, last = url.rstrip("/").rpartition("/")
        if _TEMPLATE_VAR.fullmatch(last):
            out.add(head)
    return frozenset(out)


def _shared_ids(paths: dict[Any, Any], base_path: str) -> frozenset[str]:
    by_words: dict[tuple[str, ...], list[str]] = {}
    for url, item in paths.items():
        for method, operation in item.items() if isinstance(item, dict) else ():
            operation_id = operation.get("operationId") if isinstance(operation, dict) else None
            if str(method).lower() in HTTP_METHODS and isinstance(operation_id, str):
                words = tuple(_id_parts(operation_id, str(method), str(url), base_path))
                if words:
                    by_words.setdefault(words, []).append(operation_id)
    return frozenset(operation_id for ids in by_words.values() if len(ids) > 1 for operation_id in ids)


def _deref_top(ctx: _Context, value: Any, base: str, what: str) -> tuple[Any, str]:
    """Resolve a ref an operation cannot do without (path item, parameter, request body).

    Raises:
        SourceError: it cannot be resolved; the operation (or the path item's) is left out.
    """
    try:
        return ctx.resolver.deref(value, base)
    except RefError as exc:
        ref = value.get("$ref") if isinstance(value, dict) else None
        raise SourceError(
            f"{ctx.label}: {what}: $ref {ref!r} cannot be resolved: {str(exc).rstrip('.')}. "
            "Fix the reference, or make sure the referenced file is next to the spec."
        ) from None


# -- one operation ----------------------------------------------------------------------------


def _action(ctx: _Context, url: str, method: str, op: dict[str, Any], item: dict[str, Any], item_base: str) -> Action:
    where = f"{method} {url}"
    if _unfillable(url):
        # The request builder fills only ``{name}``: an argument the description would ask for
        # there could never reach the URL (``{{d}}``), or the braces would go upstream as text (``{}``).
        raise SourceError(
            f"{where}: the path has an empty, blank, nested or unclosed brace, so no argument can fill it. "
            "Write each path parameter as {name}."
        )
    operation_id = op.get("operationId") if isinstance(op.get("operationId"), str) else None
    collection = url.rstrip("/") in ctx.collections
    # An operationId several operations share (``dispatcher`` for each of ``POST /qrcode/email``,
    # ``/qrcode/sms``…) names none of them: each is named from its URL, as if it had none.
    own_id = None if operation_id in ctx.shared_ids else operation_id
    name = unique_name(action_path(own_id, method, url, ctx.base_path, collection=collection), ctx.taken)
    # The verb-first name the previous release gave, collision suffix and all: an agent may have kept it.
    former = unique_name(action_path(operation_id, method, url, ctx.base_path, former=True), ctx.former_taken)
    legacy = legacy_action_path(operation_id, method, url, ctx.base_path)
    spelled = None if _id_parts(operation_id, method, url, ctx.base_path) else rpc_spelling(method, url)
    aliases = tuple(dict.fromkeys(alias for alias in (former, legacy, spelled) if alias is not None and alias != name))

    params: dict[tuple[str, str], tuple[dict[str, Any], str]] = {}
    for raw_list, base in ((item.get("parameters"), item_base), (op.get("parameters"), item_base)):
        for raw in raw_list if isinstance(raw_list, list) else ():
            param, param_base = _deref_top(ctx, raw, base, f"{where}: parameter")
            if isinstance(param, dict) and isinstance(param.get("name"), str) and isinstance(param.get("in"), str):
                params[(param["name"], param["in"])] = (param, param_base)  # operation level wins

    args = _Arguments(ctx.inliner, ctx.dialect)
    form_fields: list[tuple[dict[str, Any], str]] = []
    body_param: tuple[dict[str, Any], str] | None = None
    for (wire, location), (param, base) in params.items():
        if location == "body":
            body_param = (param, base)
        elif location == "formData":
            if not _is_credential(ctx, wire, location):
                form_fields.append((param, base))
        elif location == "header" and rerouting(wire):
            # Even as an argument it would be refused at every call; with a const or default, the
            # operation is one the method does not name, which policy cannot judge.
            ctx.warnings.append(
                f"header parameter {wire!r} of {where} is left out: servers on the way read it as another "
                "method, URL or client than the operation's"
            )
        elif location == "header" and not header_name(wire):
            ctx.warnings.append(
                f"header parameter {wire[:200]!r} of {where} is left out: it is no header name (RFC 9110 "
                "allows no space, quote, comma, ';' or other separator in one), so no request could carry it"
            )
        elif location in ("path", "query", "header", "cookie") and not _is_credential(ctx, wire, location):
            args.add_parameter(param, base)
    for var in _TEMPLATE_VAR.findall(url):
        args.ensure_path_variable(var)

    if ctx.dialect == "2.0":
        if body_param is not None:
            param, base = body_param
            args.add_body(
                param.get("schema"),
                base,
                kind="json",
                required=param.get("required") is True,
                description=param.get("description"),
            )
        elif form_fields:
            consumes = _media_types(op.get("consumes")) if "consumes" in op else ctx.consumes
            multipart = any(param.get("type") == "file" for param, _ in form_fields) or (
                "multipart/form-data" in consumes and "application/x-www-form-urlencoded" not in consumes
            )
            for param, base in form_fields:
                args.add_form_field(param, base, multipart=multipart)
    else:
        request_body = op.get("requestBody")
        if request_body is not None:
            body, body_base = _deref_top(ctx, request_body, item_base, f"{where}: requestBody")
            if isinstance(body, dict) and isinstance(body.get("content"), dict):
                picked = _pick_media_type(body["content"])
                if picked is not None:
                    media, kind = picked
                    media_obj = body["content"][media]
                    schema = media_obj.get("schema") if isinstance(media_obj, dict) else None
                    args.add_body(
                        schema,
                        body_base,
                        kind=kind,
                        required=body.get("required") is True,
                        description=body.get("description"),
                        media_type=media,
                        encoding=media_obj.get("encoding") if isinstance(media_obj, dict) else None,
                    )
                    if kind == "multipart" and media.split(";", 1)[0].strip().lower() != "multipart/form-data":
                        args.notes.append(f"the request body's {media} is sent as multipart/form-data")

    ctx.warnings.extend(f"action {ctx.connector}.{name} ({where}): {note}" for note in args.notes)
    return Action(
        connector=ctx.connector,
        path=name,
        summary=_summary(op, item, method, url),
        description=_description(op.get("description")),
        input_schema=args.input_schema(),
        risk=ctx.risk_overrides.get(name) or _legacy_risk(ctx, aliases) or risk_of_method(method),
        binding=OpenAPIBinding(
            method=method,
            url=url,
            params=tuple(args.specs),
            body=args.body_kind,
            body_param=args.body_param,
            body_type=args.body_type,
            operation_id=operation_id,
        ),
        group=_first_tag(op),
        response_fields=_response_fields(ctx, op, item_base),
        aliases=aliases,
    )


def _legacy_risk(ctx: _Context, aliases: tuple[str, ...]) -> Risk | None:
    """A risk override a manifest wrote under the action's earlier name."""
    return next((ctx.risk_overrides[alias] for alias in aliases if alias in ctx.risk_overrides), None)


_RESPONSE_FIELDS = 40
"""Field names of a success response kept for discovery, at most (a Stripe object has sixty)."""


def _response_fields(ctx: _Context, op: dict[str, Any], base: str) -> str:
    """The top-level field names of the operation's first 2xx JSON response, space-separated, or "".

    Discovery indexes them as a weak field: "how much money is available" meets ``get_balance`` by its
    ``available`` field. A list response gives its items' fields (or the wrapper's, when the items are
    one field of an object). Best effort: a reference that cannot be resolved gives "".
    """
    responses = op.get("responses")
    if not isinstance(responses, dict):
        return ""
    codes = sorted(str(code) for code in responses if str(code).startswith("2"))
    try:
        for code in codes:
            response, where = ctx.resolver.deref(responses.get(code) or responses.get(int(code)), base)
            if not isinstance(response, dict):
                continue
            schema: Any = response.get("schema")  # Swagger 2
            content = response.get("content")
            if isinstance(content, dict) and (picked := _pick_media_type(content)) is not None:
                media = content[picked[0]]
                schema = media.get("schema") if isinstance(media, dict) else None
            names = _field_names(ctx, schema, where)
            if names:
                return " ".join(names[:_RESPONSE_FIELDS])
    except RefError:
        return ""
    return ""


def _field_names(ctx: _Context, schema: Any, base: str, depth: int = 0) -> list[str]:
    """Property names of an object schema (through ``$ref``, ``allOf``/``anyOf``/``oneOf`` and array items),
    then those of its object-valued properties one level down: Slack's ``{"ok", "team": {"name", "domain"}}``."""
    schema, base = ctx.resolver.deref(schema, base)
    if not isinstance(schema, dict) or depth > 3:
        return []
    if isinstance(schema.get("items"), dict):
        return _field_names(ctx, schema["items"], base, depth + 1)
    names: dict[str, None] = {}
    for key in ("allOf", "anyOf", "oneOf"):
        parts = schema.get(key)
        for part in parts[:4] if isinstance(parts, list) else ():
            names.update(dict.fromkeys(_field_names(ctx, part, base, depth + 1)))
    properties = schema.get("properties")
    if isinstance(properties, dict):
        names.update(dict.fromkeys(str(name) for name in properties))
        if depth == 0:
            for value in properties.values():
                inner, inner_base = ctx.resolver.deref(value, base)
                if isinstance(inner, dict) and isinstance(inner.get("properties"), dict):
                    names.update(dict.fromkeys(_field_names(ctx, inner, inner_base, depth + 2)))
    return list(names)


def _is_credential(ctx: _Context, name: str, location: str) -> bool:
    # OAS 3: header parameters named Accept, Content-Type or Authorization "SHALL be ignored";
    # Authorization is also the gateway's to set.
    if location == "header" and name.lower() in ("authorization", "accept", "content-type"):
        return True
    return _credential_key(location, name) in ctx.credentials


def _summary(op: dict[str, Any], item: dict[str, Any], method: str, url: str) -> str:
    for text in (op.get("summary"), _first_line(op.get("description")), item.get("summary")):
        line = " ".join(_HTML_TAG.sub("", text).split()) if isinstance(text, str) else ""  # Stripe writes HTML
        if line:
            return line if len(line) <= _MAX_SUMMARY else line[: _MAX_SUMMARY - 1].rstrip() + "…"
    return f"{method} {url}"


def _first_line(text: Any) -> str | None:
    if not isinstance(text, str):
        return None
    return next((line.strip() for line in text.splitlines() if line.strip()), None)


def _description(text: Any) -> str:
    if not isinstance(text, str):
        return ""
    text = text.strip()
    return text if len(text) <= _MAX_DESCRIPTION else text[: _MAX_DESCRIPTION - 1].rstrip() + "…"


# -- arguments --------------------------------------------------------------------------------

# Swagger 2.0 non-body parameters carry their schema keywords on the parameter itself.
_SWAGGER2_SCHEMA_KEYS = frozenset(
    {
        "type",
        "format",
        "items",
        "enum",
        "default",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minLength",
        "maxLength",
        "pattern",
        "minItems",
        "maxItems",
        "uniqueItems",
        "multipleOf",
    }
)
_FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")
_MEDIA_TYPE = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+/[!#$%&'*+.^_`|~0-9A-Za-z-]+(?:[ \t]*;[ -~]*)?")
"""A media type as a ``Content-Type`` carries it: ``type/subtype``, then any parameters in printable ASCII."""
BodyKind = Literal["json", "form", "multipart", "raw"]


def _pick_media_type(content: dict[Any, Any]) -> tuple[str, BodyKind] | None:
    """The request body media type to expose: JSON first, then ``*/*``, then forms, else the first one."""
    kinds = {k: k.split(";", 1)[0].strip().lower() for k in content if isinstance(k, str)}
    rules: tuple[tuple[Callable[[str], bool], BodyKind], ...] = (
        (lambda m: m == "application/json", "json"),
        (lambda m: "json" in m, "json"),
        (lambda m: m == "*/*", "json"),
        (lambda m: m in _FORM_TYPES or m.startswith("multipart/"), "form"),
    )
    for test, kind in rules:
        for media, lowered in kinds.items():
            if test(lowered):
                return media, "multipart" if lowered.startswith("multipart/") else kind
    return next(((media, "raw") for media in kinds), None)


class _Arguments:
    """Builds one operation's flat ``input_schema`` and the matching ``ParamSpec`` list together,
    so every property has exactly one spec."""

    def __init__(self, inliner: SchemaInliner, dialect: Dialect) -> None:
        self.inliner = inliner
        self.dialect = dialect
        self.properties: dict[str, dict[str, Any]] = {}
        self.required: list[str] = []
        self.specs: list[ParamSpec] = []
        self.encoding: Literal["json", "form", "multipart", "raw"] = "json"
        self.body_param: str | None = None
        self.body_type: str | None = None
        """A raw body's media type, sent as its ``Content-Type``."""
        self.notes: list[str] = []
        """What of the description the requests cannot honour (``Written.notes``)."""

    @property
    def body_kind(self) -> Literal["json", "form", "multipart", "raw", "none"]:
        """``none`` when no argument goes to the body, whatever the spec declared."""
        return self.encoding if any(s.location == "body" for s in self.specs) else "none"

    def input_schema(self) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": self.properties,
            "required": self.required,
            "additionalProperties": False,
        }

    def add_parameter(self, param: dict[str, Any], base: str) -> None:
        wire, location = param["name"], param["in"]
        schema = self._param_schema(param, base)
        name = arg_name(wire)
        if name in self.properties:
            name = f"{location}_{name}"
        required = location == "path" or param.get("required") is True
        written = param_style(param, schema, swagger2=self.dialect == "2.0")
        self.notes.extend(written.notes)
        self._add(name, wire, location, schema, required, written)

    def add_form_field(self, param: dict[str, Any], base: str, *, multipart: bool) -> None:
        """A Swagger 2.0 ``in: formData`` parameter (a ``type: file`` one makes the body multipart)."""
        self.encoding = "multipart" if multipart else "form"
        name = arg_name(param["name"])
        if name in self.properties:
            name = f"body_{name}"
        written = form_field_style(param) if multipart else None
        if written is not None and written.file:
            description = param.get("description")
            schema = file_field_schema({"description": description} if isinstance(description, str) else {})
        else:
            schema = self._param_schema(param, base)
        if written is not None:
            self.notes.extend(written.notes)
        self._add(name, param["name"], "body", schema, param.get("required") is True, written)

    def ensure_path_variable(self, variable: str) -> None:
        """A ``{variable}`` of the URL template that no parameter declares still needs an argument."""
        if any(s.location == "path" and s.on_wire == variable for s in self.specs):
            return
        name = arg_name(variable)
        if name in self.properties:
            name = f"path_{name}"
        self._add(name, variable, "path", {"type": "string"}, True)

    def add_body(
        self,
        schema: Any,
        base: str,
        *,
        kind: BodyKind,
        required: bool,
        description: Any = None,
        media_type: str = "application/json",
        encoding: Any = None,
    ) -> None:
        self.encoding = kind
        inlined = self.inliner.inline(schema, base) if schema is not None else {}
        props = inlined.get("properties")
        declared = inlined.get("type", "object")
        is_object = declared == "object" or (isinstance(declared, list) and "object" in declared)
        if kind != "raw" and is_object and props == {} and inlined.get("additionalProperties") is False:
            return  # a body that admits nothing (Stripe's GETs declare one) is not an argument
        if kind != "raw" and is_object and isinstance(props, dict) and props:
            body_required = set(inlined.get("required", []))
            encodings = encoding if isinstance(encoding, dict) else {}
            for prop, sub in props.items():
                name = arg_name(prop)
                if name in self.properties:
                    name = f"body_{name}"
                written = multipart_field(sub, encodings.get(prop)) if kind == "multipart" else None
                if written is not None and written.file:
                    sub = file_field_schema(sub)
                self._add(name, prop, "body", sub, prop in body_required, written)
            return
        if kind == "raw":
            # The text goes out as it is (UTF-8), labelled with the description's media type: a binary
            # one too, whose bytes an agent gives as text, as it gives a multipart file's content.
            # A media type no header can carry (a description's typo) leaves the generic text type.
            self.body_type = media_type if _MEDIA_TYPE.fullmatch(media_type) else None
            if inlined.get("type", "string") != "string":
                # An XML or other document described by its structure: still text the agent writes.
                inlined = {key: inlined[key] for key in ("description", "title") if key in inlined}
            inlined = {"type": "string", **inlined}
            inlined.setdefault(
                "description", f"The request body as text, sent as it is (UTF-8) with Content-Type {media_type}."
            )
        if isinstance(description, str) and description.strip() and "description" not in inlined:
            inlined["description"] = description.strip()
        self.body_param = self._add("body", None, "body", inlined, required)

    def _add(
        self,
        name: str,
        wire: str | None,
        location: ParamLocation,
        schema: dict[str, Any],
        required: bool,
        written: Written | None = None,
    ) -> str:
        base_name, n = name, 1
        while name in self.properties:  # still taken after the location/body_ prefix: number it
            n += 1
            name = f"{base_name}_{n}"
        self.properties[name] = schema
        if required:
            self.required.append(name)
        self.specs.append(
            ParamSpec(
                name=name,
                location=location,
                wire_name=wire if wire is not None and wire != name else None,
                style_explode=written.explode if written is not None else True,
                style=written.style if written is not None else None,
                file=written is not None and written.file,
                content_type=written.content_type if written is not None else None,
            )
        )
        return name

    def _param_schema(self, param: dict[str, Any], base: str) -> dict[str, Any]:
        raw: Any
        if self.dialect == "2.0":
            raw = {k: v for k, v in param.items() if k in _SWAGGER2_SCHEMA_KEYS}
        else:
            raw = param.get("schema")
            content = param.get("content")
            if raw is None and isinstance(content, dict) and content:
                first = next(iter(content.values()))
                raw = first.get("schema") if isinstance(first, dict) else None
        schema = self.inliner.inline(raw, base)
        description = param.get("description")
        if isinstance(description, str) and description.strip():
            schema["description"] = _description(description)
        if param.get("deprecated") is True:
            schema["deprecated"] = True
        return schema


def _first_tag(op: dict[str, Any]) -> str:
    """The operation's first tag (its group in the spec's documentation), or ""."""
    tags = op.get("tags")
    first = tags[0] if isinstance(tags, list) and tags else ""
    return first.strip()[:100] if isinstance(first, str) else ""
