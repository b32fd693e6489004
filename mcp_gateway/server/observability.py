"""What operators and load balancers watch: ``/readyz``, ``/metrics``, and answers during a store outage.

- ``/healthz`` (in ``pages``) is liveness: the process serves. ``/readyz`` is readiness: 503 while the
  state database does not answer a cheap check (cached about a second: a table locked elsewhere
  counts), with its ``cause``, or no catalog has loaded yet, so a load balancer takes the instance
  out and puts it back by itself.
- ``/metrics`` is the Prometheus exposition of ``GatewayMetrics``. On the main app it needs an
  operator token (``Authorization: Bearer mgo_...``, ``token create --operator``); on the separate
  ``--metrics-port`` app (loopback by default) it needs none.
- While the database is unreachable, a page or endpoint that needs it answers a short 503 (never a
  bare 500 with a traceback per request); the outage is logged once (``StoreHealth``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from ..core import Gateway
from ..primitives.metrics import CONTENT_TYPE
from ..vocabulary.errors import StoreUnavailable

__all__ = ["STORE_UNAVAILABLE_BODY", "metrics_app", "observability_routes", "store_unavailable_handler"]

STORE_UNAVAILABLE_BODY = (
    b'{"error":"store_unavailable","hint":"The gateway cannot use its database right now; retry in a few seconds."}'
)
_PAGE = (
    "<!doctype html><meta charset=utf-8><title>Temporarily unavailable</title>"
    "<p>The gateway cannot use its database right now. Try again in a few seconds.</p>"
)
STORE_BROKEN_BODY = (
    b'{"error":"store_unavailable","hint":"The gateway\'s database refuses to store anything until its operator '
    b'fixes it (its log says what); nothing was done. Retrying soon will not help: tell the operator."}'
)
_BROKEN_PAGE = (
    "<!doctype html><meta charset=utf-8><title>Unavailable</title>"
    "<p>The gateway's database refuses to store anything until its operator fixes it; nothing was done. "
    "Try again once the operator says the gateway is fixed.</p>"
)


def store_unavailable_handler(gateway: Gateway) -> Callable[[Request, Exception], Awaitable[Response]]:
    """The answer to a request that met a store outage: a short 503, logged once per outage."""

    async def handle(request: Request, exc: Exception) -> Response:
        lasting = isinstance(exc, StoreUnavailable) and exc.lasting
        if isinstance(exc, StoreUnavailable):
            gateway.health.failed(exc)
        headers = {"cache-control": "no-store"} if lasting else {"retry-after": "5", "cache-control": "no-store"}
        if "text/html" in request.headers.get("accept", ""):
            return HTMLResponse(_BROKEN_PAGE if lasting else _PAGE, status_code=503, headers=headers)
        body = STORE_BROKEN_BODY if lasting else STORE_UNAVAILABLE_BODY
        return Response(body, status_code=503, media_type="application/json", headers=headers)

    return handle


def _bearer(request: Request) -> str | None:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


async def _ready(gateway: Gateway) -> Response:
    store_ok = await gateway.health.ready()
    loaded = bool(gateway.states()) or not gateway.manifest.connectors
    body: dict[str, object] = {
        "status": "ready" if store_ok and loaded else "unavailable",
        "store": store_ok,
        "catalog": loaded,
    }
    if not store_ok and gateway.health.cause is not None:
        body["cause"] = gateway.health.cause
    return JSONResponse(body, status_code=200 if store_ok and loaded else 503, headers={"cache-control": "no-store"})


def observability_routes(gateway: Gateway, *, metrics_token: bool = True) -> list[Route]:
    """``/readyz`` and ``/metrics`` (behind an operator token unless ``metrics_token`` is False)."""
    operators = gateway.operators

    async def readyz(_: Request) -> Response:
        return await _ready(gateway)

    async def metrics(request: Request) -> Response:
        if metrics_token and await operators.verify(_bearer(request)) is None:
            return Response(status_code=401, headers={"www-authenticate": "Bearer"})
        return Response(await gateway.scrape.render(), media_type=CONTENT_TYPE, headers={"cache-control": "no-store"})

    return [Route("/readyz", readyz), Route("/metrics", metrics)]


def metrics_app(gateway: Gateway) -> Starlette:
    """The app of ``serve --metrics-port``: ``/metrics`` without a token (bind it to loopback), and ``/readyz``."""
    return Starlette(
        routes=observability_routes(gateway, metrics_token=False),
        exception_handlers={StoreUnavailable: store_unavailable_handler(gateway)},
    )
