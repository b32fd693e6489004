"""A team-wide credential replaced through an approved link with a value the upstream refuses, over the
wire: the gateway served over HTTP, two agents on the official MCP SDK client, the operator on the
command line, the human on the plain HTTP link page, and a loopback upstream that takes one token only.
The teammate whose call is refused, ``connectors`` and ``doctor`` each say who replaced it and when.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.env import child_env
from tests.support.pages import csrf, get, post
from tests.support.upstream import LoopbackServer, Receive, Scope, Send, reply_json

from .conftest import MASTER_KEY, GatewayEnv, HttpGateway, free_port, http_client, structured

pytestmark = pytest.mark.anyio

GOOD = "good-team-token-5521"
TYPO = "typo-team-token-7734"
MANIFEST = """
project: e2e
public_url: http://127.0.0.1:{pages_port}
connectors:
  - slug: team
    base_url: {upstream}
    auth: {{type: bearer}}
    source: {{http: {{actions: [{{path: me.get, method: GET, url: /me, summary: Who am I}}]}}}}
agents:
  - name: alice-bot
    connectors: [team]
  - name: bob-bot
    connectors: [team]
"""


async def _one_token_upstream(scope: Scope, receive: Receive, send: Send) -> None:
    """200 for the good token only; 401 for anything else, as a real API refuses a mistyped key."""
    headers = dict(scope.get("headers", []))
    if headers.get(b"authorization") == f"Bearer {GOOD}".encode():
        await reply_json(send, 200, {"me": "team"})
    else:
        await reply_json(send, 401, {"message": "bad credentials"})


@pytest.fixture
def env(tmp_path: Path) -> Iterator[GatewayEnv]:
    with LoopbackServer(_one_token_upstream) as server:
        manifest = tmp_path / "gateway.yaml"
        manifest.write_text(MANIFEST.format(pages_port=free_port(), upstream=server.base_url))
        state_dir = tmp_path / "state"
        environ = child_env() | {
            "MCP_GATEWAY_STATE_DIR": str(state_dir),
            "MCP_GATEWAY_MASTER_KEY": MASTER_KEY,
            "PYTHONUNBUFFERED": "1",
        }
        yield GatewayEnv(tmp_path, manifest, state_dir, None, server.base_url, 0, environ)  # type: ignore[arg-type]


async def test_a_refused_replacement_is_traced_to_who_made_it(env: GatewayEnv) -> None:
    env.cli("secret", "set", "team", input=GOOD)
    alice = env.cli("token", "create", "--agent", "alice-bot").stdout.strip()
    bob = env.cli("token", "create", "--agent", "bob-bot").stdout.strip()
    bob_id = next(t["id"] for t in json.loads(env.cli("token", "list", "--json").stdout) if t["agent"] == "bob-bot")
    env.cli("sync")
    server = HttpGateway(env, env.root / "gateway.log")
    try:
        async with http_client(server.url, bob) as bob_client:
            link = structured(await bob_client.call_tool("connect", {"connector": "team"}))
        env.cli("approvals", "approve", link["approval_id"])
        page = await get(link["connect_url"])
        saved = await post(link["connect_url"], {"csrf": csrf(page.text), "secret": TYPO})
        assert saved.status_code == 200 and "Saved" in saved.text

        async with http_client(server.url, alice) as alice_client:
            refused = structured(await alice_client.call_tool("call", {"tool": "team.me.get"}))
        assert refused["status"] == "needs_auth", refused
        told = (
            f"The team-wide credential of team was replaced at {{}} by token:{bob_id} (agent bob-bot) through a "
            "connect link, approved by operator; team answered 401 to team.me.get carrying it at"
        )
        before, after = told.split("{}")
        assert before in refused["reason"] and after in refused["reason"], refused["reason"]

        [listed] = json.loads(env.cli("connectors", "--json").stdout)["connectors"]
        assert listed["status"] == "needs_auth" and before in listed["warning"] and after in listed["warning"]
        report = env.cli("doctor", "--json", check=False)
        finding = {f["check"]: f for f in json.loads(report.stdout)}["connector team"]
        assert finding["level"] == "problem" and before in finding["message"]
        # The operator asked to approve alice's reconnection reads the same.
        [asked] = json.loads(env.cli("approvals", "list", "--json").stdout)
        assert before in asked["summary"] and after in asked["summary"]
        for shown in (json.dumps(refused), json.dumps(listed), report.stdout, json.dumps(asked), server.log()):
            assert GOOD not in shown and TYPO not in shown
    finally:
        server.stop()
