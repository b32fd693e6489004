"""mTLS against a real TLS server on 127.0.0.1 that requires and verifies client certificates.

Certificates are made per test run with ``trustme``: one CA signs the server's certificate and the
client's; a second, unrelated CA signs a "wrong" client certificate the server must refuse.
"""

from __future__ import annotations

import os
import socket
import ssl
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx2
import pytest
import trustme
from cryptography.hazmat.primitives import serialization

from mcp_gateway.auth import LastMeterAuth
from mcp_gateway.auth.mtls import MtlsClients, _pem_path, client_tls_context
from mcp_gateway.execution import send
from mcp_gateway.execution.executor import HttpExecutor
from mcp_gateway.manifest import ConnectorConfig, MtlsAuth
from mcp_gateway.primitives.secrets import CredentialKey, SecretValue
from mcp_gateway.vocabulary.errors import CredentialError, CredentialMissing, UpstreamError
from tests.support.sealed import sealed_credential
from tests.support.upstream import EchoApp, LoopbackServer, echo_app

CANARY = "canary-7f3a9c1e-never-show-me"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass(frozen=True)
class Pki:
    ca_file: Path
    client: dict[str, str]
    """The good ``{cert_pem, key_pem}`` secret (signed by the server's CA)."""
    rogue: dict[str, str]
    """A well-formed certificate and key from a CA the server does not trust."""
    other_key: str
    """A private key that belongs to neither certificate."""
    server_pem: Path


def _identity(cert: trustme.LeafCert) -> dict[str, str]:
    # Text before the key's BEGIN line is ignored by PEM readers: a marker that must never be printed.
    key = f"{CANARY} (comment before the key)\n" + cert.private_key_pem.bytes().decode()
    return {"cert_pem": "".join(p.bytes().decode() for p in cert.cert_chain_pems), "key_pem": key}


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    folder = tmp_path_factory.mktemp("pki")
    ca, rogue_ca = trustme.CA(), trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost")
    server_pem = folder / "server.pem"
    server.private_key_and_cert_chain_pem.write_to_path(str(server_pem))
    ca_file = folder / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    return Pki(
        ca_file=ca_file,
        client=_identity(ca.issue_cert("client@mcp-gateway.test")),
        rogue=_identity(rogue_ca.issue_cert("client@mcp-gateway.test")),
        other_key=ca.issue_cert("someone-else").private_key_pem.bytes().decode(),
        server_pem=server_pem,
    )


@pytest.fixture
def mtls_server(pki: Pki) -> Iterator[tuple[EchoApp, str]]:
    app = echo_app()
    with LoopbackServer(
        app,
        ssl_certfile=str(pki.server_pem),
        ssl_ca_certs=str(pki.ca_file),
        ssl_cert_reqs=ssl.CERT_REQUIRED,
    ) as server:
        yield app, server.base_url


def _config(pki: Pki, *, ca: bool = True) -> MtlsAuth:
    return MtlsAuth(type="mtls", ca_file=str(pki.ca_file) if ca else None)


async def _get(client: httpx2.AsyncClient, url: str, auth: httpx2.Auth) -> int:
    outcome = await send(client, httpx2.Request("GET", url), auth=auth, timeout=10, max_bytes=10_000)
    return outcome.http_status


def _clean(message: str, pki: Pki) -> None:
    assert CANARY not in message
    for secret in (pki.client, pki.rogue):
        for line in secret["key_pem"].splitlines()[2:-1]:  # the base64 body of each key
            assert line not in message
    assert "Traceback" not in message


# -- the handshake, for real -------------------------------------------------------------------


