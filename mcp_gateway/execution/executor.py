"""How an action runs, per binding kind: the ``Executor`` protocol and the HTTP executor.

The gateway runs every call in two steps. ``prepare`` is pure (no I/O, no credential): it turns
the agent's arguments into what will be sent, so an argument the wire cannot carry is refused
*before* a human is asked to approve the call. ``run`` sends it, with the connector's
last-meter auth (a ``LastMeterAuth``: a non-HTTP executor opens the secret through it, e.g. into
a stdio server's environment), and returns a capped ``Outcome``. A new binding kind adds an
executor and a case in ``core.executors.Executors.for_binding``, whose ``match`` fails the type
check until it has one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import httpx2

from ..auth import LastMeterAuth, MtlsClients
from ..manifest import ConnectorConfig, MtlsAuth
from ..vocabulary.errors import UpstreamError
from ..vocabulary.model import Action
from .http_request import build_request
from .response import Outcome
from .send import RedirectJudge, send
from .tls_trust import TrustedClients

__all__ = ["Executor", "HttpExecutor", "Prepared"]


@dataclass(frozen=True)
class Prepared:
    """A call ready to send. HTTP-like executors fill ``request``; others use ``payload``."""

    action: Action
    connector: ConnectorConfig
    request: httpx2.Request | None = None
    payload: Any = None


class Executor(Protocol):
    def prepare(
        self, action: Action, args: Mapping[str, Any], connector: ConnectorConfig, base_url: str | None
    ) -> Prepared:
        """Place the arguments. Raises ``ArgumentError`` (the agent's mistake) or ``UpstreamError``
        with reason ``connector_error`` (the operator's)."""
        ...

    async def run(
        self, prepared: Prepared, *, auth: LastMeterAuth, max_bytes: int, redirects: RedirectJudge | None = None
    ) -> Outcome:
        """Send it. Raises ``UpstreamError`` when no answer could be had; any answer is an Outcome.
        An HTTP upstream's same-origin redirect of a read is followed only when ``redirects`` lets it."""
        ...


class HttpExecutor:
    """openapi and http bindings: one HTTP exchange through the shared client.

    An ``mtls`` connector's calls go through a client of its own instead, which presents the
    stored certificate in the TLS handshake (``client_certificates``), and a connector with a
    ``tls.ca_file`` through one that trusts that CA (``trusted``); both closed by ``aclose``.
    """

    def __init__(
        self,
        client: httpx2.AsyncClient,
        *,
        client_certificates: MtlsClients | None = None,
        trusted: TrustedClients | None = None,
    ) -> None:
        self._client = client
        self._certificates = client_certificates if client_certificates is not None else MtlsClients()
        self.trusted = trusted if trusted is not None else TrustedClients()

    def prepare(
        self, action: Action, args: Mapping[str, Any], connector: ConnectorConfig, base_url: str | None
    ) -> Prepared:
        if not base_url:
            raise UpstreamError(
                "connector_error",
                f"Connector {connector.slug!r} has no base_url; the operator must set one in the manifest.",
            )
        request = build_request(action, args, base_url=base_url, static_headers=connector.headers)
        return Prepared(action=action, connector=connector, request=request)

    async def run(
        self, prepared: Prepared, *, auth: LastMeterAuth, max_bytes: int, redirects: RedirectJudge | None = None
    ) -> Outcome:
        assert prepared.request is not None
        return await send(
            self.client_for(prepared.connector, auth),
            prepared.request,
            auth=auth,
            timeout=prepared.connector.timeout,
            max_bytes=max_bytes,
            trace_context=prepared.connector.trace_context,
            url_template=getattr(prepared.action.binding, "url", None),
            redirects=redirects,
        )

    def client_for(self, connector: ConnectorConfig, auth: httpx2.Auth) -> httpx2.AsyncClient:
        """The client to send ``connector``'s request through: the shared one, for ``mtls`` the one
        holding the stored certificate, for a ``tls.ca_file`` the one trusting that CA. Raises
        ``CredentialError`` when that certificate cannot be loaded, ``UpstreamError`` for an unusable CA file.

        It takes any ``httpx2.Auth`` because sync's GraphQL introspection picks its client here too;
        only the gateway's ``LastMeterAuth`` carries a certificate to present."""
        if isinstance(connector.auth, MtlsAuth) and isinstance(auth, LastMeterAuth) and auth.credential is not None:
            return self._certificates.client_for(connector.auth, auth.credential, ca_file=connector.ca_file)
        # Without a credential the auth flow raises CredentialMissing before anything is sent.
        if connector.ca_file is not None and not isinstance(connector.auth, MtlsAuth):
            return self.trusted.client_for(connector.ca_file)
        return self._client

    async def aclose(self) -> None:
        await self._certificates.aclose()
        await self.trusted.aclose()
