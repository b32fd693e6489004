"""send against real loopback upstreams: redirects stay on the origin, credentials never leave it."""

from __future__ import annotations

import contextlib
import gzip
import importlib
import logging
import socket
import ssl
import time
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio
import httpx2
import pytest

from mcp_gateway.execution import Outcome, build_request, send, summarize_error
from mcp_gateway.vocabulary.errors import UpstreamError
from mcp_gateway.vocabulary.model import Action, HttpBinding, ParamLocation, ParamSpec
from tests.support.raw_http import RawAnswer, RawHttpServer, RawRequest
from tests.support.upstream import EchoApp, echo_app, serve_asgi

send_module = importlib.import_module("mcp_gateway.execution.send")  # the package exports the function as `send`

pytestmark = pytest.mark.anyio

CANARY = "canary-7f3a9c-secret"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Upstream:
    def __init__(self, app: EchoApp, base_url: str) -> None:
        self.app, self.base_url = app, base_url


def _serve() -> Iterator[Upstream]:
    app = echo_app()
    with serve_asgi(app) as base_url:
        yield Upstream(app, base_url)


upstream_server = pytest.fixture(scope="module")(_serve)
other_server = pytest.fixture(scope="module")(_serve)


@pytest.fixture
def upstream(upstream_server: Upstream) -> Upstream:
    upstream_server.app.requests.clear()
    return upstream_server


@pytest.fixture
def other(other_server: Upstream) -> Upstream:
    other_server.app.requests.clear()
    return other_server


class KeyAuth(httpx2.Auth):
    """The shape of a real credential: a header applied at the last moment, counting its uses."""

    def __init__(self) -> None:
        self.applied_to: list[str] = []

    def auth_flow(self, request: httpx2.Request) -> Generator[httpx2.Request, httpx2.Response, None]:
        self.applied_to.append(request.url.path)
        request.headers["X-Api-Key"] = CANARY
        yield request


def act(method: str = "GET", url: str = "/{path}", params: dict[str, ParamLocation] | None = None) -> Action:
    specs = tuple(ParamSpec(name=n, location=loc) for n, loc in (params or {}).items())
    return Action(connector="echo", path="any", binding=HttpBinding(method=method, url=url, params=specs))


async def call(request: httpx2.Request, *, auth: httpx2.Auth | None = None, seconds: float = 5, **kw: Any) -> Outcome:
    async with httpx2.AsyncClient() as client:
        return await send(client, request, auth=auth, timeout=seconds, max_bytes=kw.pop("max_bytes", 100_000), **kw)


def get(base_url: str, path_and_query: str, method: str = "GET", **kw: Any) -> httpx2.Request:
    return httpx2.Request(method, base_url + path_and_query, **kw)


def assert_no_leak(exc: UpstreamError, *fragments: str) -> None:
    text = f"{exc} {exc.upstream_message or ''}"
    for fragment in (CANARY, *fragments):
        assert fragment not in text


# -- the plain path --------------------------------------------------------------------------


async def test_built_request_reaches_the_upstream_with_auth_applied(upstream: Upstream) -> None:
    action = act("POST", "/items/{id}", {"id": "path", "q": "query", "name": "body"})
    request = build_request(action, {"id": "a/b", "q": "x y", "name": "n"}, base_url=upstream.base_url + "/api")
    auth = KeyAuth()
    outcome = await call(request, auth=auth)
    assert outcome.http_status == 200 and outcome.content_type == "application/json"
    seen = upstream.app.requests[0]
    assert (seen.method, seen.raw_path, seen.query) == ("POST", "/api/items/a%2Fb", "q=x%20y")
    assert seen.json() == {"name": "n"}
    assert seen.headers["x-api-key"] == CANARY
    assert seen.headers["user-agent"].startswith("mcp-gateway/")
    assert outcome.data["raw_path"] == "/api/items/a%2Fb"