@pytest.mark.anyio
async def test_the_stored_certificate_is_presented_and_accepted(pki: Pki, mtls_server: tuple[EchoApp, str]) -> None:
    app, base_url = mtls_server
    sealed = await sealed_credential("bank", pki.client)
    config = _config(pki)
    clients = MtlsClients()
    try:
        client = clients.client_for(config, sealed)
        assert await _get(client, f"{base_url}/accounts", LastMeterAuth(config, sealed)) == 200
        # Reused while the credential and the config stay the same.
        assert clients.client_for(config, sealed) is client
        assert await _get(client, f"{base_url}/accounts/2", LastMeterAuth(config, sealed)) == 200
    finally:
        await clients.aclose()
    assert [r.path for r in app.requests] == ["/accounts", "/accounts/2"]
    assert "authorization" not in app.requests[0].headers  # nothing of the credential rides on the request


@pytest.mark.anyio
async def test_a_wrong_certificate_fails_clearly(pki: Pki, mtls_server: tuple[EchoApp, str]) -> None:
    app, base_url = mtls_server
    sealed = await sealed_credential("bank", pki.rogue)
    clients = MtlsClients()
    try:
        client = clients.client_for(_config(pki), sealed)
        with pytest.raises(UpstreamError) as info:
            await _get(client, f"{base_url}/accounts", LastMeterAuth(_config(pki), sealed))
    finally:
        await clients.aclose()
    error = info.value
    assert error.reason == "auth_failed"
    message = str(error)
    assert "refused the TLS handshake with connector 'bank''s client certificate" in message
    assert "reconnect 'bank' with a valid certificate and key" in message
    assert error.__cause__ is None and error.__suppress_context__
    _clean(message, pki)
    assert app.requests == []  # the request never reached the application


@pytest.mark.anyio
async def test_a_raw_tls_server_refusing_the_certificate_is_reported_the_same_way(pki: Pki) -> None:
    """Not uvicorn this time: OpenSSL's own server, which aborts the connection when verification
    fails. Whether the client then sees the alert, a reset or an EOF depends on timing; each must
    read as a refused certificate."""
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(str(pki.server_pem))
    server.load_verify_locations(str(pki.ca_file))
    server.verify_mode = ssl.CERT_REQUIRED
    listener = socket.create_server(("127.0.0.1", 0))
    refusals: list[str] = []

    def serve() -> None:
        for _ in range(3):
            conn, _ = listener.accept()
            try:
                server.wrap_socket(conn, server_side=True).close()
            except ssl.SSLError as exc:
                refusals.append(exc.reason or "")
            finally:
                conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    sealed = await sealed_credential("bank", pki.rogue)
    clients = MtlsClients()
    try:
        for _ in range(3):
            client = clients.client_for(_config(pki), sealed)
            with pytest.raises(UpstreamError) as info:
                await _get(
                    client, f"https://127.0.0.1:{listener.getsockname()[1]}/", LastMeterAuth(_config(pki), sealed)
                )
            assert info.value.reason == "auth_failed", info.value
            _clean(str(info.value), pki)
    finally:
        await clients.aclose()
        thread.join(timeout=5)
        listener.close()
    assert refusals == ["CERTIFICATE_VERIFY_FAILED"] * 3


@pytest.mark.anyio
async def test_a_server_we_do_not_trust_names_ca_file(pki: Pki, mtls_server: tuple[EchoApp, str]) -> None:
    _, base_url = mtls_server
    sealed = await sealed_credential("bank", pki.client)
    clients = MtlsClients()
    try:
        client = clients.client_for(_config(pki, ca=False), sealed)  # the system store: trustme's CA is not in it
        with pytest.raises(UpstreamError) as info:
            await _get(client, f"{base_url}/accounts", LastMeterAuth(_config(pki, ca=False), sealed))
    finally:
        await clients.aclose()
    assert info.value.reason == "upstream_unreachable"
    assert "server certificate is not trusted" in str(info.value) and "tls.ca_file" in str(info.value)
    _clean(str(info.value), pki)


