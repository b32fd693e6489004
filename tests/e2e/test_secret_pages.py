"""Connect and secret pages: every shape's form, what an invalid submission does, and the links'
properties (unguessable, single-use, expiring, compared in constant time); then the full flow in
stdio mode, with a PEM uploaded as a file.

The page tests run the real pages app in process (Starlette over ``httpx2.ASGITransport``) on a
real gateway (SQLite store, AES-GCM vault, a ``FixedClock`` for expiry); the stdio test runs the
gateway as a subprocess reached by the MCP SDK client, with an mTLS upstream on loopback.
"""

from __future__ import annotations

import base64
import hmac
import json
import re
import sqlite3
import ssl
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest
import trustme
from cryptography.hazmat.primitives import serialization
from mcp import Client
from starlette.applications import Starlette

from mcp_gateway.core import Gateway, result_payload
from mcp_gateway.manifest import parse_manifest
from mcp_gateway.primitives.crypto import AESGCMCipher
from mcp_gateway.server.pages import _common
from mcp_gateway.server.web import FIELDS, web_routes
from mcp_gateway.services.approvals import ApprovalService
from mcp_gateway.services.audit import Auditor
from mcp_gateway.services.credentials import CredentialVault
from mcp_gateway.services.identity import OPERATOR
from mcp_gateway.services.links import LinkService
from mcp_gateway.store.sqlite import SQLiteStore
from mcp_gateway.vocabulary.clock import FixedClock
from tests.support.env import child_env
from tests.support.pages import csrf, get, post
from tests.support.upstream import EchoApp, LoopbackServer

from .conftest import GatewayEnv, free_port, structured

pytestmark = pytest.mark.anyio

PUBLIC = "http://pages.test"
SHAPES = {
    "bearer_api": "{type: bearer}",
    "key_api": "{type: api_key}",
    "custom_api": '{type: custom, headers: {X-Auth: "{secret}"}}',
    "fields_api": '{type: custom, headers: {X-User: "{secret.user}", X-Pass: "{secret.pass}"}}',
    "hmac_api": "{type: hmac}",
    "basic_api": "{type: basic}",
    "oauth1_api": "{type: oauth1}",
    "sigv4_api": "{type: aws_sigv4, service: s3, region: ap-south-1}",
    "mtls_api": "{type: mtls}",
    "client_api": "{type: oauth2, flow: client_credentials, token_url: http://auth.test/token}",
}
EXPECTED_FIELDS = {
    "bearer_api": ["secret"],
    "key_api": ["secret"],
    "custom_api": ["secret"],
    "fields_api": ["secret.user", "secret.pass"],
    "hmac_api": ["secret"],
    "basic_api": ["username", "password"],
    "oauth1_api": ["consumer_key", "consumer_secret", "token", "token_secret"],
    "sigv4_api": ["access_key_id", "secret_access_key", "session_token"],
    "mtls_api": ["cert_pem", "key_pem"],
    "client_api": ["client_id", "client_secret"],
}
TYPED = "typed-secret-must-not-come-back-0917"


def _manifest() -> str:
    blocks = "".join(
        f"  - slug: {slug}\n    base_url: http://api.test\n    auth: {auth}\n"
        "    source: {http: {actions: [{path: ping, method: GET, url: /ping, summary: Ping}]}}\n"
        for slug, auth in SHAPES.items()
    )
    return f"project: pages\npublic_url: {PUBLIC}\nconnectors:\n{blocks}"


@dataclass
class Pages:
    gateway: Gateway
    vault: CredentialVault
    clock: FixedClock
    http: httpx2.AsyncClient
    db: Path

    async def link(self, slug: str, kind: str = "connect", **kw: Any) -> str:
        url, _ = await self.gateway.links.mint(kind, connector=slug, principal="operator", **kw)  # type: ignore[arg-type]
        return url.removeprefix(PUBLIC)

    async def stored(self, slug: str, name: str = "default") -> Any:
        sealed = await self.vault.sealed(slug, principal="operator", name=name)
        return sealed.open().reveal() if sealed else None


@asynccontextmanager
async def pages(tmp_path: Path) -> AsyncIterator[Pages]:
    manifest = parse_manifest(_manifest(), base_dir=tmp_path)
    clock = FixedClock()
    async with SQLiteStore(tmp_path / "s.db") as store:
        vault = CredentialVault(store, AESGCMCipher(b"k" * 32, project="pages"), project="pages")
        async with httpx2.AsyncClient(transport=httpx2.MockTransport(lambda r: httpx2.Response(500))) as upstream:
            gateway = Gateway(
                manifest=manifest,
                store=store,
                vault=vault,
                clock=clock,
                http=upstream,
                links=LinkService(store, clock, PUBLIC),
                approvals=ApprovalService(store, clock),
                auditor=Auditor(store),
            )
            await gateway.sync()
            app = Starlette(routes=web_routes(gateway))
            async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app), base_url=PUBLIC) as http:
                yield Pages(gateway, vault, clock, http, tmp_path / "s.db")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _names(html: str) -> list[str]:
    return [n for n in re.findall(r'<(?:input|textarea)[^>]* name="([a-z_.]+)"', html) if n != "csrf"]