async def test_the_codings_the_gateway_reads_are_the_ones_it_asks_for(upstream: Upstream) -> None:
    # Without Accept-Encoding any coding is acceptable, and one the gateway cannot read withholds the answer.
    await call(get(upstream.base_url, "/x"))
    await call(get(upstream.base_url, "/x", headers={"Accept-Encoding": "identity"}))  # a connector's own
    assert [seen.headers["accept-encoding"] for seen in upstream.app.requests] == ["gzip, deflate", "identity"]


async def test_non_2xx_is_an_outcome_not_an_exception(upstream: Upstream) -> None:
    outcome = await call(get(upstream.base_url, "/status/404?message=no+such+repo"))
    assert outcome.http_status == 404
    assert summarize_error(outcome) == "no such repo"


async def test_an_upstream_echoing_headers_in_its_error_is_summarized_by_its_message(upstream: Upstream) -> None:
    outcome = await call(get(upstream.base_url, "/echo-headers-error"), auth=KeyAuth())
    assert outcome.http_status == 500
    assert summarize_error(outcome) == "internal error"


# -- redirects -------------------------------------------------------------------------------


def follow_any(hop: httpx2.Request) -> str | None:
    return None


@pytest.mark.parametrize("absolute", [False, True])
async def test_same_origin_redirect_is_followed_with_auth_reapplied(upstream: Upstream, absolute: bool) -> None:
    target = (upstream.base_url if absolute else "") + "/landing?x=1"
    auth = KeyAuth()
    outcome = await call(get(upstream.base_url, f"/redirect?to={quote(target)}"), auth=auth, redirects=follow_any)
    assert outcome.http_status == 200
    assert outcome.data["path"] == "/landing" and outcome.data["query"] == "x=1"
    assert outcome.redirected_to == "/landing"  # the path only: a query can carry a key
    assert auth.applied_to == ["/redirect", "/landing"]
    assert [r.headers.get("x-api-key") for r in upstream.app.requests] == [CANARY, CANARY]


async def test_an_answer_without_a_redirect_names_none_though_the_auth_changed_the_url(upstream: Upstream) -> None:
    class QueryKey(httpx2.Auth):
        def auth_flow(self, request: httpx2.Request) -> Generator[httpx2.Request, httpx2.Response, None]:
            request.url = request.url.copy_merge_params({"key": CANARY})
            yield request

    outcome = await call(get(upstream.base_url, "/landing"), auth=QueryKey(), redirects=follow_any)
    assert outcome.http_status == 200 and outcome.redirected_to is None


async def test_a_redirect_the_judge_refuses_is_reported_and_nothing_reaches_its_target(upstream: Upstream) -> None:
    judged: list[tuple[str, str]] = []

    def refuse(hop: httpx2.Request) -> str | None:
        judged.append((hop.method, hop.url.path))
        assert "x-api-key" not in hop.headers  # judged before any credential is on it
        return "a project policy rule (api.request) blocks that request"

    target = f"/admin/secrets?token={CANARY}"
    with pytest.raises(UpstreamError) as info:
        await call(get(upstream.base_url, f"/redirect?to={quote(target)}"), auth=KeyAuth(), redirects=refuse)
    exc = info.value
    assert (exc.reason, exc.upstream_status) == ("upstream_redirect_refused", 302)
    assert judged == [("GET", "/admin/secrets")]
    assert "GET /admin/secrets" in str(exc) and "blocks that request" in str(exc)
    assert_no_leak(exc, "token=")
    assert [r.path for r in upstream.app.requests] == ["/redirect"]


async def test_without_a_judge_no_redirect_is_followed(upstream: Upstream) -> None:
    with pytest.raises(UpstreamError) as info:
        await call(get(upstream.base_url, "/redirect?to=/landing"), auth=KeyAuth())
    assert info.value.reason == "upstream_redirect_refused"
    assert [r.path for r in upstream.app.requests] == ["/redirect"]


