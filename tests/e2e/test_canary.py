"""The canary test: a distinctive secret must never come back out of the gateway.

Distinctive secrets (all starting with ``CANARY-7f3a9c``) are stored for several auth kinds
(bearer, basic password, api_key in the query string -- so the URL carries it --, api_key header
and cookie, custom header template), some with ``mcp-gateway secret set`` and some through the
human pages. Then every meta-tool is exercised over stdio and over streamable HTTP, on every path:
an ok call whose upstream echoes the whole request back, an upstream error page that echoes the
request headers, upstreams that quote the secret in 500/403/401 bodies, in text, in JSON keys, in
SSE events and in broken JSON, a redirect off-origin, an unreachable upstream, a timeout, invalid
arguments, a pending approval (approved on its page, then run), ``connect`` and
``request_secret`` (with their pages submitted). Every CLI command runs too. Afterwards the
canary -- plain, percent-encoded (which keeps the ASCII marker), JSON-escaped, and base64-encoded
at any alignment -- must appear in no tool result, no CLI output, no log, no audit row, no page,
and nowhere in the raw bytes of the state directory, read while the gateway runs and after it
stopped.

The smaller tests at the end pin down leaks found while writing this one.
"""

from __future__ import annotations

import base64
import json
import re
import unicodedata
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import stdio_client

from mcp_gateway.core.calls import DEFAULT_MAX_RESPONSE_BYTES
from mcp_gateway.execution.response import ERROR_TEXT_LIMIT
from tests.support.env import child_env
from tests.support.upstream import EchoApp, Receive, Scope, Send, serve_asgi

from .conftest import GatewayEnv, HttpGateway, free_port, http_client

pytestmark = pytest.mark.anyio

CANARY = "CANARY-7f3a9c-do-not-leak"
MARK = "CANARY-7f3a9c"
"""Every secret below starts with it, so finding it also catches a secret cut in half."""

PASSWORD = f"{CANARY}-basic"
SECRETS: dict[str, str] = {
    "bearer_api": f"{CANARY}-bearer",
    "basic_api": json.dumps({"username": "alice", "password": PASSWORD}),
    # In the query string: the URL itself carries it, percent-encoded (space, '/', '+', '=', '&').
    "query_key": f"{CANARY} q/u+e=r&y",
    "header_key": f"{CANARY}-header",
    "cookie_key": f"{CANARY}-cookie",
    "custom_api": f"{CANARY}-custom",
    "down_query": f"{CANARY}-down",
    "down_bearer": f"{CANARY}-down-bearer",
    "slow_query": f"{CANARY}-slow",
}
PAGE_SECRET = f"{CANARY}-page"
"""What a human pastes into the secret and connect pages."""

CANARY_SLUGS = ("bearer_api", "basic_api", "query_key", "header_key", "cookie_key", "custom_api")
"""Connectors on a live upstream with a canary credential from ``secret set``."""

AUTH: dict[str, str] = {
    "bearer_api": "{type: bearer}",
    "basic_api": "{type: basic}",
    "query_key": "{type: api_key, in: query, name: api_key}",
    "header_key": "{type: api_key, in: header, name: X-Api-Key}",
    "cookie_key": "{type: api_key, in: cookie, name: session}",
    "custom_api": '{type: custom, headers: {X-Custom-Auth: "Token {secret}"}}',
    "down_query": "{type: api_key, in: query, name: api_key}",
    "down_bearer": "{type: bearer}",
    "slow_query": "{type: api_key, in: query, name: api_key}",
    "page_bearer": "{type: bearer}",
    "page_basic": "{type: basic}",
    "open_api": "{type: none}",
}

LEAKS = ("error", "forbidden", "unauthorized", "text", "keys", "sse", "garbage", "redirect")
"""``leak.<name>`` actions: upstreams that quote the request (and so the secret) back."""