@pytest.mark.anyio
async def test_no_tls_at_the_address_is_not_blamed_on_the_certificate(pki: Pki) -> None:
    app = echo_app()
    sealed = await sealed_credential("bank", pki.client)
    clients = MtlsClients()
    with LoopbackServer(app) as plain:  # plain HTTP where the connector expects https
        try:
            client = clients.client_for(_config(pki), sealed)
            with pytest.raises(UpstreamError) as info:
                await _get(client, plain.base_url.replace("http:", "https:"), LastMeterAuth(_config(pki), sealed))
        finally:
            await clients.aclose()
    assert info.value.reason == "upstream_unreachable"
    assert "TLS handshake" in str(info.value) and "WRONG_VERSION_NUMBER" in str(info.value)
    assert "base_url" in str(info.value)


@pytest.mark.anyio
async def test_the_http_executor_sends_mtls_connectors_through_their_own_client(
    pki: Pki, mtls_server: tuple[EchoApp, str]
) -> None:
    _, base_url = mtls_server
    sealed = await sealed_credential("bank", pki.client)
    mtls = ConnectorConfig(slug="bank", base_url=base_url, auth=_config(pki))
    plain = ConnectorConfig(slug="plain", base_url=base_url, auth={"type": "bearer"})  # type: ignore[arg-type]
    async with httpx2.AsyncClient() as shared:
        executor = HttpExecutor(shared)
        client = executor.client_for(mtls, LastMeterAuth(mtls.auth, sealed))
        assert client is not shared
        assert await _get(client, f"{base_url}/x", LastMeterAuth(mtls.auth, sealed)) == 200
        assert executor.client_for(plain, LastMeterAuth(plain.auth, sealed)) is shared
        # No credential: the shared client, and the auth flow refuses before anything is sent.
        assert executor.client_for(mtls, LastMeterAuth(mtls.auth, None, connector="bank")) is shared
        await executor.aclose()
        assert client.is_closed and not shared.is_closed


@pytest.mark.anyio
async def test_a_credential_stored_again_gets_a_new_client(pki: Pki) -> None:
    first = await sealed_credential("bank", pki.client)
    again = await sealed_credential("bank", pki.client)  # same value, sealed anew (fresh nonce)
    assert first.fingerprint != again.fingerprint
    clients = MtlsClients()
    one = clients.client_for(_config(pki), first)
    two = clients.client_for(_config(pki), again)
    assert one is not two and len(clients) == 1
    assert clients.client_for(_config(pki, ca=False), again) is not two  # the auth block changed
    await clients.aclose()
    assert one.is_closed and two.is_closed and len(clients) == 0


@pytest.mark.anyio
async def test_a_relative_ca_file_goes_through_the_resolver(pki: Pki) -> None:
    seen: list[str] = []

    def resolve(ref: str) -> str:
        seen.append(ref)
        return str(pki.ca_file)

    clients = MtlsClients(resolve=resolve)
    clients.client_for(MtlsAuth(type="mtls", ca_file="certs/ca.pem"), await sealed_credential("bank", pki.client))
    await clients.aclose()
    assert seen == ["certs/ca.pem"]


# -- the stored PEM: loaded without a file left behind, refused clearly ------------------------------


def _leftovers() -> set[Path]:
    """Files our loader could have written, wherever it writes them."""
    folders = {Path(tempfile.gettempdir()), Path("/dev/shm")}
    return {p for f in folders if f.is_dir() for p in f.glob("mcp-gateway-*")}


@pytest.mark.parametrize("in_memory", [True, False], ids=["memfd", "tempfile"])
def test_no_plaintext_file_is_left_behind(pki: Pki, in_memory: bool) -> None:
    before = _leftovers()
    context = client_tls_context(SecretValue(pki.client), cafile=str(pki.ca_file), in_memory=in_memory)
    assert isinstance(context, ssl.SSLContext)
    assert _leftovers() == before

    with _pem_path(b"pem bytes", in_memory=in_memory) as path:
        assert Path(path).read_bytes() == b"pem bytes"
        if in_memory and hasattr(os, "memfd_create"):
            assert path.startswith("/proc/self/fd/")  # an anonymous file: no name in any directory
            assert _leftovers() == before
        else:
            assert os.stat(path).st_mode & 0o777 == 0o600
            assert Path(path).parent in {Path("/dev/shm"), Path(tempfile.gettempdir())}
    if not path.startswith("/proc/self/fd/"):
        assert not Path(path).exists()
    assert _leftovers() == before


