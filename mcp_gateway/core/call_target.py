"""Where a prepared call goes and what its action does, in words for the approval page.

An approver decides on what will run, so the page shows the request as the executor built it
(method and URL of an HTTP or GraphQL call, the upstream tool of an MCP one and which server runs
it), with values under credential-like names, and any stored secret, shown as ``[redacted]``, as the
arguments are.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import uuid
from urllib.parse import unquote_plus

import httpx2

from ..execution.executor import Prepared
from ..execution.http_request import DEFAULT_ACCEPT, OWN_BODY_TYPE, USER_AGENT
from ..manifest import ConnectorConfig
from ..manifest.sources import McpSource
from ..primitives.rerouting import header_name
from ..primitives.sanitize import MAX_DESCRIPTION_CHARS, clean_text
from ..primitives.secrets import PROJECT_WIDE, SealedCredential
from ..services.approvals import REDACTED, secret_name
from ..services.logs import known_secrets
from ..vocabulary.model import Action, GraphQLBinding, McpBinding

__all__ = ["carried_credential", "server_shown", "what_it_calls", "what_it_does", "what_it_sends"]

_DERIVED_HEADERS = frozenset({"content-length"})
"""Headers that follow from the rest of the request (httpx2 sets them from the body)."""


def what_it_calls(prepared: Prepared) -> str:
    """``POST https://api.example.com/payments``; ``MCP tool "send" of files's MCP server (python3 server.py)``.

    A stored secret the agent put anywhere in the request (a user pasted it into the chat) is redacted,
    as in the arguments: this line is stored with the approval and shown to whoever opens its link."""
    target = _target(prepared)
    known = known_secrets()
    return known.redact(target) if known else target


def _target(prepared: Prepared) -> str:
    binding = prepared.action.binding
    if isinstance(binding, McpBinding):
        cfg = prepared.connector
        # The upstream names its tool: quoted, and anything outside ASCII escaped, so a name cannot
        # close the quote and write the rest of the sentence (another server, "it carries nothing").
        return f"MCP tool {json.dumps(binding.tool)} of {cfg.slug}'s MCP server ({server_shown(cfg)})"
    request = prepared.request
    if request is None:
        return ""
    url = _path_redacted(binding, request.url)
    query = url.query.decode("ascii", "replace")
    if query:
        # Only a credential-like name's value is replaced; every other byte stays as it is sent.
        pairs = [pair.partition("=") for pair in query.split("&")]
        if any(secret_name(unquote_plus(name)) for name, _, _ in pairs):
            shown = [
                f"{name}={REDACTED}" if secret_name(unquote_plus(name)) else f"{name}{eq}{value}"
                for name, eq, value in pairs
            ]
            url = url.copy_with(query="&".join(shown).encode())
    target = f"{request.method} {url}"
    if isinstance(binding, GraphQLBinding):
        target = f"{target} (GraphQL {binding.operation} {binding.field})"
    return target + _headers_shown(request)


_PLACEHOLDER = re.compile(r"\{([^{}]+)\}")


def _path_redacted(binding: object, url: httpx2.URL) -> httpx2.URL:
    """``url`` with the path segments a credential-like path parameter fills shown as ``[redacted]``
    (``/hooks/{token}``): the arguments list redacts them, and the URL must not show them whole."""
    params = getattr(binding, "params", ())
    hidden = {p.on_wire for p in params if p.location == "path" and (secret_name(p.name) or secret_name(p.on_wire))}
    template = getattr(binding, "url", None)
    if not hidden or not isinstance(template, str):
        return url
    pieces = _PLACEHOLDER.split(template.partition("?")[0])
    pattern = "".join(re.escape(piece) if i % 2 == 0 else "([^/]*)" for i, piece in enumerate(pieces))
    raw = url.raw_path.decode("ascii", "replace")
    path, mark, query = raw.partition("?")
    found = re.search(f"{pattern}$", path)
    if found is None:  # not laid out as its template says: show the template rather than guess
        shown = "".join(
            piece if i % 2 == 0 else (REDACTED if piece in hidden else f"[{piece}]") for i, piece in enumerate(pieces)
        )
        return url.copy_with(raw_path=(shown + mark + query).encode())
    names = pieces[1::2]
    spans = [found.span(group + 1) for group, name in enumerate(names) if name in hidden]
    for start, end in sorted(spans, reverse=True):
        path = path[:start] + REDACTED + path[end:]
    return url.copy_with(raw_path=(path + mark + query).encode())


_SERVER_CHARS = 300
"""How much of a stdio server's command line the page shows."""