ACTIONS = """    source:
      http:
        actions:
          - path: items.get
            method: GET
            url: /items/{id}
            summary: Fetch one item by its id
            input_schema: {type: object, required: [id], properties: {id: {type: string}}}
          - path: items.create
            method: POST
            url: /items
            summary: Create a new item with a name
            input_schema: {type: object, required: [name], properties: {name: {type: string}}}
          - path: errors.echo
            method: GET
            url: /echo-headers-error
            summary: Trigger an upstream error page that echoes the request headers
          - path: slow
            method: GET
            url: /slow
            summary: Answer after s seconds
            input_schema: {type: object, properties: {s: {type: number}}}
          - path: leak.binary
            method: GET
            url: /leak/binary
            summary: Binary body quoting the request
          - path: leak.cut
            method: GET
            url: /leak/cut
            summary: Error text long enough to be capped inside the quoted credential
          - path: leak.big
            method: GET
            url: /leak/big
            summary: A body long enough to be capped inside the quoted credential
"""
ACTIONS += "".join(
    f"""          - path: leak.{name}
            method: GET
            url: /leak/{name}
            summary: Upstream quoting the request ({name})
"""
    for name in LEAKS
)


# -- a leaky upstream ---------------------------------------------------------------------------


class LeakyUpstream:
    """The echo upstream, plus ``/leak/...`` routes that quote the request back in awkward places."""

    def __init__(self) -> None:
        self.echo = EchoApp()

    @property
    def requests(self) -> list[Any]:
        return self.echo.requests

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not scope["path"].startswith("/leak/"):
            await self.echo(scope, receive, send)
            return
        request = await EchoApp._record(scope, receive)
        self.echo.requests.append(request)
        quoted = json.dumps(request.as_json())
        name = request.path.removeprefix("/leak/")
        status, content_type, headers = 200, "application/json", []
        match name:
            case "error" | "forbidden" | "unauthorized":
                status = {"error": 500, "forbidden": 403, "unauthorized": 401}[name]
                body = json.dumps({"message": f"cannot serve {request.raw_path}?{request.query}: {quoted}"}).encode()
            case "text":
                content_type, body = "text/plain", f"you sent {request.query} and {quoted}".encode()
            case "keys":
                body = json.dumps({v: k for k, v in [*request.headers.items(), ("query", request.query)]}).encode()
            case "sse":
                content_type, body = "text/event-stream", f"data: {quoted}\n\ndata: {request.query}\n\n".encode()
            case "garbage":
                body = b'{"oops": ' + quoted.encode()  # labelled JSON, cut short
            case "redirect":
                status, body = 302, b""
                headers = [(b"location", f"http://127.0.0.1:1/steal?{request.query}".encode())]
            case "binary":
                content_type, body = "application/octet-stream", b"\x00\x01" + quoted.encode()
            case "cut":
                # Pad so that the gateway's error-text cap falls inside the quoted Authorization header,
                # just after the marker.
                auth = request.headers.get("authorization", "")
                pad = ERROR_TEXT_LIMIT - 1 - len("Bearer ") - len(MARK) - 3
                status, body = 500, json.dumps({"message": "x" * pad + auth}).encode()
            case "big":
                auth = request.headers.get("authorization", "")
                pad = DEFAULT_MAX_RESPONSE_BYTES - len("Bearer ") - len(MARK) - 3
                content_type, body = "text/plain", ("x" * pad + auth).encode()
            case _:
                status, body = 404, b"{}"
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", content_type.encode()), *headers],
            }
        )
        await send({"type": "http.response.body", "body": body})


# -- what must never appear ------------------------------------------------------------------


def _b64_needles(marker: bytes) -> set[str]:
    """Base64 of ``marker`` wherever it sits in a longer value (three alignments, both alphabets).

    Characters that also encode neighbouring bytes depend on the context, so they are left out.
    """
    out: set[str] = set()
    for pad in range(3):
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            text = encode(b"\0" * pad + marker).decode()
            start = 4 if pad else 0
            end = len(text) - 4 if (pad + len(marker)) % 3 else len(text)
            out.add(text[start:end])
    return out


NEEDLES = (MARK, *sorted(_b64_needles(MARK.encode())))
"""The marker covers the plain, percent-encoded (space, '/', '+' ... come after it), JSON-escaped and
cut forms; the base64 needles cover a secret inside a Basic header or any other base64 payload."""


