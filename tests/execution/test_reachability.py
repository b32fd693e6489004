"""A base URL's host reached without a request: DNS, a TCP connection, and the TLS handshake with the
trust the connector's calls use, each failure named as a call would meet it. Loopback servers only."""

from __future__ import annotations

import datetime
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme

from mcp_gateway.execution.reachability import reach
from tests.support.upstream import LoopbackServer, echo_app

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _serving(
    ca: trustme.CA, tmp_path: Path, *identities: str, valid: tuple[datetime.datetime, datetime.datetime] | None = None
) -> Iterator[str]:
    leaf = ca.issue_cert(*identities, not_before=valid[0], not_after=valid[1]) if valid else ca.issue_cert(*identities)
    cert, key = tmp_path / f"{identities[0]}.pem", tmp_path / f"{identities[0]}.key"
    leaf.private_key_and_cert_chain_pem.write_to_path(str(cert))
    leaf.private_key_pem.write_to_path(str(key))
    with LoopbackServer(echo_app(), ssl_certfile=str(cert), ssl_keyfile=str(key)) as server:
        yield server.base_url


@pytest.fixture
def ca(tmp_path: Path) -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def ca_file(ca: trustme.CA, tmp_path: Path) -> str:
    path = tmp_path / "private-ca.pem"
    ca.cert_pem.write_to_path(str(path))
    return str(path)


@pytest.fixture
def private_tls(ca: trustme.CA, tmp_path: Path) -> Iterator[str]:
    yield from _serving(ca, tmp_path, "127.0.0.1")


async def test_a_certificate_from_a_ca_nobody_trusts_is_named_and_trusted_with_the_connectors_ca_file(
    private_tls: str, ca_file: str
) -> None:
    unreached = await reach(private_tls)
    assert unreached is not None and unreached.failure == "certificate not trusted", unreached
    assert "unable to get local issuer certificate" in unreached.detail
    assert await reach(private_tls, cafile=ca_file) is None


async def test_a_certificate_for_another_name_or_expired_is_named(ca: trustme.CA, ca_file: str, tmp_path: Path) -> None:
    for url in _serving(ca, tmp_path, "service.example"):
        unreached = await reach(url, cafile=ca_file)
        assert unreached is not None and unreached.failure == "certificate hostname mismatch", unreached
    past = datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC)
    for url in _serving(ca, tmp_path, "127.0.0.1", valid=(past, past + datetime.timedelta(days=1))):
        unreached = await reach(url, cafile=ca_file)
        assert unreached is not None and unreached.failure == "certificate expired", unreached


async def test_a_closed_port_is_refused_and_plain_http_is_reached() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed once the block ends: nothing listens there
    unreached = await reach(f"https://127.0.0.1:{port}")
    assert unreached is not None and unreached.failure == "connection refused" and unreached.where.endswith(str(port))
    with LoopbackServer(echo_app()) as server:
        assert await reach(server.base_url) is None
        https = server.base_url.replace("http://", "https://")
        unreached = await reach(https)
        assert unreached is not None and unreached.failure == "plain HTTP at an https URL", unreached


async def test_a_name_that_does_not_resolve_is_named_at_once() -> None:
    unreached = await reach("https://no-such-host.invalid/v1", seconds=10)
    assert unreached is not None and unreached.failure == "DNS name not found", unreached


async def test_a_silent_peer_times_out() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)  # accepts the connection, never answers the TLS hello
        unreached = await reach(f"https://127.0.0.1:{listener.getsockname()[1]}", seconds=0.5)
    assert unreached is not None and unreached.failure == "timed out", unreached