async def test_every_shape_has_its_form_and_nothing_typed_comes_back(tmp_path: Path) -> None:
    async with pages(tmp_path) as p:
        for slug, expected in EXPECTED_FIELDS.items():
            path = await p.link(slug)
            page = await p.http.get(path)
            assert page.status_code == 200, page.text
            names = [n.removesuffix("_file") for n in _names(page.text)]
            assert list(dict.fromkeys(names)) == expected, slug
            assert "<script" not in page.text and page.headers["cache-control"] == "no-store"
            assert (
                page.headers["referrer-policy"] == "same-origin"
                and "form-action 'self'" in page.headers["content-security-policy"]
            )
            # Something wrong with every field filled in: the form comes back, with none of it.
            wrong = {name: TYPED for name in expected} | {"csrf": csrf(page.text)}
            if slug == "client_api":
                wrong["client_id"] = ""  # (client credentials are checked at the token endpoint otherwise)
            answer = await p.http.post(path, data=wrong)
            if answer.status_code == 200:
                # Single-value and identifier shapes accept any text: saved, and still not echoed.
                assert "Saved" in answer.text, (slug, answer.text)
            else:
                assert answer.status_code == 400 and 'class="error"' in answer.text, (slug, answer.text)
                assert (await p.http.get(path)).status_code == 200  # the link still works
            assert TYPED not in answer.text, slug
        # The shapes the pages offer are exactly the secret shapes.
        assert set(FIELDS) == {"bearer", "api_key", "custom", "hmac", "basic", "oauth1", "aws_sigv4", "mtls", "oauth2"}


async def test_sigv4_shows_its_region_read_only_and_the_session_token_is_optional(tmp_path: Path) -> None:
    async with pages(tmp_path) as p:
        path = await p.link("sigv4_api")
        html = (await p.http.get(path)).text
        assert (
            "<dt>Region</dt><dd><code>ap-south-1</code></dd>" in html and "<dt>Service</dt><dd><code>s3</code>" in html
        )
        assert 'name="region"' not in html
        missing = await p.http.post(path, data={"csrf": csrf(html), "access_key_id": "AKIA1"})
        assert missing.status_code == 400 and "fill in Secret access key" in missing.text
        saved = await p.http.post(
            path, data={"csrf": csrf(html), "access_key_id": "AKIA1", "secret_access_key": "s3cr3t/key"}
        )
        assert saved.status_code == 200
        assert await p.stored("sigv4_api") == {"access_key_id": "AKIA1", "secret_access_key": "s3cr3t/key"}


async def test_mtls_accepts_a_paste_or_an_upload_and_checks_the_pair(tmp_path: Path) -> None:
    ca = trustme.CA()
    leaf, other = ca.issue_cert("a@test"), ca.issue_cert("b@test")
    cert = leaf.cert_chain_pems[0].bytes().decode()
    key = leaf.private_key_pem.bytes().decode()
    async with pages(tmp_path) as p:

        async def submit(data: dict[str, str], files: dict[str, Any] | None = None) -> httpx2.Response:
            path = await p.link("mtls_api")
            html = (await p.http.get(path)).text
            assert 'enctype="multipart/form-data"' in html
            return await p.http.post(path, data={"csrf": csrf(html), **data}, files=files)

        wrong_pair = await submit({"cert_pem": cert, "key_pem": other.private_key_pem.bytes().decode()})
        assert wrong_pair.status_code == 400 and "does not belong to this certificate" in wrong_pair.text
        not_pem = await submit({"cert_pem": "hello", "key_pem": key})
        assert not_pem.status_code == 400 and "not a PEM certificate" in not_pem.text
        locked = serialization.load_pem_private_key(key.encode(), None).private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"pass"),
        )
        encrypted = await submit({"cert_pem": cert, "key_pem": locked.decode()})
        assert encrypted.status_code == 400 and "passphrase" in encrypted.text
        key_material = key.splitlines()[1]
        for answer in (wrong_pair, not_pem, encrypted):
            assert key_material not in answer.text

        uploaded = await submit(
            {"cert_pem": "", "key_pem": ""},
            files={
                "cert_pem_file": ("client.crt", cert.encode(), "application/x-pem-file"),
                "key_pem_file": ("client.key", key.encode(), "application/x-pem-file"),
            },
        )
        assert uploaded.status_code == 200 and "Saved" in uploaded.text, uploaded.text
        assert await p.stored("mtls_api") == {"cert_pem": cert.strip(), "key_pem": key.strip()}
        pasted = await submit({"cert_pem": cert, "key_pem": key})
        assert pasted.status_code == 200
        too_big = await submit({}, files={"cert_pem_file": ("big.crt", b"x" * 70_000, "text/plain")})
        assert too_big.status_code in (400, 413)


