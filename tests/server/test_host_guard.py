"""Host and Origin checked on every route (``server.host_guard``), against DNS rebinding."""

from __future__ import annotations

import pytest
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from mcp_gateway.server.host_guard import HostGuard, allow_list


def app(public_url: str = "http://127.0.0.1:8765") -> HostGuard:
    async def ok(_: object) -> PlainTextResponse:
        return PlainTextResponse("ok")

    routes = [Route(path, ok, methods=["GET", "POST"]) for path in ("/healthz", "/operator", "/connect/x")]
    return HostGuard(Starlette(routes=routes), allow_list("127.0.0.1", 8765, public_url))


@pytest.mark.parametrize("path", ["/healthz", "/operator", "/connect/x"])
@pytest.mark.parametrize("host", ["evil.example", "evil.example:8765", "127.0.0.1.evil.example:8765", ""])
def test_a_foreign_host_is_421_on_every_route(path: str, host: str) -> None:
    with TestClient(app(), base_url="http://127.0.0.1:8765") as client:
        assert client.get(path, headers={"host": host}).status_code == 421


@pytest.mark.parametrize("host", ["127.0.0.1:8765", "localhost:9999", "[::1]:8765", "LOCALHOST:1"])
def test_loopback_names_pass(host: str) -> None:
    with TestClient(app()) as client:
        assert client.get("/operator", headers={"host": host}).text == "ok"


@pytest.mark.parametrize(
    "origin", ["http://evil.example", "http://evil.example:8765", "null", "https://127.0.0.1:8765"]
)
def test_a_rebinding_origin_is_403(origin: str) -> None:
    with TestClient(app()) as client:
        response = client.post("/operator", headers={"host": "127.0.0.1:8765", "origin": origin})
        assert response.status_code == 403


def test_the_public_url_names_the_gateway_too() -> None:
    with TestClient(app("https://gateway.example.com")) as client:
        for host in ("gateway.example.com", "gateway.example.com:443"):
            response = client.post("/operator", headers={"host": host, "origin": "https://gateway.example.com"})
            assert response.text == "ok"
        assert client.get("/operator", headers={"host": "gateway.example.com:444"}).status_code == 421


def test_on_a_default_port_the_name_without_it_passes() -> None:
    # Clients leave :80 and :443 out of Host and Origin: every standard client got 421 or 403.
    served = allow_list("127.0.0.1", 80, "http://127.0.0.1:80")
    for host in ("127.0.0.1", "localhost", "127.0.0.1:80"):
        assert served.host_ok(host), host
    assert served.origin_ok("http://127.0.0.1") and served.origin_ok("http://localhost")
    assert not served.host_ok("evil.example") and not served.origin_ok("http://evil.example")
    written = allow_list("0.0.0.0", 8443, "https://gw.example.test:443/")
    assert written.host_ok("gw.example.test") and written.origin_ok("https://gw.example.test")
    assert not allow_list("127.0.0.1", 8765, "http://127.0.0.1:8765").host_ok("127.0.0.1")  # not served on 80


def test_the_sdk_gets_the_same_list() -> None:
    settings = allow_list("127.0.0.1", 8765, "http://127.0.0.1:8765").transport_security()
    assert "127.0.0.1:8765" in settings.allowed_hosts and "http://127.0.0.1:*" in settings.allowed_origins


def test_a_request_without_host_is_not_a_browser_and_passes() -> None:
    """A load balancer's HTTP/1.0 health check sends no Host; a browser always does."""
    import anyio

    guard = app()
    sent: list[dict[str, object]] = []

    async def run() -> None:
        scope = {"type": "http", "method": "GET", "path": "/healthz", "headers": [], "query_string": b"",
                 "http_version": "1.0", "scheme": "http", "server": ("127.0.0.1", 8765), "root_path": ""}  # fmt: skip

        async def receive() -> dict[str, object]:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: dict[str, object]) -> None:
            sent.append(message)

        await guard(scope, receive, send)

    anyio.run(run)
    assert sent[0]["status"] == 200
