"""``mtls``: a client certificate, presented in the TLS handshake (RFC 8446 section 4.4.2).

The certificate belongs to the connection, not to the request, so unlike the other kinds nothing
is written on the request. Each stored mTLS credential gets an outbound client of its own
(``MtlsClients``), whose SSL context holds that certificate and key; the HTTP executor sends an
mTLS connector's calls through it, and every other connector keeps the shared client.

Python's ``ssl`` loads a key only from a path. The PEM goes into an anonymous in-memory file
(``memfd_create``: it has no name in any directory and vanishes with its descriptor), which
``load_cert_chain`` reads through ``/proc/self/fd``; where that does not exist, into a 0600
temporary file (in ``/dev/shm`` when there is one, so it never reaches a disk) that is deleted in
a ``finally`` before anything is sent. Either way nothing is left behind once the context is built.
OpenSSL keeps the key in process memory for as long as the client lives.

A refused certificate is reported as such (``auth_failed``, with what to do), a server
certificate we do not trust as ``upstream_unreachable`` naming ``ca_file``; neither message holds
anything of the credential.
"""

from __future__ import annotations

import contextlib
import os
import re
import ssl
import tempfile
from collections.abc import Callable, Generator
from typing import TypeVar

import httpx2

from ..manifest import MtlsAuth
from ..primitives.cookies import no_cookies
from ..primitives.secrets import CredentialKey, SealedCredential, SecretValue
from ..vocabulary.errors import CredentialError, UpstreamError
from ._base import secret_fields

__all__ = ["MtlsClients", "client_tls_context"]

_RESET_HINT = "enter the certificate and key again with `mcp-gateway secret set` (JSON {cert_pem, key_pem})"
_CERTIFICATE = re.compile(r"-----BEGIN CERTIFICATE-----")
_PRIVATE_KEY = re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----")
_SHM = "/dev/shm"
_E = TypeVar("_E", bound=BaseException)


def client_tls_context(secret: SecretValue, *, cafile: str | None = None, in_memory: bool = True) -> ssl.SSLContext:
    """An SSL context that verifies the server (``cafile``, else the system's trust store) and
    presents the stored certificate and key.

    Args:
        secret: the opened ``{cert_pem, key_pem}`` credential (the certificate may carry its chain).
        cafile: a PEM file of the CAs to trust for the server instead of the system's.
        in_memory: use an anonymous memory file when the platform has one (False forces the 0600
            temporary file, for tests of that path).

    Raises:
        CredentialError: the PEM is missing, encrypted, unreadable or the key does not match the
            certificate. The message names the field, never its content.
        UpstreamError: ``connector_error`` when ``cafile`` cannot be loaded (the operator's to fix).
    """
    fields = secret_fields("mtls", secret, ("cert_pem", "key_pem"))
    cert, key = fields["cert_pem"], fields["key_pem"]
    if not _CERTIFICATE.search(cert):
        raise CredentialError(f"the stored mtls cert_pem holds no PEM certificate; {_RESET_HINT}")
    if not _PRIVATE_KEY.search(key):
        raise CredentialError(f"the stored mtls key_pem holds no PEM private key; {_RESET_HINT}")
    if "ENCRYPTED" in key:
        raise CredentialError(
            "the stored mtls private key is protected by a passphrase, which the gateway cannot enter; "
            "store it decrypted (`openssl pkey -in key.pem -out plain-key.pem`), then set the secret again"
        )
    context = _trust(cafile)
    pem = f"{cert.strip()}\n{key.strip()}\n".encode()
    try:
        with _pem_path(pem, in_memory=in_memory) as path:
            # password=b"": an encrypted key that slipped past the check above fails here instead of
            # OpenSSL prompting for a passphrase on the terminal.
            context.load_cert_chain(path, password=b"")
    except ssl.SSLError as exc:
        # OpenSSL's reason code says which problem it is; the exception is not chained (no content).
        if exc.reason == "KEY_VALUES_MISMATCH":
            problem = "the stored mtls private key does not belong to the certificate"
        else:
            problem = "the stored mtls certificate or key is not valid PEM"
        raise CredentialError(f"{problem}; {_RESET_HINT}") from None
    return context


def _trust(cafile: str | None) -> ssl.SSLContext:
    if cafile is None:
        # The same trust as the shared client (system store, environment ignored).
        return httpx2.create_ssl_context(trust_env=False)
    try:
        return ssl.create_default_context(cafile=cafile)
    except (OSError, ssl.SSLError) as exc:  # SSLError is an OSError: a file that is not PEM
        why = getattr(exc, "reason", None) or exc.strerror or "unreadable"
        raise UpstreamError(
            "connector_error",
            f"the connector's auth.ca_file {cafile!r} cannot be used ({why}); the operator must point it at a "
            "readable PEM file of CA certificates",
        ) from None


@contextlib.contextmanager
def _pem_path(pem: bytes, *, in_memory: bool) -> Generator[str]:
    """A path that reads back ``pem``, gone when the block ends (however it ends)."""
    if in_memory and hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd"):
        fd = os.memfd_create("mcp-gateway-client-cert", os.MFD_CLOEXEC)
        try:
            os.write(fd, pem)
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    folder = _SHM if os.path.isdir(_SHM) and os.access(_SHM, os.W_OK) else None
    fd, path = tempfile.mkstemp(prefix="mcp-gateway-", suffix=".pem", dir=folder)  # created 0600, O_EXCL
    try:
        os.fchmod(fd, 0o600)  # mkstemp promises it; say so where the reader looks
        os.write(fd, pem)
        os.close(fd)
        fd = -1
        yield path
    finally:
        if fd >= 0:
            os.close(fd)
        os.unlink(path)