async def test_cross_origin_redirect_is_refused_before_anything_reaches_it(upstream: Upstream, other: Upstream) -> None:
    target = f"{other.base_url}/collect?token=stolen-{CANARY}"
    with pytest.raises(UpstreamError) as info:
        await call(get(upstream.base_url, f"/redirect?to={quote(target)}"), auth=KeyAuth())
    exc = info.value
    assert exc.reason == "upstream_redirect_refused"
    assert exc.upstream_status == 302
    assert other.base_url.removeprefix("http://") in str(exc)  # names the target host:port ...
    assert_no_leak(exc, "/collect", "token=", "/redirect")  # ... and nothing else of either URL
    assert other.app.requests == []


async def test_a_scheme_change_is_another_origin(upstream: Upstream) -> None:
    target = upstream.base_url.replace("http://", "https://") + "/x"
    with pytest.raises(UpstreamError) as info:
        await call(get(upstream.base_url, f"/redirect?to={quote(target)}&status=308"))
    assert info.value.reason == "upstream_redirect_refused"


@pytest.mark.parametrize("status", [303, 302, 307, 308, 300])
@pytest.mark.parametrize("method", ["GET", "HEAD"])
async def test_a_read_follows_with_its_method(upstream: Upstream, status: int, method: str) -> None:
    request = get(upstream.base_url, f"/redirect?to=/after&status={status}", method)
    outcome = await call(request, auth=KeyAuth(), redirects=follow_any)
    assert outcome.http_status == 200
    final = upstream.app.requests[-1]
    assert (final.method, final.path) == (method, "/after")
    assert final.headers["x-api-key"] == CANARY


@pytest.mark.parametrize("status", [300, 301, 302, 303, 307, 308])
@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE"])
async def test_a_write_never_follows_a_redirect(upstream: Upstream, status: int, method: str) -> None:
    request = get(upstream.base_url, f"/redirect?to=/admin/wipe&status={status}", method, json={"all": True})
    with pytest.raises(UpstreamError) as info:
        await call(request, auth=KeyAuth(), redirects=follow_any)
    exc = info.value
    assert (exc.reason, exc.upstream_status, exc.sent) == ("upstream_redirect_refused", status, True)
    assert "/admin/wipe" in str(exc) and "nothing was sent again" in str(exc)
    assert [r.path for r in upstream.app.requests] == ["/redirect"]  # the body went out once, to the URL shown


async def test_redirect_limit(upstream: Upstream) -> None:
    two_hops = "/redirect?to=" + quote("/redirect?to=/end")
    assert (await call(get(upstream.base_url, two_hops), max_redirects=2, redirects=follow_any)).data["path"] == "/end"
    with pytest.raises(UpstreamError) as info:
        await call(get(upstream.base_url, two_hops), max_redirects=1, redirects=follow_any)
    assert info.value.reason == "upstream_error"
    assert "kept redirecting" in str(info.value)


def one_shot(handler: Callable[[httpx2.Request], httpx2.Response]) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(transport=httpx2.MockTransport(handler))


async def test_a_header_name_the_http_client_refuses_is_named_as_a_name(upstream: Upstream) -> None:
    request = get(upstream.base_url, "/x")
    request.headers['X-Trace"; it carries nothing'] = "1"
    with pytest.raises(UpstreamError) as info:
        await call(request)
    assert info.value.reason == "connector_error" and not info.value.sent
    assert "header names is no header name" in str(info.value) and "secret set" not in str(info.value)
    assert upstream.app.requests == []


async def test_a_3xx_without_location_is_the_answer() -> None:
    async with one_shot(lambda r: httpx2.Response(304)) as client:
        outcome = await send(client, httpx2.Request("GET", "http://h/x"), auth=None, timeout=5, max_bytes=10)
    assert (outcome.http_status, outcome.data) == (304, None)


async def test_an_invalid_location_is_an_upstream_error() -> None:
    async with one_shot(lambda r: httpx2.Response(302, headers={"location": "/\x00"})) as client:
        with pytest.raises(UpstreamError) as info:
            await send(client, httpx2.Request("GET", "http://h/x"), auth=None, timeout=5, max_bytes=10)
    assert info.value.reason == "upstream_error"