@dataclass
class Evidence:
    """Everything the gateway produced, by where it came from."""

    items: list[tuple[str, str]] = field(default_factory=list)

    def add(self, label: str, data: str | bytes) -> None:
        self.items.append((label, data.decode("latin-1") if isinstance(data, bytes) else data))

    def add_result(self, label: str, result: Any) -> dict[str, Any]:
        for i, block in enumerate(result.content):
            self.add(f"{label} content[{i}]", getattr(block, "text", "") or block.model_dump_json())
        body = result.structured_content or {}
        self.add(f"{label} structured", json.dumps(body, ensure_ascii=False))
        return body

    def add_state(self, label: str, state_dir: Path, *, running: bool = False) -> None:
        files = sorted(p for p in state_dir.iterdir() if p.is_file())
        names = {p.name for p in files}
        assert {"state.db", "master.key"} <= names, names
        if running:  # WAL mode: the newest pages live in the -wal file while a connection is open
            assert "state.db-wal" in names, names
        for path in files:
            self.add(f"{label}: {path.name}", path.read_bytes())

    def leaks(self) -> list[str]:
        found = []
        for label, text in self.items:
            for needle in NEEDLES:
                at = text.find(needle)
                if at >= 0:
                    found.append(f"{label}: {needle!r} in ...{text[max(0, at - 80) : at + 60]!r}...")
        return found


# -- fixtures ----------------------------------------------------------------------------------


@dataclass
class CanaryEnv:
    gw: GatewayEnv
    upstream: LeakyUpstream
    evidence: Evidence = field(default_factory=Evidence)

    def cli(self, *args: str, input: str | None = None, expect: int | None = 0) -> str:
        proc = self.gw.cli(*args, input=input, check=False)
        label = "cli " + " ".join(args)
        self.evidence.add(f"{label} [stdout]", proc.stdout)
        self.evidence.add(f"{label} [stderr]", proc.stderr)
        assert "Traceback" not in proc.stderr, f"{label}:\n{proc.stderr}"
        if expect is not None:
            assert proc.returncode == expect, f"{label} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
        return proc.stdout

    def set_secret(self, slug: str) -> None:
        self.cli("secret", "set", slug, input=SECRETS[slug])

    def cli_many(self, *commands: tuple[tuple[str, ...], dict[str, Any]]) -> list[str]:
        """Independent commands, a few at a time (each is a process; most of its time is start-up)."""
        with ThreadPoolExecutor(max_workers=3) as pool:
            futures = [pool.submit(self.cli, *args, **kw) for args, kw in commands]
            return [f.result() for f in futures]


@pytest.fixture
def canary_env(tmp_path: Path) -> Iterator[CanaryEnv]:
    upstream = LeakyUpstream()
    with serve_asgi(upstream) as base_url:
        down = f"http://127.0.0.1:{free_port()}"  # nothing listens there
        pages_port = free_port()
        connectors = []
        for slug, auth in AUTH.items():
            url = down if slug.startswith("down_") else base_url
            timeout = "    timeout: 1\n" if slug == "slow_query" else ""
            connectors.append(f"  - slug: {slug}\n    base_url: {url}\n    auth: {auth}\n{timeout}{ACTIONS}")
        manifest = tmp_path / "canary.yaml"
        manifest.write_text(
            f"project: canary\ndefault_mode: risk\npublic_url: http://127.0.0.1:{pages_port}\n"
            "connectors:\n" + "".join(connectors)
        )
        state_dir = tmp_path / "state"
        # No MCP_GATEWAY_MASTER_KEY: the gateway creates state/master.key, which is checked too.
        env = child_env() | {
            "MCP_GATEWAY_STATE_DIR": str(state_dir),
            "PYTHONUNBUFFERED": "1",
        }
        gw = GatewayEnv(tmp_path, manifest, state_dir, upstream.echo, base_url, pages_port, env)
        yield CanaryEnv(gw, upstream)


# -- talking to the gateway --------------------------------------------------------------------


def _csrf(html: str) -> str:
    match = re.search(r'name="csrf" value="([0-9a-f]+)"', html)
    assert match, html
    return match.group(1)


async def _get(url: str) -> httpx2.Response:
    # In stdio mode the page server starts when the first link is minted; give it a moment.
    async with httpx2.AsyncClient(timeout=10) as http:
        for _ in range(100):
            try:
                return await http.get(url)
            except httpx2.ConnectError:
                await anyio.sleep(0.05)
    raise AssertionError(f"nothing serves {url}")


