"""Send one upstream request: judged same-origin redirects only, one deadline, failures as ``UpstreamError``.

httpx2 follows redirects to any host and strips only ``Authorization``; a credential placed in an
API-key header, a query parameter or a request signature would still travel. So redirects are
followed here, by hand, and only within the original request's origin (scheme, host, port): a
redirect elsewhere is refused before anything is sent to it. The auth is re-applied on each hop,
so a signature covers the URL actually requested.

Within the origin a redirect still leads to a request nobody judged: another path, which a policy
rule may block or hold for a human. So a write's redirect is never followed (a 307 or 308 would send
its body again), and a read's only when the caller's ``RedirectJudge`` lets the new request run as
it is; otherwise the redirect is reported, nothing sent to its target.

Error messages name the upstream by host (and port) only. The full URL can carry a key in its
query, and request headers carry credentials, so neither appears in any message, and httpx2's
exceptions are not chained (their tracebacks can print the URL).
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import replace
from functools import lru_cache
from types import MappingProxyType
from typing import Any, Protocol

import anyio
import httpx2

from ..primitives.rerouting import header_name
from ..tracing import SpanKind, inject_trace_context, recording, span
from ..vocabulary.errors import ArgumentError, UpstreamError
from .connect_failures import cause_of
from .response import Outcome, read_response

__all__ = ["ACCEPT_ENCODING", "RedirectJudge", "send"]

ACCEPT_ENCODING = "gzip, deflate"
"""The codings asked for: those ``content_coding`` undoes itself and tells a cut stream of. Without the header
any coding is acceptable (RFC 9110 12.5.3), and one the gateway cannot read withholds the whole answer."""


class RedirectJudge(Protocol):
    """Whether a read may follow a same-origin redirect to ``request`` (the next hop, before any
    credential is applied): None when it may, else why not (a clause: "a policy rule blocks it")."""

    def __call__(self, request: httpx2.Request, /) -> str | None: ...


_READS = frozenset({"GET", "HEAD", "OPTIONS"})
_MAX_SHOWN_LOCATION = 200

_REDIRECTS = frozenset({300, 301, 302, 303, 307, 308})
"""Statuses whose ``Location`` is a redirect: a 300's names the upstream's preferred choice (RFC 9110 15.4.1)."""
# httpx2.Request recomputes these from the next hop's URL and body.
_PER_HOP_HEADERS = ("host", "content-length", "transfer-encoding")
# These describe a body, so they go when a redirect turns the request into a bodiless GET.
_BODY_HEADERS = ("content-type", "content-encoding")


async def send(
    client: httpx2.AsyncClient,
    request: httpx2.Request,
    *,
    auth: httpx2.Auth | None,
    timeout: float,  # noqa: ASYNC109 - also each network operation's limit, which a cancel scope cannot give
    max_bytes: int,
    max_redirects: int = 5,
    trace_context: bool = True,
    url_template: str | None = None,
    redirects: RedirectJudge | None = None,
) -> Outcome:
    """Send ``request`` with ``auth`` and read at most ``max_bytes`` of the final answer.

    A same-origin redirect of a read is followed when ``redirects`` lets its next request run (none
    is without it); the answer's ``redirected_to`` then names the path it came from.

    The exchange is one CLIENT span (HTTP client semantic conventions: method, server address and
    port, the final status). Its ``url.full`` is the origin only, and ``url.template`` the action's
    path template when given: a path can hold argument values and a query a key. With
    ``trace_context`` the request carries that span's W3C ``traceparent``, added before the auth
    flow runs, so a signature (oauth1, hmac, sigv4) covers it like any other header.

    Any status is returned as an ``Outcome`` (the caller maps 401, 403 and the rest); only a
    failure to get an answer raises. ``timeout`` bounds the whole exchange, redirects and body
    included, as well as each network operation.

    Raises:
        UpstreamError: ``upstream_timeout``; ``upstream_unreachable`` (connect or network failure);
            ``upstream_redirect_refused`` (a redirect off the origin, naming only its host; one of a
            write, or one ``redirects`` refuses, naming the path it pointed to);
            ``upstream_error`` (too many redirects, a bad ``Location``, broken HTTP).
    """
    attributes = _span_attributes(request, url_template) if recording() else None
    with span(request.method, kind=SpanKind.CLIENT, attributes=attributes, current=False) as current:
        if trace_context:  # the client's trace continues upstream even when this process exports nothing
            carrier: dict[str, str] = {}
            inject_trace_context(carrier, current)
            if carrier:  # nothing to add without a trace (updating with nothing still copies)
                request.headers.update(carrier)
        if "accept-encoding" not in request.headers:  # a connector's own headers may say otherwise
            request.headers["Accept-Encoding"] = ACCEPT_ENCODING
        outcome = await _send(client, request, auth, timeout, max_bytes, max_redirects, redirects)
        if outcome.http_status is not None:
            current.set_attribute("http.response.status_code", outcome.http_status)
        return outcome


# An action's CLIENT span attributes, by method, origin and path template: the same on each call,
# and building them (``url.netloc`` above all) is not free. Read-only (spans copy them). Cleared when it grows past
# what a manifest's actions and their redirects could fill.
_SPAN_ATTRIBUTES: dict[tuple[str, str, bytes, int | None, str | None], Mapping[str, str | int]] = {}


def _span_attributes(request: httpx2.Request, url_template: str | None) -> Mapping[str, str | int]:
    url = request.url
    key = (request.method, url.scheme, url.raw_host, url.port, url_template)
    cached = _SPAN_ATTRIBUTES.get(key)
    if cached is None:
        attributes: dict[str, str | int] = {
            "http.request.method": request.method,
            "server.address": url.host,
            "url.full": f"{url.scheme}://{url.netloc.decode('ascii')}",
        }
        if url.port is not None:
            attributes["server.port"] = url.port
        if url_template is not None:
            attributes["url.template"] = url_template
        if len(_SPAN_ATTRIBUTES) >= 4096:
            _SPAN_ATTRIBUTES.clear()
        cached = _SPAN_ATTRIBUTES[key] = MappingProxyType(attributes)
    return cached


async def _send(
    client: httpx2.AsyncClient,
    request: httpx2.Request,
    auth: httpx2.Auth | None,
    timeout: float,  # noqa: ASYNC109 - see send()
    max_bytes: int,
    max_redirects: int,
    redirects: RedirectJudge | None,
) -> Outcome:
    progress = _Progress()
    # Later hops need no watching: a redirect means the first request was sent.
    request.extensions = {**request.extensions, "trace": progress}
    try:
        # anyio.fail_after, without its two generator-based context managers (every call passes here):
        # the scope swallows only its own cancellation, so leaving it that way is the deadline.
        with anyio.CancelScope(deadline=anyio.current_time() + timeout):
            return await _exchange(client, request, auth, _per_operation(timeout), max_bytes, max_redirects, redirects)
        # The deadline and the connect limit are equal up to CONNECT_SECONDS, and the deadline tends to win.
        raise httpx2.ConnectTimeout("") if progress.connecting else TimeoutError
    except httpx2.ConnectTimeout:
        tls = (
            " (a TLS handshake that never completes: is that port serving plain HTTP? check the scheme of the "
            "connector's base_url)"
            if request.url.scheme == "https"
            else ""
        )
        raise UpstreamError(
            "upstream_unreachable",
            f"could not connect to {_where(request.url)} within {min(timeout, CONNECT_SECONDS):g} s{tls}; nothing "
            "was sent; check that the service is up and the connector's base_url is right, then try again",
        ) from None
    except (TimeoutError, httpx2.TimeoutException) as exc:
        raise UpstreamError(
            "upstream_timeout",
            f"{_where(request.url)} did not answer within {timeout:g} s; "
            + (_MAY_HAVE_RUN if _maybe_sent(request, exc) else "")
            + "try again later or raise the connector's timeout",
        ) from None
    except (httpx2.NetworkError, httpx2.ProxyError) as exc:
        if not isinstance(exc, _NOT_SENT):  # connected: the request went out, the answer broke off
            raise UpstreamError(
                "upstream_unreachable",
                f"the connection to {_where(request.url)} was lost before its whole answer came "
                f"({type(exc).__name__}); {_MAY_HAVE_RUN + 'then ' if _maybe_sent(request, exc) else ''}try again",
            ) from None
        if (cause := cause_of(exc, _where(request.url), request.url.scheme)) is not None:
            raise UpstreamError(
                "upstream_unreachable", f"could not reach {_where(request.url)}, nothing was sent: {cause}"
            ) from None
        raise UpstreamError(
            "upstream_unreachable",
            f"could not reach {_where(request.url)} ({type(exc).__name__}); check that the service is up and the "
            "connector's base_url is right, then try again",
        ) from None
    except httpx2.InvalidURL:
        # Only the auth step edits the URL after build_request (an api_key in the query).
        raise ArgumentError(
            "the request URL became too long once the credential was added; shorten the arguments"
        ) from None
    except ssl.SSLError as exc:
        # httpcore2's anyio backend can let a raw TLS alert escape after the handshake.
        why = getattr(exc, "reason", None) or type(exc).__name__
        raise UpstreamError(
            "upstream_unreachable",
            f"the TLS connection to {_where(request.url)} failed ({why}); check the connector's base_url and "
            "certificates, then try again",
        ) from None
    except httpx2.LocalProtocolError:
        # Raised before a byte leaves: a header value the HTTP client refuses (a space or a line break at
        # its edge). Its text quotes the value, which may be the credential: never passed on.
        if not all(header_name(name) for name in request.headers):
            raise UpstreamError(
                "connector_error",
                f"the request to {_where(request.url)} was not sent: one of its header names is no header name "
                "(a space, a quote or a ';' in it); check the connector's headers and those of its source (a "
                "collection's header keys), then try again",
                sent=False,
            ) from None
        raise UpstreamError(
            "connector_error",
            f"the request to {_where(request.url)} was not sent: the HTTP client refused one of its header values "
            "(whitespace at an edge or a control character); check the connector's credential and headers "
            "(`mcp-gateway secret set` stores the credential again), then try again",
            sent=False,
        ) from None
    except (httpx2.ProtocolError, httpx2.UnsupportedProtocol, httpx2.DecodingError) as exc:
        raise UpstreamError(
            "upstream_error",
            f"{_where(request.url)} broke the HTTP exchange ({type(exc).__name__}); "
            + (_MAY_HAVE_RUN if _maybe_sent(request, exc) else "")
            + "try again later",
            broken=True,
        ) from None


_MAY_HAVE_RUN = "the request may have reached it and taken effect, so check before calling again; "
_NOT_SENT = (
    httpx2.ConnectError,
    httpx2.ConnectTimeout,
    httpx2.PoolTimeout,
    httpx2.ProxyError,
    httpx2.UnsupportedProtocol,
)
"""Failures before any byte of the request left."""


def _maybe_sent(request: httpx2.Request, exc: BaseException) -> bool:
    """Whether a write failed after its request may have reached the upstream (a read is safe to repeat)."""
    return request.method not in ("GET", "HEAD", "OPTIONS") and not isinstance(exc, _NOT_SENT)


class _Progress:
    """How far the request got, from httpcore2's trace events: still connecting (TLS included), or sent.

    Without any event (a transport that emits none, a wait for the pool) nothing is known, and a timeout is
    told as one that may have come after the request left.
    """

    __slots__ = ("connecting",)

    def __init__(self) -> None:
        self.connecting = False

    async def __call__(self, event: str, info: dict[str, Any]) -> None:
        if event.startswith("connection.") and event.endswith(".started"):  # connect_tcp, start_tls …
            self.connecting = True
        elif event.endswith("send_request_headers.started"):
            self.connecting = False


CONNECT_SECONDS = 10.0
"""At most this long to connect, TLS handshake included: a handshake with a port that serves plain HTTP
never completes, and waited the connector's whole timeout to say only that nothing answered."""