class MtlsClients:
    """Outbound clients that present a client certificate: one per stored credential, reused.

    A client is rebuilt when its credential is stored again (its sealed bytes change) or the
    connector's ``auth:`` block changes; the one it replaces stays open until ``aclose`` so a call
    still running on it is not cut off.

    Args:
        resolve: turns the manifest's ``ca_file`` into a path (relative ones against its folder).
    """

    def __init__(self, *, resolve: Callable[[str], str] = str) -> None:
        self._resolve = resolve
        self._clients: dict[CredentialKey, tuple[tuple[str, MtlsAuth, str | None], httpx2.AsyncClient]] = {}
        self._retired: list[httpx2.AsyncClient] = []

    def client_for(
        self, config: MtlsAuth, credential: SealedCredential, *, ca_file: str | None = None
    ) -> httpx2.AsyncClient:
        """The client for ``credential``, built on first use. Opens the credential only to build it.
        ``ca_file``: the connector's CA file (``tls.ca_file``), else ``config.ca_file``.

        Raises:
            CredentialError: the stored certificate and key cannot be loaded.
            UpstreamError: ``connector_error`` for an unusable ``ca_file``.
        """
        ca_file = ca_file or config.ca_file
        version = (credential.fingerprint, config, ca_file)
        entry = self._clients.get(credential.key)
        if entry is not None and entry[0] == version:
            return entry[1]
        cafile = self._resolve(ca_file) if ca_file else None
        context = client_tls_context(credential.open(), cafile=cafile)
        transport = _CertificateTransport(
            httpx2.AsyncHTTPTransport(verify=context, trust_env=False), connector=credential.key.connector
        )
        # trust_env=False and no cookies kept, as for the shared client: a proxy from the environment
        # sees what we send, and an upstream's Set-Cookie would only grow memory.
        client = httpx2.AsyncClient(transport=transport, trust_env=False, follow_redirects=False, cookies=no_cookies())
        if entry is not None:
            self._retired.append(entry[1])
        self._clients[credential.key] = (version, client)
        return client

    def __len__(self) -> int:
        return len(self._clients)

    async def aclose(self) -> None:
        clients = [client for _, client in self._clients.values()] + self._retired
        self._clients, self._retired = {}, []
        for client in clients:
            await client.aclose()


class _CertificateTransport(httpx2.AsyncBaseTransport):
    """The TLS transport, with TLS failures explained for the agent instead of a bare ``ConnectError``."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, *, connector: str) -> None:
        self._inner = inner
        self._connector = connector

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        try:
            return await self._inner.handle_async_request(request)
        # ssl.SSLError too: an alert read after the handshake escapes httpcore2's anyio backend unwrapped.
        except (
            httpx2.ConnectError,
            httpx2.ReadError,
            httpx2.WriteError,
            httpx2.RemoteProtocolError,
            ssl.SSLError,
        ) as exc:
            refusal = self._explain(exc, request.url)
            if refusal is None:
                raise
            raise refusal from None

    def _explain(self, exc: Exception, url: httpx2.URL) -> UpstreamError | None:
        where = f"{url.host}:{url.port}" if url.port is not None else url.host
        tls = _cause(exc, ssl.SSLError)
        if isinstance(tls, ssl.SSLCertVerificationError):
            return UpstreamError(
                "upstream_unreachable",
                f"the TLS handshake with {where} failed: its server certificate is not trusted "
                f"({tls.verify_message}). If the service uses a private CA, the operator sets tls.ca_file for "
                f"connector {self._connector!r} to that CA's PEM file",
            )
        # TLS 1.3 clients finish their side of the handshake before the server checks the certificate,
        # so a refusal shows up on the first read or write: the server hangs up (EOF or reset) unanswered.
        hung_up = (isinstance(exc, httpx2.RemoteProtocolError) and "without sending a response" in str(exc)) or (
            isinstance(exc, httpx2.ReadError | httpx2.WriteError)
            and _cause(exc, (ConnectionResetError, BrokenPipeError)) is not None
        )
        if tls is None and not hung_up:
            return None  # connection refused, DNS, ...: send() reports the upstream as unreachable
        if tls is not None and not _refusal(tls):
            return UpstreamError(
                "upstream_unreachable",
                f"the TLS handshake with {where} failed ({_why(tls)}); check that connector {self._connector!r}'s "
                "base_url is the service's https address and port",
            )
        return UpstreamError(
            "auth_failed",
            f"{where} refused the TLS handshake with connector {self._connector!r}'s client certificate "
            f"({_why(tls)}): servers do this for a certificate they do not trust or that has expired. Ask the user "
            f"to reconnect {self._connector!r} with a valid certificate and key (call connect for a link). If the "
            "certificate is valid, the service may be failing; try again later",
        )

    async def aclose(self) -> None:
        await self._inner.aclose()


def _cause(exc: BaseException, kind: type[_E] | tuple[type[_E], ...]) -> _E | None:
    """The first exception of ``kind`` in ``exc``'s chain of causes, or None."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, kind):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def _refusal(tls: ssl.SSLError) -> bool:
    # An alert is the peer saying no (bad_certificate, unknown_ca, certificate_required ...); an EOF
    # in the handshake is a peer that hangs up instead. Anything else (WRONG_VERSION_NUMBER: no TLS
    # there at all) is not about our certificate.
    reason = tls.reason or ""
    return "ALERT" in reason or "EOF" in reason or isinstance(tls, ssl.SSLEOFError)


def _why(tls: ssl.SSLError | None) -> str:
    if tls is None:
        return "it hung up without answering"
    # OpenSSL's reason code (``TLSV1_ALERT_UNKNOWN_CA``) names the problem; it never holds key material.
    reason = tls.reason or type(tls).__name__
    return f"TLS alert {reason}" if "ALERT" in reason else f"TLS error {reason}"