def test_the_temp_file_goes_even_when_loading_fails(pki: Pki) -> None:
    before = _leftovers()
    broken = {"cert_pem": pki.client["cert_pem"], "key_pem": pki.other_key}
    with pytest.raises(CredentialError):
        client_tls_context(SecretValue(broken), in_memory=False)
    assert _leftovers() == before


def _encrypted(key_pem: str) -> str:
    key = serialization.load_pem_private_key(key_pem.split("\n", 1)[1].encode(), None)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"passphrase"),
    ).decode()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"key_pem": "other"}, "does not belong to the certificate"),
        ({"cert_pem": "not a certificate"}, "cert_pem holds no PEM certificate"),
        ({"key_pem": "-----BEGIN PRIVATE KEY-----\nnot base64\n-----END PRIVATE KEY-----\n"}, "not valid PEM"),
        ({"key_pem": f"{CANARY} just text"}, "key_pem holds no PEM private key"),
        ({"key_pem": "encrypted"}, "protected by a passphrase"),
    ],
    ids=["mismatch", "no-cert", "bad-key", "no-key", "encrypted"],
)
def test_unusable_pem_is_refused_without_showing_it(pki: Pki, change: dict[str, str], message: str) -> None:
    secret = {**pki.client, **change}
    if change.get("key_pem") == "other":
        secret["key_pem"] = pki.other_key
    if change.get("key_pem") == "encrypted":
        secret["key_pem"] = _encrypted(pki.client["key_pem"])
    with pytest.raises(CredentialError, match=message) as info:
        client_tls_context(SecretValue(secret))
    _clean(str(info.value), pki)
    assert info.value.__cause__ is None


def test_missing_fields_and_unreadable_ca_file(pki: Pki, tmp_path: Path) -> None:
    with pytest.raises(CredentialError, match="'key_pem'"):
        client_tls_context(SecretValue({"cert_pem": pki.client["cert_pem"]}))
    with pytest.raises(CredentialError, match="JSON-object"):
        client_tls_context(SecretValue(pki.client["key_pem"]))
    for bad in (tmp_path / "missing.pem", tmp_path / "garbage.pem"):
        if bad.name == "garbage.pem":
            bad.write_text("not a certificate")
        with pytest.raises(UpstreamError, match=r"auth\.ca_file") as info:
            client_tls_context(SecretValue(pki.client), cafile=str(bad))
        assert info.value.reason == "connector_error"


# -- the last meter for mtls -------------------------------------------------------------------------


class _CountingCredential:
    def __init__(self) -> None:
        self.opened = 0
        self.key = CredentialKey(connector="bank", principal="*")

    def open(self) -> SecretValue:
        self.opened += 1
        return SecretValue({"cert_pem": "x", "key_pem": CANARY})


@pytest.mark.anyio
async def test_last_meter_writes_nothing_and_decrypts_nothing() -> None:
    credential = _CountingCredential()
    auth = LastMeterAuth(MtlsAuth(type="mtls"), credential)  # type: ignore[arg-type]
    assert not auth.requires_request_body

    def upstream(request: httpx2.Request) -> httpx2.Response:
        assert "authorization" not in request.headers
        return httpx2.Response(204)

    async with httpx2.AsyncClient(transport=httpx2.MockTransport(upstream)) as client:
        assert (await client.get("https://bank.test/", auth=auth)).status_code == 204
        with pytest.raises(CredentialMissing, match="'bank'"):
            await client.get("https://bank.test/", auth=LastMeterAuth(MtlsAuth(type="mtls"), None, connector="bank"))
    assert credential.opened == 0