# -- failures --------------------------------------------------------------------------------


async def test_timeout(upstream: Upstream) -> None:
    started = time.monotonic()
    with pytest.raises(UpstreamError) as info:
        await call(get(upstream.base_url, f"/slow?s=3&key={CANARY}"), seconds=0.3)
    assert time.monotonic() - started < 2
    assert info.value.reason == "upstream_timeout"
    assert "within 0.3 s" in str(info.value)
    assert_no_leak(info.value, "/slow", "key=")


async def test_the_deadline_bounds_the_whole_exchange_without_per_operation_timeouts() -> None:
    # A transport that honours no per-operation timeout (it just hangs): only send's own deadline
    # can end the exchange, and it must surface as upstream_timeout.
    class Hanging(httpx2.AsyncBaseTransport):
        async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
            await anyio.sleep(30)
            return httpx2.Response(200)

    started = time.monotonic()
    async with httpx2.AsyncClient(transport=Hanging()) as client:
        with pytest.raises(UpstreamError) as info:
            await send(client, httpx2.Request("GET", "http://h/x"), auth=None, timeout=0.2, max_bytes=10)
    assert time.monotonic() - started < 5
    assert info.value.reason == "upstream_timeout"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def test_connection_refused_is_unreachable() -> None:
    port = free_port()
    with pytest.raises(UpstreamError) as info:
        await call(httpx2.Request("GET", f"http://127.0.0.1:{port}/x?api_key={CANARY}"), auth=KeyAuth())
    assert info.value.reason == "upstream_unreachable"
    assert f"127.0.0.1:{port}" in str(info.value)
    assert_no_leak(info.value, "api_key", "/x")
    assert info.value.__cause__ is None and info.value.__suppress_context__


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (httpx2.ReadTimeout("slow"), "upstream_timeout"),
        (httpx2.ConnectError("refused"), "upstream_unreachable"),
        (httpx2.RemoteProtocolError("garbage"), "upstream_error"),
    ],
)
async def test_transport_errors_map_to_reasons(error: Exception, reason: str) -> None:
    def fail(request: httpx2.Request) -> httpx2.Response:
        raise error

    async with one_shot(fail) as client:
        with pytest.raises(UpstreamError) as info:
            await send(client, httpx2.Request("GET", "https://api.example.com/x"), auth=None, timeout=5, max_bytes=10)
    assert info.value.reason == reason
    assert "api.example.com" in str(info.value)


@pytest.mark.parametrize(
    ("error", "sent"),
    [
        (httpx2.ReadError("reset"), True),
        (httpx2.ReadTimeout("slow"), True),
        (httpx2.RemoteProtocolError("garbage"), True),
        (httpx2.ConnectError("refused"), False),
        (httpx2.ConnectTimeout("no route"), False),
    ],
)
async def test_a_write_that_failed_after_it_may_have_left_says_it_may_have_taken_effect(
    error: Exception, sent: bool
) -> None:
    def fail(request: httpx2.Request) -> httpx2.Response:
        raise error

    for method, write in (("POST", True), ("DELETE", True), ("GET", False)):
        async with one_shot(fail) as client:
            with pytest.raises(UpstreamError) as info:
                await send(
                    client, httpx2.Request(method, "https://api.example.com/x"), auth=None, timeout=5, max_bytes=10
                )
        assert ("may have reached it and taken effect" in str(info.value)) == (sent and write), (method, error)


async def test_a_header_value_the_http_client_refuses_is_not_sent_and_not_quoted(upstream: Upstream) -> None:
    # A credential pasted with a space at its end: the HTTP client refuses the header before a byte
    # leaves, and its own message quotes the value.
    request = get(upstream.base_url, "/x", method="POST", headers={"Authorization": f"Bearer {CANARY} "})
    with pytest.raises(UpstreamError) as info:
        await call(request)
    assert info.value.reason == "connector_error" and info.value.sent is False
    assert "was not sent" in str(info.value) and "may have reached it" not in str(info.value)
    assert_no_leak(info.value)
    assert upstream.app.requests == []