async def test_links_are_unguessable_single_use_and_expiring(tmp_path: Path) -> None:
    async with pages(tmp_path) as p:
        paths = [await p.link("bearer_api") for _ in range(20)]
        tokens = [path.rsplit("/", 1)[1] for path in paths]
        assert len(set(tokens)) == 20
        assert all(len(base64.urlsafe_b64decode(t + "=")) * 8 == 256 for t in tokens)
        with sqlite3.connect(p.db) as db:
            stored = [row[0] for row in db.execute("SELECT token_hash FROM link")]
        assert not set(tokens) & set(stored)  # only hashes are stored: a leaked database opens no page

        path = paths[0]
        html = (await p.http.get(path)).text
        assert (await p.http.get(path)).status_code == 200  # opening (a link preview) does not use it up
        assert (await p.http.post(path, data={"csrf": csrf(html), "secret": "one"})).status_code == 200
        assert (await p.http.post(path, data={"csrf": csrf(html), "secret": "two"})).status_code == 410
        assert (await p.http.get(path)).status_code == 410
        assert await p.stored("bearer_api") == "one"

        # A link works only at its own kind of page, and only until it expires (30 minutes).
        assert (await p.http.get(paths[1].replace("/connect/", "/secrets/"))).status_code == 410
        assert (await p.http.get(paths[1].replace("/connect/", "/approvals/"))).status_code == 410
        p.clock.advance(30 * 60)
        assert (await p.http.get(paths[1])).status_code == 410
        assert (await p.http.post(paths[1], data={"csrf": "x", "secret": "late"})).status_code in (403, 410)
        assert (await p.http.get("/connect/" + "A" * 43)).status_code == 410


async def test_csrf_is_bound_to_its_link_and_compared_in_constant_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    compared: list[tuple[str, str]] = []
    real = hmac.compare_digest

    def spy(a: Any, b: Any) -> bool:
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr(_common.hmac, "compare_digest", spy)
    async with pages(tmp_path) as p:
        first, second = await p.link("bearer_api"), await p.link("bearer_api")
        token_of_first = csrf((await p.http.get(first)).text)
        # The first link's form token does not work for the second link.
        refused = await p.http.post(second, data={"csrf": token_of_first, "secret": "x"})
        assert refused.status_code == 403 and compared and compared[-1][0] == token_of_first
        assert len(compared[-1][1]) == 64  # an HMAC-SHA256
        assert (await p.http.post(first, data={"csrf": token_of_first, "secret": "x"})).status_code == 200


async def test_a_custom_connector_reading_fields_asks_for_each_and_stores_none_without_all(tmp_path: Path) -> None:
    # One "Secret value" box took the new password alone: "Saved · connected", and every call then failed.
    async with pages(tmp_path) as p:
        path = await p.link("fields_api")
        html = (await p.http.get(path)).text
        assert _names(html) == ["secret.user", "secret.pass"] and ">user<" in html and ">pass<" in html
        half = await p.http.post(path, data={"csrf": csrf(html), "secret.pass": TYPED})
        assert half.status_code == 400 and "fill in user" in half.text and TYPED not in half.text
        single = await p.http.post(path, data={"csrf": csrf(html), "secret": TYPED})  # the old form's one box
        assert single.status_code == 400 and await p.stored("fields_api") is None
        whole = await p.http.post(path, data={"csrf": csrf(html), "secret.user": "ana", "secret.pass": TYPED})
        assert whole.status_code == 200 and await p.stored("fields_api") == {"user": "ana", "pass": TYPED}


async def test_a_named_secret_is_one_value(tmp_path: Path) -> None:
    async with pages(tmp_path) as p:
        result = result_payload(await p.gateway.request_secret(OPERATOR, "basic_api", "webhook_secret"))
        path = result["secret_url"].removeprefix(PUBLIC)
        html = (await p.http.get(path)).text
        assert _names(html) == ["secret"] and "webhook_secret" in html
        saved = await p.http.post(path, data={"csrf": csrf(html), "secret": "named-value"})
        assert "“webhook_secret”" in saved.text
        assert await p.stored("basic_api", "webhook_secret") == "named-value"