@lru_cache(maxsize=64)
def _per_operation(timeout: float) -> dict[str, Any]:
    """The request extension that limits each network operation to ``timeout``, and connecting to
    ``CONNECT_SECONDS`` at most (httpx2's shape)."""
    return httpx2.Timeout(timeout, connect=min(timeout, CONNECT_SECONDS)).as_dict()


async def _exchange(
    client: httpx2.AsyncClient,
    request: httpx2.Request,
    auth: httpx2.Auth | None,
    per_operation: dict[str, Any],
    max_bytes: int,
    max_redirects: int,
    redirects: RedirectJudge | None,
) -> Outcome:
    # Auth flows write into the request they are given; later hops start from the unsigned headers.
    unsigned = request.headers.raw
    for hop in range(max_redirects + 1):
        request.extensions = {**request.extensions, "timeout": per_operation}
        response = await client.send(request, auth=auth, follow_redirects=False, stream=True)
        if response.status_code not in _REDIRECTS or "location" not in response.headers:
            outcome = await read_response(response, max_bytes=max_bytes, head=request.method == "HEAD")
            if hop:
                outcome = replace(outcome, redirected_to=request.url.path)
            return outcome
        location = response.headers["location"]
        await response.aclose()
        target = _redirect_url(request.url, location)
        if target.origin != request.url.origin:
            raise UpstreamError(
                "upstream_redirect_refused",
                f"{_where(request.url)} redirected to another origin ({_where(target)}); the gateway follows "
                "redirects only within the connector's origin, so credentials never leave it. If the new "
                "location is right, change the connector's base_url",
                upstream_status=response.status_code,
            )
        status = response.status_code
        if request.method not in _READS:
            raise UpstreamError(
                "upstream_redirect_refused",
                f"{_where(request.url)} answered {status}, pointing to {_shown(target)}; the gateway does not "
                f"follow a redirect of a {request.method}, so nothing was sent there and nothing was sent again. "
                "The request itself reached the upstream and may have taken effect: check before calling again",
                upstream_status=status,
            )
        next_request, next_unsigned = _next_hop(request, unsigned, target, status)
        why = "the gateway was given no rule to judge it by" if redirects is None else redirects(next_request)
        if why is not None:
            raise UpstreamError(
                "upstream_redirect_refused",
                f"{_where(request.url)} answered {status}, pointing to {next_request.method} {_shown(target)}; "
                f"not followed: {why}. Nothing was sent there; call that path yourself if it is what you need, "
                "and it is judged as any call",
                upstream_status=status,
            )
        request, unsigned = next_request, next_unsigned
    raise UpstreamError(
        "upstream_error",
        f"{_where(request.url)} kept redirecting (limit: {max_redirects}); the upstream may be misconfigured",
        broken=True,
    )


