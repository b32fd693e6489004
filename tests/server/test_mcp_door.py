"""``server.front_door.Gate``: what ``/mcp`` answers for each kind of bearer token, at the ASGI level
(the JWKS is served through ``MockTransport``; the end-to-end checks are tests/e2e/test_front_door.py)."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx2
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm
from starlette.applications import Starlette
from starlette.types import Receive, Scope, Send

from mcp_gateway.core.health import STORE_UNAVAILABLE_HINT
from mcp_gateway.manifest import FrontDoorConfig
from mcp_gateway.server.mcp_door import FrontDoor, Gate, open_front_door
from mcp_gateway.server.tools import PRINCIPAL_SCOPE_KEY
from mcp_gateway.services.identity import Principal
from mcp_gateway.vocabulary.errors import GatewayError, StoreUnavailable

pytestmark = pytest.mark.anyio

ISSUER = "http://127.0.0.1:9"
PUBLIC = "http://127.0.0.1:8765"
KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
METADATA = f'resource_metadata="{PUBLIC}/.well-known/oauth-protected-resource/mcp"'


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def idp(request: httpx2.Request) -> httpx2.Response:
    if request.url.path == "/.well-known/openid-configuration":
        return httpx2.Response(200, json={"issuer": ISSUER, "jwks_uri": f"{ISSUER}/jwks"})
    jwk = json.loads(RSAAlgorithm.to_jwk(KEY.public_key()))
    return httpx2.Response(200, json={"keys": [{**jwk, "kid": "k1", "use": "sig"}]})


def mint(**claims: Any) -> str:
    now = int(time.time())
    body = {"iss": ISSUER, "aud": f"{PUBLIC}/mcp", "sub": "maria", "exp": now + 300, "scope": "mcp", "azp": "cc"}
    body = {k: v for k, v in (body | claims).items() if v is not None}
    return jwt.encode(body, KEY, algorithm="RS256", headers={"kid": "k1"})


class StaticTokens:
    async def verify(self, token: str | None) -> Principal | None:
        return Principal("token:abc", "bot") if token == "mgw_good" else None


class App:
    def __init__(self) -> None:
        self.scopes: list[Scope] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.scopes.append(scope)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


async def door(**config: Any) -> FrontDoor:
    cfg = FrontDoorConfig(issuer=ISSUER, scopes=["mcp"], **config)
    return await open_front_door(cfg, PUBLIC, httpx2.AsyncClient(transport=httpx2.MockTransport(idp)))


async def ask(gate: Any, token: str | None) -> httpx2.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=gate), base_url=PUBLIC) as http:
        return await http.post("/mcp", headers=headers)


async def test_each_token_gets_its_answer() -> None:
    app = App()
    gate = Gate(app, StaticTokens(), await door(agents_by_claim={"cc": "claude-code"}))  # type: ignore[arg-type]
    bare = await ask(gate, None)
    assert bare.status_code == 401 and bare.headers["www-authenticate"] == f"Bearer {METADATA}"
    for token in (mint(aud="https://else.test/mcp"), mint(exp=int(time.time()) - 120), "garbage", mint(sub="*")):
        refused = await ask(gate, token)
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"] == f'Bearer error="invalid_token", {METADATA}'
    scope = await ask(gate, mint(scope="profile"))
    assert scope.status_code == 403
    assert scope.headers["www-authenticate"] == f'Bearer error="insufficient_scope", scope="mcp", {METADATA}'
    assert app.scopes == []
    assert (await ask(gate, mint(groups=["eng"]))).status_code == 200
    principal = app.scopes[-1][PRINCIPAL_SCOPE_KEY]
    assert principal == Principal("maria", "claude-code") and principal.groups == ("eng",)
    assert app.scopes[-1]["user"].access_token.subject == "maria"
    assert (await ask(gate, "mgw_good")).status_code == 200
    assert app.scopes[-1][PRINCIPAL_SCOPE_KEY] == Principal("token:abc", "bot")


async def test_static_tokens_can_be_turned_off() -> None:
    gate = Gate(App(), StaticTokens(), await door(static_tokens=False))  # type: ignore[arg-type]
    assert (await ask(gate, "mgw_good")).status_code == 401


async def test_the_protected_resource_metadata_names_the_issuer_as_configured() -> None:
    front = await door()
    app = Starlette(routes=front.routes())
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url=PUBLIC) as http:
        for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"):
            document = (await http.get(path)).json()
            assert document["resource"] == f"{PUBLIC}/mcp"
            assert document["authorization_servers"] == [ISSUER]  # no slash added: clients compare exactly
            assert document["scopes_supported"] == ["mcp"]


async def test_an_issuer_without_readable_metadata_stops_the_start_with_what_to_do() -> None:
    http = httpx2.AsyncClient(transport=httpx2.MockTransport(lambda request: httpx2.Response(404)))
    config = FrontDoorConfig(issuer="http://127.0.0.1:9/issuer")
    with pytest.raises(GatewayError) as raised:
        await open_front_door(config, "http://127.0.0.1:8765", http)
    message = str(raised.value)
    assert "/.well-known/openid-configuration" in message and "front_door.jwks_url" in message


async def test_a_token_the_store_cannot_check_is_a_json_rpc_error_an_mcp_client_surfaces() -> None:
    # A bare 503 reaches an agent as "Server returned an error response"; a JSON-RPC error body is
    # what the SDK's client hands on, reason and hint included.
    from mcp_types import JSONRPCError, jsonrpc_message_adapter

    class Down:
        async def verify(self, token: str | None) -> Principal | None:
            raise StoreUnavailable("the PostgreSQL database at 127.0.0.1:5432 cannot be reached")

    gate = Gate(App(), Down(), None)  # type: ignore[arg-type]
    answer = await ask(gate, "mgw_good")
    assert answer.status_code == 503 and answer.headers["retry-after"] == "5"
    parsed = jsonrpc_message_adapter.validate_json(answer.content, by_name=False)
    assert isinstance(parsed, JSONRPCError)
    assert parsed.error.data == {"reason": "store_unavailable", "hint": STORE_UNAVAILABLE_HINT}
    assert "Retry in a few seconds" in parsed.error.message and "5432" not in answer.text


async def test_a_token_check_that_meets_a_read_only_or_empty_database_says_retrying_soon_will_not_help() -> None:
    # After a failover to a standby or an empty server, "Retry in a few seconds" sent agents into a loop.
    from mcp_types import JSONRPCError, jsonrpc_message_adapter

    from mcp_gateway.core.health import STORE_BROKEN_HINT

    class Empty:
        async def verify(self, token: str | None) -> Principal | None:
            raise StoreUnavailable("the PostgreSQL database at db has no gateway tables", lasting=True)

    answer = await ask(Gate(App(), Empty(), None), "mgw_good")  # type: ignore[arg-type]
    assert answer.status_code == 503 and "retry-after" not in answer.headers
    parsed = jsonrpc_message_adapter.validate_json(answer.content, by_name=False)
    assert isinstance(parsed, JSONRPCError)
    assert parsed.error.data == {"reason": "store_unavailable", "hint": STORE_BROKEN_HINT}
    assert "no gateway tables" not in answer.text


async def test_refused_sessions_are_logged_once_a_window_naming_the_agent() -> None:
    # Each request past --max-sessions logged the SDK's line naming no one; an agent retrying in a loop
    # filled a stderr pipe nobody read, and the blocked write froze the server.
    import io
    import logging

    from mcp_gateway.services.logs import configure_logging

    async def refusing(scope: Scope, receive: Receive, send: Send) -> None:
        manager = logging.getLogger("mcp.server.streamable_http_manager")
        manager.warning("Refusing to open a new session: %d sessions are already open", 1)
        await send({"type": "http.response.start", "status": 503, "headers": []})
        await send({"type": "http.response.body", "body": b"Too many open sessions"})

    stream = io.StringIO()
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    try:
        handler = configure_logging(stream=stream)
        gate = Gate(App(), StaticTokens(), None, mcp=refusing)  # type: ignore[arg-type]
        for _ in range(5):
            assert (await ask(gate, "mgw_good")).status_code == 503
        throttle = next(f for f in handler.filters if hasattr(f, "throttle")).throttle  # type: ignore[attr-defined]
        throttle.last.clear()  # the window passes
        assert (await ask(gate, "mgw_good")).status_code == 503
    finally:
        root.handlers[:], root.level = saved
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2, lines
    assert lines[0].endswith(
        "refused to open a new MCP session for token:abc/bot: 1 sessions are already open (--max-sessions)"
    )
    assert lines[1].endswith("(--max-sessions); 4 more in the last 10+ s not logged")