async def _post(url: str, data: dict[str, str]) -> httpx2.Response:
    async with httpx2.AsyncClient(timeout=10) as http:
        return await http.post(url, data=data)


@asynccontextmanager
async def stdio_session(env: CanaryEnv, errlog: Path) -> AsyncIterator[Client]:
    with errlog.open("w") as err:
        async with Client(stdio_client(env.gw.stdio_params(), errlog=err), mode="legacy") as client:
            yield client


async def exercise(client: Client, env: CanaryEnv, transport: str) -> None:
    """Every meta-tool on every path, each result recorded as evidence and checked for its status."""
    ev = env.evidence

    async def tool(name: str, args: dict[str, Any]) -> dict[str, Any]:
        result = await client.call_tool(name, args)
        body = ev.add_result(f"{transport} {name} {json.dumps(args)[:120]}", result)
        assert "Traceback" not in json.dumps(body), body
        return body

    async def call(name: str, args: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
        return await tool("call", {"tool": name, **({"args": args} if args is not None else {}), **extra})

    def replacing(asked: dict[str, Any]) -> None:
        """The second pass finds the team's credential the first stored: an operator approves replacing it."""
        if "approval_id" in asked:
            env.cli("approvals", "approve", asked["approval_id"])

    async def page(label: str, url: str, data: dict[str, str] | None = None) -> httpx2.Response:
        response = await (_post(url, data) if data is not None else _get(url))
        ev.add(f"{transport} page {label}", response.text)
        return response

    listed = await tool("connectors", {})
    assert {c["slug"] for c in listed["connectors"]} == set(AUTH)
    for query in ("fetch an item by id", "upstream error page", "create a new item", "api key secret password"):
        assert "results" in await tool("discover", {"query": query, "limit": 50})
    for slug in ("bearer_api", "query_key", "page_basic"):
        assert (await tool("describe", {"tool": f"{slug}.items.get"}))["input_schema"]["required"] == ["id"]
    assert (await tool("describe", {"tool": "query_key.no_such_thing"}))["reason"] == "action_not_found"

    for slug in CANARY_SLUGS:
        ok = await call(f"{slug}.items.get", {"id": "a/b c"})
        assert ok["status"] == "ok", ok
        assert ok["data"]["raw_path"] == "/items/a%2Fb%20c"
        projected = await call(f"{slug}.items.get", {"id": "1"}, fields=["headers", "query", "cookies"])
        assert projected["status"] == "ok", projected
        echoed = await call(f"{slug}.errors.echo")
        assert (echoed["status"], echoed["upstream_status"]) == ("error", 500), echoed
        for leak in LEAKS:
            body = await call(f"{slug}.leak.{leak}")
            expected = {
                "error": "error",
                "forbidden": "denied",
                "unauthorized": "needs_auth",
                "redirect": "error",
            }.get(leak, "ok")
            assert body["status"] == expected, (slug, leak, body)
            if leak == "redirect":
                assert body["reason"] == "upstream_redirect_refused", body

    for slug in ("down_query", "down_bearer"):
        down = await call(f"{slug}.items.get", {"id": "1"})
        assert down["reason"] == "upstream_unreachable", down
    slow = await call("slow_query.slow", {"s": 5})
    assert slow["reason"] == "upstream_timeout", slow
    for bad in ({}, {"id": 5}, {"id": "1", "extra": "x"}):
        assert (await call("query_key.items.get", bad))["reason"] == "invalid_args"
    assert (await call("query_key.items.get", {"id": ".."}))["reason"] == "invalid_args"

    # A write needs a human: the approval page shows the call, approving it lets it run once.
    pending = await call("basic_api.items.create", {"name": "widget"})
    assert pending["status"] == "pending_approval", pending
    shown = await page("approval GET", pending["approval_url"])
    assert "basic_api.items.create" in shown.text
    approved = await page("approval POST", pending["approval_url"], {"csrf": _csrf(shown.text), "decision": "approve"})
    assert "Approved" in approved.text
    ran = await call("basic_api.items.create", {"name": "widget"}, approval_id=pending["approval_id"])
    assert ran["status"] == "ok", ran
    still_pending = await call("query_key.items.create", {"name": "left pending"})
    assert still_pending["status"] == "pending_approval"

    # connect / request_secret, and a human pasting the canary into their pages.
    assert (await tool("connect", {"connector": "open_api"}))["status"] == "ok"
    assert "connect_url" in await tool("connect", {"connector": "basic_api"})
    asked = await tool("request_secret", {"connector": "page_bearer"})
    secret_url = asked["secret_url"]
    if "approval_id" in asked:  # the first pass stored the team's secret: replacing it takes an operator
        waiting = await page("secret GET, waiting", secret_url)
        assert "Waiting for an operator" in waiting.text, waiting.text
        replacing(asked)
    form = await page("secret GET", secret_url)
    saved = await page("secret POST", secret_url, {"csrf": _csrf(form.text), "secret": PAGE_SECRET})
    assert saved.status_code == 200 and "Saved" in saved.text, saved.text
    reused = await page("secret POST again", secret_url, {"csrf": _csrf(form.text), "secret": PAGE_SECRET})
    assert reused.status_code == 410

    asked = await tool("request_secret", {"connector": "bearer_api", "name": "extra"})
    named_url = asked["secret_url"]
    replacing(asked)
    form = await page("named secret GET", named_url)
    saved = await page("named secret POST", named_url, {"csrf": _csrf(form.text), "secret": PAGE_SECRET})
    assert saved.status_code == 200, saved.text

    asked = await tool("connect", {"connector": "page_basic"})
    connect_url = asked["connect_url"]
    replacing(asked)
    form = await page("connect GET", connect_url)
    refused = await page("connect POST bad csrf", connect_url, {"csrf": "0" * 64, "password": PAGE_SECRET})
    assert refused.status_code == 403
    incomplete = await page("connect POST incomplete", connect_url, {"csrf": _csrf(form.text), "password": PAGE_SECRET})
    assert incomplete.status_code == 400, incomplete.text
    saved = await page(
        "connect POST", connect_url, {"csrf": _csrf(form.text), "username": "pat", "password": PAGE_SECRET}
    )
    assert saved.status_code == 200 and "Saved" in saved.text, saved.text

    for slug in ("page_bearer", "page_basic"):
        assert (await call(f"{slug}.items.get", {"id": "1"}))["status"] == "ok"
        assert (await call(f"{slug}.leak.error"))["status"] == "error"
        assert (await call(f"{slug}.leak.keys"))["status"] == "ok"
    needs_auth = await call("open_api.leak.unauthorized")
    assert needs_auth["status"] == "needs_auth"


def _assert_secrets_reached_the_upstream(upstream: LeakyUpstream) -> None:
    """Without this the test could pass by never sending a credential at all."""
    seen = upstream.requests
    auths = {r.headers.get("authorization") for r in seen}
    basic = "Basic " + base64.b64encode(f"alice:{PASSWORD}".encode()).decode()
    page_basic = "Basic " + base64.b64encode(f"pat:{PAGE_SECRET}".encode()).decode()
    for expected in (f"Bearer {SECRETS['bearer_api']}", basic, f"Bearer {PAGE_SECRET}", page_basic):
        assert expected in auths, expected
    assert any(("api_key", SECRETS["query_key"]) in r.query_params for r in seen)
    assert any(r.headers.get("x-api-key") == SECRETS["header_key"] for r in seen)
    assert any(r.cookies.get("session") == SECRETS["cookie_key"] for r in seen)
    assert any(r.headers.get("x-custom-auth") == f"Token {SECRETS['custom_api']}" for r in seen)
    assert any(r.path == "/echo-headers-error" for r in seen)


# Every surface in one test (stdio, HTTP, pages, ~40 CLI processes): ~70 s alone on two cores, about
# twice that inside the full suite, so its timeout is 3x the latter rather than the default 120 s.
@pytest.mark.timeout(420)
async def test_canary_never_leaks(canary_env: CanaryEnv) -> None:
    env, ev = canary_env, canary_env.evidence
    env.cli("validate")
    env.cli("sync")
    env.set_secret("bearer_api")  # creates state/master.key; the rest may run side by side
    env.cli_many(*((("secret", "set", slug), {"input": SECRETS[slug]}) for slug in SECRETS))

    # stdio: the SDK client launches the server; its stderr goes to a file.
    errlog = env.gw.root / "stdio-stderr.log"
    async with stdio_session(env, errlog) as client:
        await exercise(client, env, "stdio")
        ev.add_state("state dir while stdio serves", env.gw.state_dir, running=True)
    ev.add("stdio server stderr", errlog.read_bytes())

    # streamable HTTP, as an agent with a token.
    token = env.cli("token", "create", "--agent", "bot").strip()
    http_log = env.gw.root / "http-gateway.log"
    server = HttpGateway(env.gw, http_log)
    try:
        async with http_client(server.url, token) as client:
            await exercise(client, env, "http")
        ev.add_state("state dir while http serves", env.gw.state_dir, running=True)
    finally:
        server.stop()
    ev.add("http gateway log", http_log.read_bytes())

    # Every CLI command.
    ok, failed = {}, {"expect": 1}
    outputs = env.cli_many(
        (("call", "header_key.items.create", "--args", '{"name": "cli"}'), ok),
        (("sync", "--json"), {"expect": None}),
        (("connectors",), ok),
        (("connectors", "--json"), ok),
        (("discover", "fetch", "an", "item"), ok),
        (("discover", "upstream", "error", "--json"), ok),
        (("describe", "query_key.items.get"), ok),
        (("describe", "custom_api.leak.error"), ok),
        (("call", "query_key.items.get", "--args", '{"id": "7"}'), ok),
        (("call", "basic_api.items.get", "--args", '{"id": "7"}'), ok),
        (("call", "query_key.errors.echo"), failed),
        (("call", "basic_api.errors.echo"), failed),
        (("call", "custom_api.leak.error"), failed),
        (("call", "header_key.leak.text"), ok),
        (("call", "query_key.items.get", "--args", '{"id": "7"}', "--fields", "query", "headers"), ok),
        (("call", "down_query.items.get", "--args", '{"id": "7"}'), failed),
        (("call", "query_key.items.get", "--args", '{"id": 7}'), failed),
        (("call", "query_key.items.get", "--args", "{not json"), {"expect": 2}),
        (("connect", "basic_api"), ok),
        (("token", "list"), ok),
        (("token", "list", "--json"), ok),
    )
    pending = json.loads(outputs[0])
    assert pending["status"] == "pending_approval"
    env.cli("approvals", "list")
    env.cli("approvals", "list", "--all", "--json")
    env.cli("approvals", "deny", pending["approval_id"])
    audit = json.loads(env.cli("audit", "--json", "--limit", "1000"))
    assert len(audit) > 100, len(audit)
    assert {"upstream_error", "upstream_unreachable", "upstream_timeout", "invalid_args"} <= {
        row["reason"] for row in audit
    }
    env.cli("audit", "--limit", "1000")
    rotated = env.gw.cli("keys", "rotate", input="a-new-master-key-0123456789abcdefgh", check=False)
    ev.add("cli keys rotate [stdout]", rotated.stdout)
    ev.add("cli keys rotate [stderr]", rotated.stderr)
    # 9 from secret set, the 2 pasted into pages and the named 'extra' one.
    assert rotated.returncode == 0 and "re-encrypted 12 credentials" in rotated.stderr, rotated.stderr

    # At rest, after every process stopped.
    ev.add_state("state dir after shutdown", env.gw.state_dir)
    assert (env.gw.state_dir / "master.key").is_file()

    _assert_secrets_reached_the_upstream(env.upstream)
    leaks = ev.leaks()
    assert not leaks, f"{len(leaks)} leak(s):\n" + "\n".join(leaks[:40])


def test_the_needles_find_every_form_of_the_secrets() -> None:
    """The check itself: it must see each secret in every shape it could leak in."""
    from urllib.parse import quote, quote_plus

    forms = []
    for value in [*(v for k, v in SECRETS.items() if k != "basic_api"), PASSWORD, PAGE_SECRET]:
        forms += [value, quote(value, safe=""), quote_plus(value), json.dumps(value), value[:14]]
        for prefix in ("", "a", "ab", "Bearer ", "alice:", "pat:"):
            raw = (prefix + value).encode()
            forms += [base64.b64encode(raw).decode(), base64.urlsafe_b64encode(raw).decode()]
    for form in forms:
        evidence = Evidence()
        evidence.add("sample", f"before {form} after")
        assert evidence.leaks(), form
    clean = Evidence()
    clean.add("clean", "Bearer [redacted] " + base64.b64encode(b"CANARY-7f3").decode())
    assert not clean.leaks()


# -- leaks found while writing the canary test ---------------------------------------------------


def test_binary_response_does_not_carry_the_secret_in_base64(canary_env: CanaryEnv) -> None:
    """An upstream that quotes the request in a binary body: the gateway hands the body on as
    base64, which the redactor (working on text) cannot see into, so decoding it shows the secret."""
    canary_env.set_secret("bearer_api")
    result = json.loads(canary_env.cli("call", "bearer_api.leak.binary"))
    assert result["status"] == "ok", result
    assert canary_env.upstream.requests[-1].headers["authorization"] == f"Bearer {SECRETS['bearer_api']}"
    decoded = base64.b64decode(result["data"]["base64"]).decode("latin-1")
    assert MARK not in decoded, f"the base64 data decodes to ...{decoded[decoded.find(MARK) - 20 :][:80]!r}"


def test_error_text_cap_does_not_cut_a_secret_in_half(canary_env: CanaryEnv) -> None:
    """An upstream error message long enough that the 2,000-character cap falls inside the quoted
    credential: the cut secret no longer matches any redaction form, so its first part goes out."""
    canary_env.set_secret("bearer_api")
    result = json.loads(canary_env.cli("call", "bearer_api.leak.cut", expect=1))
    assert result["status"] == "error" and result["upstream_status"] == 500, result
    message = result["upstream_message"]
    assert MARK not in message, f"upstream_message ends with {message[-40:]!r}"


def test_response_cap_does_not_cut_a_secret_in_half(canary_env: CanaryEnv) -> None:
    """The same for an ok body longer than the response cap: the cut falls inside the secret."""
    canary_env.set_secret("bearer_api")
    result = json.loads(canary_env.cli("call", "bearer_api.leak.big"))
    assert result["status"] == "ok" and result["truncated"] is True, {k: v for k, v in result.items() if k != "data"}
    assert MARK not in result["data"], f"data ends with {result['data'][-40:]!r}"


def test_debug_log_never_prints_a_query_key(canary_env: CanaryEnv) -> None:
    """``--debug`` is what an operator turns on to investigate, and its output gets pasted into bug
    reports: it must not print the api_key that query placement puts into the URL."""
    canary_env.set_secret("query_key")
    proc = canary_env.gw.cli("call", "query_key.items.get", "--args", '{"id": "1"}', "--debug", check=False)
    assert proc.returncode == 0, proc.stderr
    assert ("api_key", SECRETS["query_key"]) in canary_env.upstream.requests[-1].query_params
    lines = [line for line in proc.stderr.splitlines() if MARK in line]
    assert not lines, "\n".join(lines)


NON_ASCII_PASSWORD = "CANARY-7f3a9c-päßwörd+Z9/="
"""A Basic password beyond ASCII, as a person chooses one."""
NON_ASCII_TOKEN = "CANARY-7f3a9c-msTök/5m+M="
"""A stdio MCP server's environment secret beyond ASCII (allowed there)."""

_RESPELLED: dict[str, Any] = {
    "nfd": lambda pw: unicodedata.normalize("NFD", pw).encode(),
    "ascii_q": lambda pw: pw.encode("ascii", "replace"),  # Java's getBytes("US-ASCII"), many loggers
    "latin1_bytes": lambda pw: pw.encode("latin-1"),  # under a UTF-8 label: one U+FFFD per letter
    "fffd_per_byte": lambda pw: "".join(c if c.isascii() else "\ufffd" * len(c.encode()) for c in pw).encode(),
    "dropped": lambda pw: pw.encode("ascii", "ignore"),
    "folded": lambda pw: "".join(c for c in unicodedata.normalize("NFKD", pw) if c.isascii()).encode(),
    "german": lambda pw: pw.replace("ä", "ae").replace("ö", "oe").replace("ß", "ss").encode(),
    # ``ä`` composed, ``ö`` decomposed: neither the NFC nor the NFD spelling, and it reads the same
    "mixed": lambda pw: (pw[: pw.index("ä") + 1] + unicodedata.normalize("NFD", pw[pw.index("ä") + 1 :])).encode(),
}


async def _respelling_upstream(scope: Scope, receive: Receive, send: Send) -> None:
    """Quotes the Basic password it was sent in the spelling its path names: ``/err/<how>`` in a 400,
    ``/ok/<how>`` in a 200, both JSON labelled UTF-8."""
    headers = dict(scope["headers"])
    _, _, encoded = headers.get(b"authorization", b"").decode().partition(" ")
    password = base64.b64decode(encoded).decode().partition(":")[2]
    kind, how = scope["path"].strip("/").split("/")
    quoted = _RESPELLED[how](password)
    body = b'{"message": "bad credentials for alice:' + quoted + b'"}'
    raw = [(b"content-type", b"application/json; charset=utf-8"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 400 if kind == "err" else 200, "headers": raw})
    await send({"type": "http.response.body", "body": body})


async def test_a_secret_beyond_ascii_echoed_in_another_spelling_is_redacted(tmp_path: Path) -> None:
    """A password with umlauts and ß echoed decomposed or half decomposed (it reads the same), with its
    umlauts as ``?``, U+FFFD or nothing, folded or transliterated, and an MCP server's environment token echoed
    decomposed: each reaches the agent as ``[redacted]``, in an error and in an ok result."""
    import sys

    from mcp_gateway.core import result_payload
    from mcp_gateway.manifest import parse_manifest
    from mcp_gateway.runtime import Settings, open_gateway
    from mcp_gateway.services.identity import OPERATOR
    from tests.support.mcp_servers import REPO

    paths = [f"/{kind}/{how}" for how in _RESPELLED for kind in ("err", "ok")]
    actions = "".join(
        f"\n          - {{path: {p.strip('/').replace('/', '.')}, method: GET, url: {p}, summary: {p}}}" for p in paths
    )
    argv = json.dumps([sys.executable, "-m", "tests.support.echo_env_mcp"])
    with serve_asgi(_respelling_upstream) as base:
        text = f"""
project: respelled
default_mode: allow_all
connectors:
  - slug: basic
    base_url: {base}
    auth: {{type: basic}}
    source:
      http:
        actions:{actions}
  - slug: child
    timeout: 20
    trust: auto
    auth: {{type: bearer}}
    source: {{mcp: {{command: {argv}, cwd: "{REPO}", env: {{ECHO_TOKEN: "{{secret}}"}}}}}}
"""
        manifest = parse_manifest(text, base_dir=tmp_path)
        settings = Settings(manifest_path=None, state_dir=tmp_path / "state", env={"MCP_GATEWAY_MASTER_KEY": "r" * 40})
        async with open_gateway(settings, manifest=manifest) as gw:
            await gw._vault.put("basic", {"username": "alice", "password": NON_ASCII_PASSWORD})  # pyright: ignore[reportPrivateUsage]
            await gw._vault.put("child", NON_ASCII_TOKEN)  # pyright: ignore[reportPrivateUsage]
            await gw.sync()
            answers: dict[str, str] = {}
            for p in paths:
                answers[p] = json.dumps(
                    result_payload(await gw.call(OPERATOR, f"basic.{p.strip('/').replace('/', '.')}", {})),
                    ensure_ascii=False,
                )
            for tool in ("in_use", "refused"):
                answers[tool] = json.dumps(
                    result_payload(await gw.call(OPERATOR, f"child.{tool}", {})), ensure_ascii=False
                )
    for where, answer in answers.items():
        ok = where == "in_use" or where.startswith("/ok/")
        assert json.loads(answer)["status"] == ("ok" if ok else "error"), (where, answer)
        assert "[redacted]" in answer, (where, answer)
        folded = "".join(c for c in unicodedata.normalize("NFKD", answer) if c.isascii())
        assert "CANARY-7f3a9c-p" not in folded and "CANARY-7f3a9c-ms" not in folded, (where, answer)
