"""A connector's own CA (``tls.ca_file``) for plain server TLS, through the whole gateway: a loopback
HTTPS upstream whose certificate a test CA signs is refused without it (the message names the
setting), and trusted with it by the connector's calls and its OAuth2 token requests to that host."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme

from mcp_gateway.core import Gateway, result_payload
from mcp_gateway.execution.tls_trust import TrustedClients
from mcp_gateway.manifest import parse_manifest
from mcp_gateway.runtime import Settings, open_gateway
from mcp_gateway.services.identity import OPERATOR
from mcp_gateway.vocabulary.clock import FixedClock
from mcp_gateway.vocabulary.errors import UpstreamError
from tests.support.upstream import LoopbackServer, Receive, Scope, Send, read_body, reply_json

pytestmark = pytest.mark.anyio

MANIFEST = """
project: private-ca
default_mode: allow_all
public_url: http://127.0.0.1:1
connectors:
  - slug: trusting
    base_url: {base}
    tls: {{ca_file: pki/ca.pem}}
    source: {{http: {{actions: [{{path: who.get, method: GET, url: /who, summary: Who called}}]}}}}
  - slug: untrusting
    base_url: {base}
    source: {{http: {{actions: [{{path: who.get, method: GET, url: /who, summary: Who called}}]}}}}
  - slug: signed_in
    base_url: {base}
    tls: {{ca_file: pki/ca.pem}}
    auth: {{type: oauth2, flow: client_credentials, token_url: "{base}/token"}}
    source: {{http: {{actions: [{{path: who.get, method: GET, url: /who, summary: Who called}}]}}}}
"""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _upstream(scope: Scope, receive: Receive, send: Send) -> None:
    await read_body(receive)
    if scope["path"] == "/token":
        await reply_json(send, 200, {"access_token": "token-from-the-private-host", "token_type": "Bearer"})
        return
    headers = {k.decode(): v.decode() for k, v in scope["headers"]}
    await reply_json(send, 200, {"authorization": headers.get("authorization")})


@pytest.fixture
def private_ca(tmp_path: Path) -> Iterator[str]:
    ca = trustme.CA()
    (tmp_path / "pki").mkdir()
    ca.cert_pem.write_to_path(str(tmp_path / "pki" / "ca.pem"))
    leaf = ca.issue_cert("127.0.0.1")
    leaf.private_key_and_cert_chain_pem.write_to_path(str(tmp_path / "server.pem"))
    leaf.private_key_pem.write_to_path(str(tmp_path / "server.key"))
    tls = {"ssl_certfile": str(tmp_path / "server.pem"), "ssl_keyfile": str(tmp_path / "server.key")}
    with LoopbackServer(_upstream, **tls) as server:
        yield server.base_url


async def _call(gw: Gateway, tool: str) -> dict[str, Any]:
    return result_payload(await gw.call(OPERATOR, tool, {}))


async def test_a_private_ca_is_trusted_by_the_calls_and_token_requests_of_its_connector(
    tmp_path: Path, private_ca: str
) -> None:
    manifest = parse_manifest(MANIFEST.format(base=private_ca), base_dir=tmp_path)
    settings = Settings(manifest_path=None, state_dir=tmp_path / "state", env={"MCP_GATEWAY_MASTER_KEY": "k" * 40})
    async with open_gateway(settings, manifest=manifest, clock=FixedClock()) as gw:
        await gw._vault.put("signed_in", {"client_id": "c", "client_secret": "s"})
        refused = await _call(gw, "untrusting.who.get")
        assert refused["status"] == "error" and refused["reason"] == "upstream_unreachable", refused
        assert "not trusted" in refused["message"] and "tls.ca_file" in refused["message"], refused
        trusted = await _call(gw, "trusting.who.get")
        assert trusted["status"] == "ok", trusted
        signed = await _call(gw, "signed_in.who.get")
        assert signed["status"] == "ok", signed
        assert signed["data"]["authorization"] == "[redacted]"  # the token was sent (and is never shown)


def test_an_unusable_ca_file_is_the_operators_to_fix(tmp_path: Path) -> None:
    (tmp_path / "not-pem.txt").write_text("hello")
    clients = TrustedClients(resolve=lambda ref: str(tmp_path / ref))
    for ref in ("missing.pem", "not-pem.txt"):
        with pytest.raises(UpstreamError) as info:
            clients.client_for(ref)
        assert info.value.reason == "connector_error" and f"tls.ca_file {ref!r}" in str(info.value)


def test_one_ca_file_per_connector() -> None:
    from mcp_gateway.vocabulary.errors import ManifestError

    text = """
connectors:
  - slug: both
    base_url: https://127.0.0.1:9
    tls: {ca_file: a.pem}
    auth: {type: mtls, ca_file: b.pem}
    source: {http: {actions: [{path: x.get, method: GET, url: /x}]}}
"""
    with pytest.raises(ManifestError, match=r"tls\.ca_file and auth\.ca_file"):
        parse_manifest(text)