async def test_a_paste_its_connector_could_never_send_is_refused_saying_where_not_what(tmp_path: Path) -> None:
    # Each was saved as "connected", then every call failed far from the paste, saying only "reconnect".
    async with pages(tmp_path) as p:
        cases = [
            ("bearer_api", {"secret": f"\ufeff{TYPED}"}, "an invisible formatting character at the start"),
            ("key_api", {"secret": f"{TYPED}\u200b"}, "an invisible formatting character at the end"),
            ("key_api", {"secret": f"{TYPED}-clé"}, "a character beyond ASCII at the end"),
            ("custom_api", {"secret": json.dumps({"key": f" {TYPED} "})}, "a field of the custom secret holds"),
            ("basic_api", {"username": "ali:ce", "password": TYPED}, "basic username contains &#39;:&#39;"),
            ("hmac_api", {"secret": "   "}, "blank (only whitespace)"),
        ]
        for slug, fields, problem in cases:
            path = await p.link(slug)
            html = (await p.http.get(path)).text
            answer = await p.http.post(path, data={"csrf": csrf(html), **fields})
            assert answer.status_code == 400 and problem in answer.text, (slug, answer.text)
            assert TYPED not in answer.text and await p.stored(slug) is None
            assert (await p.http.get(path)).status_code == 200  # the link still works


# -- stdio mode ------------------------------------------------------------------------------------


@pytest.fixture
def mtls_env(tmp_path: Path) -> Iterator[tuple[GatewayEnv, EchoApp, trustme.LeafCert]]:
    ca = trustme.CA()
    pki = tmp_path / "pki"
    pki.mkdir()
    ca.cert_pem.write_to_path(str(pki / "ca.pem"))
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(pki / "server.pem"))
    echo = EchoApp()
    with LoopbackServer(
        echo,
        ssl_certfile=str(pki / "server.pem"),
        ssl_ca_certs=str(pki / "ca.pem"),
        ssl_cert_reqs=ssl.CERT_REQUIRED,
    ) as tls:
        pages_port = free_port()
        manifest = tmp_path / "mtls.yaml"
        manifest.write_text(
            f"project: stdio-pages\npublic_url: http://127.0.0.1:{pages_port}\nconnectors:\n"
            f"  - slug: mtls_api\n    base_url: {tls.base_url}\n    auth: {{type: mtls, ca_file: pki/ca.pem}}\n"
            "    source: {http: {actions: [{path: ping, method: GET, url: /ping, summary: Ping}]}}\n"
        )
        env = child_env() | {
            "MCP_GATEWAY_STATE_DIR": str(tmp_path / "state"),
            "MCP_GATEWAY_MASTER_KEY": "stdio-pages-master-key-0123456789abcdef",
            "PYTHONUNBUFFERED": "1",
        }
        yield (
            GatewayEnv(tmp_path, manifest, tmp_path / "state", echo, tls.base_url, pages_port, env),
            echo,
            ca.issue_cert("client@stdio.test"),
        )


async def test_connect_page_with_uploaded_pem_in_stdio_mode(
    mtls_env: tuple[GatewayEnv, EchoApp, trustme.LeafCert],
) -> None:
    env, echo, client_cert = mtls_env
    cert = "".join(p.bytes().decode() for p in client_cert.cert_chain_pems)
    key = client_cert.private_key_pem.bytes().decode()
    async with Client(env.stdio_params(), mode="legacy") as client:
        before = structured(await client.call_tool("call", {"tool": "mtls_api.ping"}))
        assert before["status"] == "needs_auth"
        link = before["connect_url"]
        assert link.startswith(f"http://127.0.0.1:{env.pages_port}/connect/")
        html = (await get(link)).text
        # The page says the server is checked against the operator's CA, never where that file is.
        assert "Trusted server CA" in html and "ca.pem" not in html and str(env.root) not in html
        files = {
            "cert_pem_file": ("client.crt", cert.encode(), "application/x-pem-file"),
            "key_pem_file": ("client.key", key.encode(), "application/x-pem-file"),
        }
        saved = await post(link, {"csrf": csrf(html)}, files=files)
        assert saved.status_code == 200 and "Saved" in saved.text, saved.text
        result = await client.call_tool("call", {"tool": "mtls_api.ping"})
        assert structured(result)["status"] == "ok", structured(result)
        assert key.splitlines()[1] not in json.dumps(structured(result))
    assert [r.path for r in echo.requests] == ["/ping"]  # reached through the client-certificate handshake
