"""Which server certificates a connector trusts: the system's store, or the CAs of its ``tls.ca_file``
(a private CA). One setting, used by the connector's calls (``TrustedClients``, picked by the HTTP
executor), its OAuth2 token requests to the same host, and ``doctor``'s handshake (``trust_context``)."""

from __future__ import annotations

import os
import ssl
from collections.abc import Callable

import httpx2

from ..primitives.cookies import no_cookies
from ..vocabulary.errors import UpstreamError

__all__ = ["TrustedClients", "trust_context"]


def trust_context(cafile: str | None) -> ssl.SSLContext:
    """An SSL context verifying servers against ``cafile`` (a PEM file of CA certificates, trusted
    instead of the system's store), else the system's store as the shared client does (the
    environment ignored).

    Raises:
        OSError: ``cafile`` cannot be read, or holds no PEM certificate (``ssl.SSLError``).
    """
    if cafile is None:
        return httpx2.create_ssl_context(trust_env=False)
    return ssl.create_default_context(cafile=cafile)


class TrustedClients:
    """Outbound clients that trust a connector's own CAs: one per CA file, reused, and made again when
    the file changes (a CA rotated in place). The one replaced stays open until ``aclose``, so a call
    still running on it is not cut off.

    Args:
        resolve: turns the manifest's ``ca_file`` into a path (relative ones against its folder).
    """

    def __init__(self, *, resolve: Callable[[str], str] = str) -> None:
        self._resolve = resolve
        self._clients: dict[str, tuple[int, httpx2.AsyncClient]] = {}
        self._retired: list[httpx2.AsyncClient] = []

    def client_for(self, ca_file: str) -> httpx2.AsyncClient:
        """The client trusting ``ca_file``'s CAs.

        Raises:
            UpstreamError: ``connector_error`` when the file cannot be used (the operator's to fix).
        """
        path = self._resolve(ca_file)
        try:
            stamp = os.stat(path).st_mtime_ns
        except OSError:
            stamp = -1
        entry = self._clients.get(path)
        if entry is not None and entry[0] == stamp:
            return entry[1]
        try:
            context = trust_context(path)
        except OSError as exc:  # SSLError is an OSError: a file that is not PEM
            why = getattr(exc, "reason", None) or exc.strerror or "unreadable"
            raise UpstreamError(
                "connector_error",
                f"the connector's tls.ca_file {ca_file!r} cannot be used ({why}); the operator must point it at "
                "a readable PEM file of CA certificates",
            ) from None
        # As the shared client: no proxy from the environment, no cookie kept.
        transport = httpx2.AsyncHTTPTransport(verify=context, trust_env=False)
        client = httpx2.AsyncClient(transport=transport, trust_env=False, follow_redirects=False, cookies=no_cookies())
        if entry is not None:
            self._retired.append(entry[1])
        self._clients[path] = (stamp, client)
        return client

    async def aclose(self) -> None:
        clients = [client for _, client in self._clients.values()] + self._retired
        self._clients, self._retired = {}, []
        for client in clients:
            await client.aclose()