def server_shown(cfg: ConnectorConfig) -> str:
    """Which MCP server runs the tool: a stdio server's whole command line (cut at ``_SERVER_CHARS``),
    a remote one's URL without its userinfo or query: the program's name alone does not tell two servers apart."""
    assert isinstance(cfg.source, McpSource), cfg.slug
    spec = cfg.source.mcp
    if spec.url is not None:
        # Userinfo and query left out: an operator may have written a key there; the path tells servers apart.
        url = httpx2.URL(spec.url)
        bare = url.copy_with(username=None, password=None, query=None, fragment=None)
        return clean_text(str(bare) + ("?…" if url.query else ""), max_chars=_SERVER_CHARS)
    line = clean_text(shlex.join(spec.command or ()), max_chars=_SERVER_CHARS)
    return f"{line} in {clean_text(spec.cwd, max_chars=_SERVER_CHARS)}" if spec.cwd else line


_UNSHOWN_HEADERS = frozenset({"host", "content-length"})
"""Headers that follow from the URL and the body, which the approver sees already."""


def _headers_shown(request: httpx2.Request) -> str:
    """The headers the request carries beyond the gateway's own defaults (a connector's or a collection's
    static ones, the agent's header arguments), credential-like ones as ``[redacted]``: sent as much as
    the arguments, so the approver sees them. A ``Content-Type`` is left out only when it is the one the
    gateway gave the body it encoded."""
    # Each value quoted: one holding "; authorization: …" must not read as another header. A name is no
    # value, but one that is no header name (a space, a quote, ";") is quoted too, for the same reason.
    shown = [
        f"{name if header_name(name) else json.dumps(name)}: "
        f"{REDACTED if secret_name(name) else json.dumps(value, ensure_ascii=False)}"
        for name, value in request.headers.multi_items()
        if name not in _UNSHOWN_HEADERS and _DEFAULTS.get(name) != value and not _body_type(request, name, value)
    ]
    return f", with headers {'; '.join(shown)}" if shown else ""


def _body_type(request: httpx2.Request, name: str, value: str) -> bool:
    """Whether this header is the ``Content-Type`` the gateway itself gave the body it encoded: one the
    agent, a connector or a collection set is shown, even one naming a type the gateway also uses."""
    return name == "content-type" and request.extensions.get(OWN_BODY_TYPE) == value


_DEFAULTS = {"user-agent": USER_AGENT, "accept": DEFAULT_ACCEPT}
"""The headers every request carries unless something says otherwise."""


def carried_credential(slug: str, sealed: SealedCredential | None) -> str:
    """Which stored credential a call carries, said after where it goes (``…; it carries the team-wide
    credential of api``): an approver decides for that account too, and a retry carrying another one
    (the user connected their own since, or theirs was removed) is another call. Only the scope is
    said and pinned, never the value: a refreshed OAuth2 token is still the credential approved."""
    if sealed is None:
        return ""
    if sealed.key.principal == PROJECT_WIDE:
        return f"; it carries the team-wide credential of {slug}"
    return f"; it carries the credential {sealed.key.principal} connected for {slug}"


def what_it_sends(prepared: Prepared) -> str:
    """sha256 of the request as the executor built it, credentials not yet in it: method, URL, headers
    and body of an HTTP or GraphQL call (a multipart body's random boundary left out), the upstream tool
    and arguments of an MCP one. An approval holds it, so a retry runs only if it would send the same
    bytes: defaults, static headers and where each argument goes are covered, not only the arguments."""
    digest = hashlib.sha256()
    request = prepared.request
    if request is None:
        binding = prepared.action.binding
        tool = binding.tool if isinstance(binding, McpBinding) else prepared.action.qualified_name
        payload = json.dumps(prepared.payload, sort_keys=True, ensure_ascii=False, default=str)
        digest.update(f"{tool}\n{payload}".encode())
        if isinstance(prepared.connector.source, McpSource):
            # The server is part of what was approved: the same tool of another program is another call.
            server = prepared.connector.source.mcp.model_dump(mode="json")
            digest.update(json.dumps([server, prepared.connector.headers], sort_keys=True).encode())
        return digest.hexdigest()
    try:
        body = request.content
    except httpx2.RequestNotRead:  # a streamed body cannot be compared: no retry can match it
        return f"unpinned-{uuid.uuid4().hex}"
    content_type = request.headers.get("content-type", "")
    boundary = content_type.partition("boundary=")[2].split(";")[0].strip().strip('"')
    if content_type.lower().startswith("multipart/") and boundary:
        body = body.replace(boundary.encode(), b"-")
        content_type = content_type.replace(boundary, "-")
    headers = sorted(
        (name.lower(), content_type if name.lower() == "content-type" else value)
        for name, value in request.headers.multi_items()
        if name.lower() not in _DERIVED_HEADERS
    )
    digest.update(json.dumps([request.method, str(request.url), headers], ensure_ascii=False).encode())
    digest.update(b"\n")
    digest.update(body)
    return digest.hexdigest()


def what_it_does(action: Action) -> str:
    """The action's summary (else the start of its description), cleaned of hidden characters."""
    return clean_text(action.summary or action.description or "", max_chars=MAX_DESCRIPTION_CHARS)