async def test_https_to_a_port_that_never_completes_a_handshake_says_so_soon(monkeypatch: pytest.MonkeyPatch) -> None:
    # A plain-HTTP port waits for a request line the ClientHello never ends: it waited the whole timeout.
    monkeypatch.setattr(send_module, "CONNECT_SECONDS", 0.3)
    with socket.create_server(("127.0.0.1", 0)) as silent:
        port = silent.getsockname()[1]
        started = time.monotonic()
        with pytest.raises(UpstreamError) as info:
            await call(httpx2.Request("POST", f"https://127.0.0.1:{port}/x"), seconds=7.25)
        waited = time.monotonic() - started
    assert info.value.reason == "upstream_unreachable" and "TLS handshake" in str(info.value)
    assert "nothing was sent" in str(info.value) and waited < 5


@contextlib.contextmanager
def full_accept_queue() -> Iterator[int]:
    """A listener whose accept queue is full: a new connection's SYN is dropped, connecting never ends."""
    with socket.create_server(("127.0.0.1", 0), backlog=0) as listener:
        port = listener.getsockname()[1]
        fillers = [socket.socket() for _ in range(3)]
        try:
            for filler in fillers:
                filler.setblocking(False)
                filler.connect_ex(("127.0.0.1", port))
            yield port
        finally:
            for filler in fillers:
                filler.close()


@pytest.mark.parametrize("scheme", ["http", "https"])
async def test_a_timeout_before_the_connection_was_made_says_nothing_was_sent(scheme: str) -> None:
    # A timeout under the connect limit: the whole exchange's deadline ends the connecting, not httpx2.
    with contextlib.ExitStack() as stack:
        if scheme == "http":
            port = stack.enter_context(full_accept_queue())
        else:  # connected, but the TLS handshake is never answered
            port = stack.enter_context(socket.create_server(("127.0.0.1", 0))).getsockname()[1]
        with pytest.raises(UpstreamError) as info:
            await call(httpx2.Request("POST", f"{scheme}://127.0.0.1:{port}/x", content=b"{}"), seconds=0.4)
    assert info.value.reason == "upstream_unreachable"
    assert "nothing was sent" in str(info.value) and "may have reached" not in str(info.value)


