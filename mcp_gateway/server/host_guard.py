"""DNS-rebinding protection for every route: ``Host`` and ``Origin`` checked against one allow-list.

A page on ``evil.example`` whose DNS name is rebound to 127.0.0.1 can make the user's browser send
requests to the gateway with ``Host: evil.example`` and ``Origin: http://evil.example``. The MCP
SDK checks both on ``/mcp`` only; ``HostGuard`` applies the same rules to everything the gateway
serves (human pages, the operator overview and its sign-in, the OAuth callback, health, readiness,
metrics), answering as the SDK does: 421 for a foreign ``Host``, 403 for a foreign ``Origin``.

The allow-list is derived from the address actually served and ``public_url`` (``allow_list``):
loopback names on any port, the bound ``host:port``, and the public URL's host and origin.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["AllowList", "HostGuard", "allow_list"]


@dataclass(frozen=True)
class AllowList:
    hosts: frozenset[str]
    """Exact ``host[:port]`` values, or ``host:*`` for any port."""
    origins: frozenset[str]
    """Exact ``scheme://host[:port]`` values, or ``scheme://host:*`` for any port."""

    def host_ok(self, host: str | None) -> bool:
        # No Host header at all: not a browser (every browser sends one, and a rebinding attack needs a
        # browser), but a load balancer's HTTP/1.0 health check. A Host that is present must match.
        return host is None or _matches(host.lower(), self.hosts)

    def origin_ok(self, origin: str | None) -> bool:
        # No Origin: not a cross-site browser request (same-origin GETs, curl, MCP clients).
        return not origin or _matches(origin.lower(), self.origins)

    def transport_security(self) -> TransportSecuritySettings:
        """The same list for the SDK's own check on ``/mcp``."""
        return TransportSecuritySettings(
            enable_dns_rebinding_protection=True, allowed_hosts=sorted(self.hosts), allowed_origins=sorted(self.origins)
        )


def allow_list(host: str, port: int, public_url: str, *, extra_hosts: Iterable[str] = ()) -> AllowList:
    """What may name this gateway: loopback on any port, the bound address, and ``public_url``."""
    public = urlsplit(public_url)
    hosts = {f"{host}:{port}".lower(), "127.0.0.1:*", "localhost:*", "[::1]:*", *(h.lower() for h in extra_hosts)}
    origins = {"http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"}
    served = host not in ("0.0.0.0", "::", "")
    if served:
        origins.add(f"http://{host}:{port}".lower())
    if port == 80:
        # Clients leave the scheme's default port out of Host and Origin: served on it, the bare name is it.
        for name in ("127.0.0.1", "localhost", "[::1]", *([host] if served else [])):
            hosts.add(name.lower())
            origins.add(f"http://{name}".lower())
    if public.netloc:
        hosts.add(public.netloc.lower())
        origins.add(f"{public.scheme}://{public.netloc}".lower())
        default = 443 if public.scheme == "https" else 80
        bare = public.netloc.rpartition("@")[2].lower()
        if public.port is None:  # a browser sends the default port as nothing
            hosts.add(f"{bare}:{default}")
        elif public.port == default:  # written with its default port, which a browser leaves out
            name = bare.rsplit(":", 1)[0]
            hosts.add(name)
            origins.add(f"{public.scheme}://{name}".lower())
    return AllowList(frozenset(hosts), frozenset(origins))


def _matches(value: str, allowed: frozenset[str]) -> bool:
    if value in allowed:
        return True
    base, sep, port = value.rpartition(":")
    return bool(sep) and port.isdigit() and f"{base}:*" in allowed


class HostGuard:
    """ASGI middleware: refuse any HTTP request whose ``Host`` or ``Origin`` is not on the allow-list."""

    def __init__(self, app: ASGIApp, allowed: AllowList) -> None:
        self.app = app
        self.allowed = allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        host = origin = None
        for name, value in scope.get("headers", []):
            if name == b"host":
                host = value.decode("latin-1")
            elif name == b"origin":
                origin = value.decode("latin-1")
        if not self.allowed.host_ok(host):
            await _refuse(send, 421, b"Invalid Host header")
        elif not self.allowed.origin_ok(origin):
            await _refuse(send, 403, b"Invalid Origin header")
        else:
            await self.app(scope, receive, send)


async def _refuse(send: Send, status: int, body: bytes) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})