def _redirect_url(current: httpx2.URL, location: str) -> httpx2.URL:
    try:
        # RFC 9110 10.2.2: Location may be relative to the request's URL. The fragment is dropped.
        return current.join(location).copy_with(fragment=None)
    except httpx2.InvalidURL:
        raise UpstreamError(
            "upstream_error", f"{_where(current)} redirected to an invalid Location; try again later", broken=True
        ) from None


def _next_hop(
    request: httpx2.Request, unsigned: list[tuple[bytes, bytes]], target: httpx2.URL, status: int
) -> tuple[httpx2.Request, list[tuple[bytes, bytes]]]:
    method = request.method
    # RFC 9110 15.4.4: 303 means "GET the result"; 301/302 after POST are GET in every client.
    to_get = (status == 303 and method != "HEAD") or (status in (301, 302) and method == "POST")
    headers = httpx2.Headers(unsigned)
    for name in _PER_HOP_HEADERS + (_BODY_HEADERS if to_get else ()):
        headers.pop(name, None)
    content = None if to_get else request.content  # build_request bodies are bytes, so replayable
    next_request = httpx2.Request("GET" if to_get else method, target, headers=headers, content=content)
    return next_request, next_request.headers.raw


def _shown(url: httpx2.URL) -> str:
    """A redirect target's path, without its query (it can carry a key) and cut short: upstream text."""
    path = url.raw_path.decode("ascii").partition("?")[0]
    return path if len(path) <= _MAX_SHOWN_LOCATION else path[: _MAX_SHOWN_LOCATION - 1] + "…"


def _where(url: httpx2.URL) -> str:
    """Host and explicit port: enough to say which upstream, never path, query or userinfo."""
    return f"{url.host}:{url.port}" if url.port is not None else url.host