async def test_a_connection_that_fails_for_a_named_cause_says_it_and_logs_it_once(
    upstream: Upstream, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # An untrusted certificate, https:// to a plain-HTTP port and a name that does not resolve all read
    # "could not reach ... check that the service is up", and nothing was logged, even with --debug.
    import trustme

    ca = trustme.CA()
    leaf = ca.issue_cert("127.0.0.1")
    pem = tmp_path / "server.pem"
    leaf.private_key_and_cert_chain_pem.write_to_path(str(pem))
    secure = echo_app()
    with serve_asgi(secure, ssl_certfile=str(pem)) as untrusted:
        cases = [
            (untrusted, "its TLS certificate is not trusted"),
            (upstream.base_url.replace("http:", "https:"), "is that port serving plain HTTP?"),
            ("http://send-test-no-such-host.invalid", "its host name does not resolve"),
        ]
        with caplog.at_level(logging.WARNING, logger="mcp_gateway.execution.send"):
            for base_url, cause in cases:
                for _ in range(2):
                    with pytest.raises(UpstreamError) as info:
                        await call(httpx2.Request("POST", f"{base_url}/x?api_key=CANARY-q"))
                    said = str(info.value)
                    assert info.value.reason == "upstream_unreachable" and cause in said, said
                    assert "nothing was sent" in said and "check that the service is up" not in said
                    assert "CANARY" not in said
    logged = [r.getMessage() for r in caplog.records if r.getMessage().startswith("calls to ")]
    assert len(logged) == 3 and not any("CANARY" in line for line in logged), logged
    assert secure.requests == []


async def test_a_read_whose_answer_broke_off_says_so_not_that_the_service_was_unreachable() -> None:
    def fail(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ReadError("reset")

    async with one_shot(fail) as client:
        with pytest.raises(UpstreamError) as info:
            await send(client, httpx2.Request("GET", "https://api.example.com/x"), auth=None, timeout=5, max_bytes=10)
    assert info.value.reason == "upstream_unreachable"
    assert "was lost before its whole answer came" in str(info.value) and "could not reach" not in str(info.value)
    assert str(info.value).endswith("(ReadError); try again")  # not "; then try again", with nothing before


# -- bodies over the wire --------------------------------------------------------------------


async def test_large_json_is_cut_at_max_bytes(upstream: Upstream) -> None:
    outcome = await call(get(upstream.base_url, "/big?n=5000000"), max_bytes=1000)
    assert outcome.truncated is True
    assert isinstance(outcome.data, str) and len(outcome.data) == 1000
    assert outcome.data.startswith('{"data": "aaa')


async def test_text_and_binary_are_cut_at_max_bytes(upstream: Upstream) -> None:
    text = await call(get(upstream.base_url, "/text?n=5000"), max_bytes=100)
    assert (text.data, text.truncated, text.content_type) == ("x" * 100, True, "text/plain")
    binary = await call(get(upstream.base_url, "/binary?n=5000"), max_bytes=100)
    assert binary.truncated is True and binary.data["bytes"] == 100


async def test_sse_over_the_wire(upstream: Upstream) -> None:
    outcome = await call(get(upstream.base_url, "/sse"))
    assert (outcome.data, outcome.truncated) == ([{"n": 1}, {"n": 2}, "done"], False)


def gzip_cut_in_its_echo(request: RawRequest) -> RawAnswer:
    """A gzip body that stops in the middle of an echoed credential, inside a Content-Length that
    matches the cut: a proxy that dropped the rest, a server that crashed while streaming."""
    packed = gzip.compress(b"A" * 3000 + f"token={CANARY}".encode())
    cut = packed[: len(packed) - 20]
    head = f"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Encoding: gzip\r\nContent-Length: {len(cut)}\r\n"
    return RawAnswer(head.encode() + b"\r\n" + cut, close=True)


async def test_a_compressed_body_cut_before_its_end_broke_the_exchange() -> None:
    with RawHttpServer(gzip_cut_in_its_echo) as server:
        for method, write in (("GET", False), ("POST", True)):
            with pytest.raises(UpstreamError) as info:
                await call(get(server.base_url, "/x", method=method))
            assert info.value.reason == "upstream_error"
            assert "broke the HTTP exchange" in str(info.value)
            assert ("may have reached it and taken effect" in str(info.value)) == write
            assert_no_leak(info.value, CANARY[:8])


def error_cut_short(request: RawRequest) -> RawAnswer:
    """An error whose status line and headers came whole, its body cut before its end: shorter than its
    Content-Length (``/length``) or a chunked stream closed before its last chunk (``/chunked``)."""
    body = b'{"message": "Too many requests, slow down'
    if request.target == "/length":
        head = "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 2\r\nContent-Type: application/json\r\n"
        head += f"Content-Length: {len(body) + 500}\r\n\r\n"
        return RawAnswer(head.encode() + body, close=True)
    head = 'HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Bearer error="invalid_token"\r\n'
    head += "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    return RawAnswer(head.encode() + f"{len(body):x}\r\n".encode() + body + b"\r\n", close=True)


async def test_an_error_whose_body_was_cut_short_keeps_its_status_and_what_came() -> None:
    with RawHttpServer(error_cut_short) as server:
        for method in ("GET", "POST"):
            limited = await call(get(server.base_url, "/length", method=method))
            assert (limited.http_status, limited.retry_after, limited.cut_short) == (429, 2.0, True)
            assert limited.data == '{"message": "Too many requests, slow down'
            refused = await call(get(server.base_url, "/chunked", method=method))
            assert (refused.http_status, refused.cut_short) == (401, True)
            assert refused.challenge is not None and refused.challenge.error == "invalid_token"


def success_cut_short(request: RawRequest) -> RawAnswer:
    return RawAnswer(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{}", close=True)


async def test_a_success_whose_body_was_cut_short_broke_the_exchange() -> None:
    with RawHttpServer(success_cut_short) as server, pytest.raises(UpstreamError) as info:
        await call(get(server.base_url, "/x", method="POST"))
    assert info.value.reason == "upstream_error" and "may have reached it and taken effect" in str(info.value)


def head_answer(request: RawRequest) -> RawAnswer:
    status = "404 Not Found" if request.target == "/missing" else "200 OK"
    head = (
        f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: 12345\r\nX-Total: 7\r\n"
        f"X-Total: 8\r\nSet-Cookie: sid={CANARY}\r\nWWW-Authenticate: Bearer realm=x\r\nX-Auth-Token: {CANARY}\r\n"
        f'X-Session-Id: s-{CANARY}\r\nLocation: /next?token={CANARY}\r\nETag: "v1"\r\n\r\n'
    )
    return RawAnswer(head.encode())


async def test_a_head_answers_with_the_headers_safe_to_show() -> None:
    with RawHttpServer(head_answer) as server:
        outcome = await call(get(server.base_url, "/thing", method="HEAD"))
        missing = await call(get(server.base_url, "/missing", method="HEAD"))
    assert (outcome.http_status, outcome.truncated) == (200, False)
    assert outcome.data == {
        "headers": {"content-type": "application/json", "content-length": "12345", "x-total": "7, 8", "etag": '"v1"'}
    }
    assert (missing.http_status, missing.data) == (404, None)


STRAY = b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 15\r\n\r\n{"smuggled": 1}'


def bodiless_then_stray(request: RawRequest) -> RawAnswer:
    """A 204 and a HEAD answer followed, in the same write, by bytes that read as a whole answer."""
    if request.target == "/next":
        return RawAnswer(b"HTTP/1.1 200 OK\r\nContent-Length: 14\r\n\r\n" + b'{"next": true}')
    status = b"204 No Content" if request.method != "HEAD" else b"200 OK"
    return RawAnswer(b"HTTP/1.1 " + status + b"\r\nContent-Type: application/json\r\n\r\n" + STRAY)


@pytest.mark.parametrize("method", ["DELETE", "HEAD"])
async def test_bytes_after_a_bodiless_answer_never_answer_the_next_request(method: str) -> None:
    with RawHttpServer(bodiless_then_stray) as server:
        async with httpx2.AsyncClient() as client:
            first = await send(client, get(server.base_url, "/x", method=method), auth=None, timeout=5, max_bytes=1000)
            after = await send(client, get(server.base_url, "/next"), auth=None, timeout=5, max_bytes=1000)
        assert first.http_status == (204 if method == "DELETE" else 200)
        assert after.data == {"next": True}
        assert [(r.target, r.connection) for r in server.requests] == [("/x", 1), ("/next", 2)]


async def test_a_connection_is_kept_after_an_answer_with_a_body() -> None:
    with RawHttpServer(bodiless_then_stray) as server:
        async with httpx2.AsyncClient() as client:
            for _ in range(2):
                await send(client, get(server.base_url, "/next"), auth=None, timeout=5, max_bytes=1000)
        assert [r.connection for r in server.requests] == [1, 1]


@pytest.mark.anyio
async def test_a_raw_tls_error_is_an_upstream_error_not_a_crash() -> None:
    def handler(request: httpx2.Request) -> httpx2.Response:
        raise ssl.SSLError(1, "[SSL: TLSV1_ALERT_INTERNAL_ERROR] tlsv1 alert internal error")

    async with httpx2.AsyncClient(transport=httpx2.MockTransport(handler)) as client:
        request = httpx2.Request("GET", "https://127.0.0.1:9/x?api_key=do-not-echo")
        with pytest.raises(UpstreamError) as caught:
            await send(client, request, auth=None, timeout=5, max_bytes=1024)
    assert caught.value.reason == "upstream_unreachable"
    assert "do-not-echo" not in str(caught.value)
