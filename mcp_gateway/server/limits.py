"""Connection limits of the HTTP transport: what uvicorn is told, and the guard it lacks.

- **Idle keep-alive**: uvicorn's ``timeout_keep_alive`` closes a connection idle after a response.
- **Slow headers and slow bodies**: uvicorn has no timeout for reading a request, so a client that
  opens a connection and never finishes its headers (or its body) holds it forever (slowloris).
  ``guarded_h11`` is uvicorn's h11 protocol with one timer per request: armed when the request's
  first byte arrives (or the connection opens), disarmed once the whole request, headers and body,
  has been read; when it fires the connection is closed. A response that takes long (a call waiting
  for an approval, an SSE stream) is not affected: the timer covers reading the request only.
- **Concurrent connections**: uvicorn's ``limit_concurrency`` answers 503 beyond it. An open session
  may hold two connections at once (its GET stream of server messages and a POST in flight), so the
  default is ``connections_for(max_sessions)``, and a limit at or below ``max_sessions`` is refused:
  otherwise new sessions meet 503s from the connection limit before the session limit speaks.
- **MCP sessions**: the SDK's session manager refuses a new session beyond ``max_sessions`` and
  ends one idle for ``session_idle_timeout``.
- **Header size**: ``h11_max_incomplete_event_size`` bounds what a client may send before its headers end.
- **Protocol noise**: uvicorn logs a line per malformed request or refused upgrade, which any client
  reaching the port can repeat hundreds of times a second; ``guarded_h11`` logs the first, naming the
  client, then at most one per ``NOISE_WINDOW`` seconds with how many it left out.
- **Drain**: on SIGTERM, with a ``shutdown_delay``, the server first keeps serving while
  ``/healthz`` answers 503 (``DrainGate``), so a load balancer's health check takes the instance
  out before it stops listening (no request lands on a closing socket); then uvicorn stops
  accepting and waits at most ``timeout_graceful_shutdown`` for the requests in flight (long-lived
  MCP streams included) before closing them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import MutableMapping
from dataclasses import dataclass
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from ..services.logs import LogThrottle
from ..vocabulary.errors import GatewayError

__all__ = ["CONNECTION_HEADROOM", "ConnectionLimits", "DrainGate", "connections_for", "guarded_h11"]

CONNECTION_HEADROOM = 100
"""Connections beyond two per session: pages, health checks, metrics scrapes, sessions opening."""


def connections_for(max_sessions: int) -> int:
    """The default connection limit for ``max_sessions``: every session's stream and request at once."""
    return 2 * max_sessions + CONNECTION_HEADROOM


@dataclass(frozen=True)
class ConnectionLimits:
    """The HTTP server's limits; the defaults suit a gateway behind a load balancer."""

    request_timeout: float = 10.0
    """Seconds a client has to send a whole request (headers and body) once it started one."""
    keep_alive: float = 5.0
    """Seconds an idle keep-alive connection stays open after a response."""
    max_connections: int | None = None
    """Connections and requests in flight at once; beyond it, new requests get a 503. None:
    ``connections_for(max_sessions)``; it must exceed ``max_sessions``."""
    drain_timeout: float = 10.0
    """Seconds a SIGTERM waits for the requests in flight before closing them."""
    max_header_bytes: int = 64 * 1024
    max_sessions: int = 1000
    """Open MCP sessions (2025-11-25 protocol) at once; beyond it a new session is refused."""
    session_idle_timeout: float = 1800.0
    shutdown_delay: float = 0.0
    """Seconds between SIGTERM and closing the listener, while ``/healthz`` answers 503 (for a load balancer)."""

    def __post_init__(self) -> None:
        if self.max_connections is not None and self.max_connections <= self.max_sessions:
            raise GatewayError(
                f"--max-connections {self.max_connections} does not exceed --max-sessions {self.max_sessions}: "
                "each open session may hold two connections at once (its stream and a request), so new "
                "sessions would be refused with 503 before the session limit is reached; leave "
                f"--max-connections out (it is then {connections_for(self.max_sessions)}), raise it, or lower "
                "--max-sessions"
            )

    @property
    def connection_limit(self) -> int:
        """``max_connections``, or its default for ``max_sessions``."""
        return self.max_connections if self.max_connections is not None else connections_for(self.max_sessions)


class DrainGate:
    """ASGI middleware: once ``draining``, the health checks answer 503 and everything else is served."""

    PATHS = frozenset({"/healthz", "/readyz"})

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.draining = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.draining and scope["type"] == "http" and scope["path"] in self.PATHS:
            body = b"draining\n"
            headers = [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())]
            await send({"type": "http.response.start", "status": 503, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)


NOISE_WINDOW = 10.0
"""Seconds between two log lines about the same kind of malformed request."""

_NOISE = {
    "Invalid HTTP request received.": "an invalid HTTP request from %s, answered 400",
    "Unsupported upgrade request.": "an upgrade request (WebSocket) from %s, answered as plain HTTP",
}
_HINTS = ("No supported WebSocket library detected",)
"""uvicorn's advice to install a package for a protocol the gateway does not offer: not the operator's fix."""


_noise = LogThrottle(NOISE_WINDOW)


class _ConnectionLog(logging.LoggerAdapter[logging.Logger]):
    """uvicorn's per-connection logger with its protocol noise throttled (``_noise``) and told with the
    client's address; anything else passes as it is."""

    def __init__(self, logger: logging.Logger, client: str) -> None:
        super().__init__(logger, {})
        self._client = client

    @property
    def level(self) -> int:  # read by uvicorn before its trace lines
        return self.logger.level

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, MutableMapping[str, Any]]:
        return msg, kwargs

    def log(self, level: int, msg: object, *args: object, **kwargs: Any) -> None:
        if isinstance(msg, str) and msg.startswith(_HINTS):
            return
        what = _NOISE.get(msg) if isinstance(msg, str) else None
        if what is None:
            super().log(level, msg, *args, **kwargs)
            return
        left_out = _noise.admit(what)
        if left_out is None:
            return
        self.logger.warning(what + "%s", self._client, _noise.more(left_out))


class _GuardedH11(H11Protocol):
    request_timeout: float = 10.0
    _guard: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        client = f"{self.client[0]}:{self.client[1]}" if self.client else "an unknown client"
        throttled: Any = _ConnectionLog(logging.getLogger("uvicorn.error"), client)  # what uvicorn logs to
        self.logger = throttled
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self._guard is None and (self.cycle is None or self.cycle.response_complete):
            self._arm()  # the first bytes of a next request on a kept-alive connection
        super().data_received(data)
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete and not cycle.more_body:
            self._disarm()  # the whole request is in: from here on it is the app's time

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._guard = self.loop.call_later(self.request_timeout, self._expired)

    def _disarm(self) -> None:
        if self._guard is not None:
            self._guard.cancel()
            self._guard = None

    def _expired(self) -> None:
        self._guard = None
        if not self.transport.is_closing():
            self.transport.close()


def guarded_h11(request_timeout: float) -> type[H11Protocol]:
    """uvicorn's h11 protocol, closing a connection whose request is not read within ``request_timeout``."""
    return type("GuardedH11Protocol", (_GuardedH11,), {"request_timeout": request_timeout})
