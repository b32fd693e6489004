"""The MCP executor against real upstream MCP servers: server-everything (npm) over stdio,
streamable HTTP and SSE, mcp-server-time (PyPI) over stdio, and the controllable lab server
(``tests/support/mcp_lab.py``) over all three, all on this machine (stdio children, 127.0.0.1).

Covered: tools become actions with the right risk, calls return text / structured / image / audio /
embedded resources, ``isError`` is an upstream error with its text, the session is pooled, a
killed stdio child is respawned, a restarted HTTP server is reconnected, a hung server times out
with a clear error, the credential reaches a stdio child's environment and an HTTP server's
header, and closing the executor stops every child.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import trustme

from mcp_gateway.auth import LastMeterAuth
from mcp_gateway.execution import mcp_transport
from mcp_gateway.execution.mcp_result import ITEM_FRAMING
from mcp_gateway.execution.mcp_sessions import McpExecutor
from mcp_gateway.execution.response import Outcome
from mcp_gateway.manifest import ConnectorConfig, parse_manifest
from mcp_gateway.primitives.crypto import AESGCMCipher
from mcp_gateway.primitives.redaction import Redactor
from mcp_gateway.primitives.secrets import PROJECT_WIDE
from mcp_gateway.services.credentials import CredentialVault
from mcp_gateway.sources.mcp import normalize_mcp_tools
from mcp_gateway.store.sqlite import SQLiteStore
from mcp_gateway.vocabulary.errors import UpstreamError
from mcp_gateway.vocabulary.model import Action
from tests.support.mcp_servers import REPO, McpHttpServer, everything_command, lab_command, time_command
from tests.support.upstream import LoopbackServer, read_body

# Real upstream MCP servers as child processes: not in the fast lane.
pytestmark = [pytest.mark.anyio, pytest.mark.slow]

SECRET = "lab-canary-secret-0123456789"
MAX = 64 * 1024


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def vault(tmp_path: Path) -> AsyncIterator[CredentialVault]:
    store = SQLiteStore(tmp_path / "s.db")
    await store.open()
    try:
        yield CredentialVault(store, AESGCMCipher(b"k" * 32, project="t"), project="t")
    finally:
        await store.close()


@pytest.fixture
async def executor() -> AsyncIterator[McpExecutor]:
    async with McpExecutor() as ex:
        yield ex


def connector(source: str, *, auth: str = "{type: none}", extra: str = "") -> ConnectorConfig:
    text = f"project: t\nconnectors:\n  - slug: up\n    auth: {auth}\n    source: {source}\n{extra}"
    return parse_manifest(text).connectors[0]


def stdio(command: list[str], env: str = "{}", cwd: Path = REPO) -> str:
    args = ", ".join(f'"{a}"' for a in command)
    return f'{{mcp: {{command: [{args}], cwd: "{cwd}", env: {env}}}}}'


def remote(url: str, transport: str = "streamable_http") -> str:
    return f'{{mcp: {{url: "{url}", transport: {transport}}}}}'


class Upstream:
    """One connector on an executor: list, then call by action path, like the gateway does."""

    def __init__(self, executor: McpExecutor, cfg: ConnectorConfig, vault: CredentialVault) -> None:
        self.executor, self.cfg, self.vault = executor, cfg, vault
        self.actions: dict[str, Action] = {}
        self.redactor = Redactor()

    async def auth(self) -> LastMeterAuth:
        sealed = await self.vault.sealed(self.cfg.slug, principal=PROJECT_WIDE)
        self.redactor = Redactor()
        return LastMeterAuth(self.cfg.auth, sealed, on_secret=self.redactor.add, connector=self.cfg.slug)

    async def load(self, **normalize: Any) -> list[Action]:
        tools = await self.executor.list_tools(self.cfg, auth=await self.auth())
        actions = normalize_mcp_tools(self.cfg.slug, tools, risk_overrides=self.cfg.risk, **normalize)
        self.actions = {a.path: a for a in actions}
        return actions

    async def call(self, path: str, args: dict[str, Any] | None = None, *, max_bytes: int = MAX) -> Outcome:
        prepared = self.executor.prepare(self.actions[path], args or {}, self.cfg, None)
        return await self.executor.run(prepared, auth=await self.auth(), max_bytes=max_bytes)


async def upstream(executor: McpExecutor, vault: CredentialVault, cfg: ConnectorConfig) -> Upstream:
    up = Upstream(executor, cfg, vault)
    await up.load()
    return up


def structured(outcome: Outcome) -> Any:
    return outcome.data["structuredContent"]


def texts(outcome: Outcome) -> list[str]:
    return [c["text"] for c in outcome.data.get("content", []) if c["type"] == "text"]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def wait_dead(pid: int) -> None:
    with anyio.fail_after(10):
        while alive(pid):  # noqa: ASYNC110 - another process's death has no event to wait on
            await anyio.sleep(0.02)


# -- the lab server over stdio -----------------------------------------------------------------------


async def test_tools_list_is_read_page_by_page_into_actions_with_risk(
    executor: McpExecutor, vault: CredentialVault
) -> None:
    up = await upstream(executor, vault, connector(stdio(lab_command())))
    # 10 tools, 3 a page: four tools/list pages.
    assert sorted(up.actions) == [
        "fail",
        "files.read.v2",
        "files.read.v2_2",
        "media",
        "note",
        "peek",
        "pid",
        "slow",
        "whoami",
        "wipe",
    ]
    risks = {path: a.risk for path, a in up.actions.items()}
    assert risks["peek"] == "read"
    assert risks["wipe"] == "destructive"
    assert risks["note"] == "write"  # no annotations at all
    # The name already spelled as its path keeps it, whatever the listing order.
    assert up.actions["files.read.v2"].binding.tool == "files.read.v2"  # type: ignore[union-attr]
    assert up.actions["files.read.v2_2"].binding.tool == "Files/Read.v2"  # type: ignore[union-attr]
    assert up.actions["peek"].input_schema["required"] == ["key"]
    assert up.actions["wipe"].summary == "Delete everything under a target."

    untrusted = await up.load(trust_annotations=False)
    assert {a.risk for a in untrusted} == {"write"}


async def test_calls_return_text_structured_image_audio_and_resources(
    executor: McpExecutor, vault: CredentialVault
) -> None:
    up = await upstream(executor, vault, connector(stdio(lab_command())))
    peek = await up.call("peek", {"key": "abcd"})
    assert peek.http_status is None
    assert structured(peek) == {"key": "abcd", "value": 4}
    assert "content" not in peek.data  # its only text was the same JSON: not sent twice

    media = await up.call("media")
    kinds = [c["type"] for c in media.data["content"]]
    assert kinds == ["text", "image", "audio", "resource", "resource", "resource_link"]
    image, audio, text_res, blob_res, link = media.data["content"][1:]
    assert image["mimeType"] == "image/png" and image["bytes"] == 72 and len(image["data"]) == 96
    assert audio["mimeType"] == "audio/wav" and audio["bytes"] == 48
    assert text_res["resource"] == {"uri": "lab://notes/1", "mimeType": "text/plain", "text": "note one"}
    assert blob_res["resource"]["bytes"] == 72 and "blob" in blob_res["resource"]
    assert link == {"type": "resource_link", "uri": "lab://notes/2", "name": "note two", "mimeType": "text/plain"}
    assert media.truncated is False

    capped = await up.call("media", max_bytes=60 + 2 * ITEM_FRAMING)  # each item counts its framing too
    assert capped.truncated is True
    image = capped.data["content"][1]
    assert image["truncated"] is True and len(image["data"]) % 4 == 0 and len(image["data"]) < 96


async def test_a_tool_error_is_an_upstream_error_with_its_text(executor: McpExecutor, vault: CredentialVault) -> None:
    up = await upstream(executor, vault, connector(stdio(lab_command())))
    with pytest.raises(UpstreamError) as caught:
        await up.call("fail")
    assert caught.value.reason == "upstream_error"
    assert caught.value.upstream_message == "the widget is broken; pass a smaller size"
    assert "'fail'" in str(caught.value)
    assert "its message says what went wrong" in str(caught.value) and "taken effect" not in str(caught.value)


async def test_a_write_tools_error_may_have_taken_effect_and_a_generic_one_says_nothing(
    executor: McpExecutor, vault: CredentialVault
) -> None:
    up = await upstream(executor, vault, connector(stdio(lab_command())))
    with pytest.raises(UpstreamError) as caught:
        await up.call("wipe", {"target": "/busy"})
    assert caught.value.upstream_message == "Error executing tool wipe"
    message = str(caught.value)
    assert "without saying what went wrong" in message and "its message says what went wrong" not in message
    assert "the call may have taken effect, so check before calling again" in message


async def test_one_session_is_reused_and_a_killed_child_is_respawned(
    executor: McpExecutor, vault: CredentialVault
) -> None:
    up = await upstream(executor, vault, connector(stdio(lab_command())))
    first = structured(await up.call("pid"))["result"]
    assert structured(await up.call("pid"))["result"] == first  # the same live child

    os.kill(first, signal.SIGKILL)
    await wait_dead(first)
    # Its stdout's end retires the session (a call that meets it first is a connection lost mid-call,
    # which is not sent again): on a busy machine that comes a moment after the process is gone.
    with anyio.fail_after(10):
        while any(s.alive for s in executor._sessions.values()):  # pyright: ignore[reportPrivateUsage]  # noqa: ASYNC110
            await anyio.sleep(0.02)
    second = structured(await up.call("pid"))["result"]
    assert second != first and alive(second)


async def test_a_hung_upstream_times_out_clearly_and_the_next_call_reconnects(
    executor: McpExecutor, vault: CredentialVault
) -> None:
    # 8 s: long enough to spawn the child on a busy 2-core machine (it imports the MCP SDK), short enough for a test.
    up = await upstream(executor, vault, connector(stdio(lab_command()), extra="    timeout: 8\n"))
    hung = structured(await up.call("pid"))["result"]
    started = time.monotonic()
    with pytest.raises(UpstreamError) as caught:
        await up.call("slow", {"seconds": 60})
    assert time.monotonic() - started < 20
    assert caught.value.reason == "upstream_timeout"
    assert "did not answer the call to 'slow' within 8 s" in str(caught.value)
    assert "timeout" in str(caught.value)  # says what to raise
    assert structured(await up.call("peek", {"key": "k"}))["value"] == 1
    assert structured(await up.call("pid"))["result"] != hung
    await wait_dead(hung)  # the hung child was stopped, not leaked


async def test_a_server_that_never_answers_the_handshake_times_out(
    executor: McpExecutor, vault: CredentialVault
) -> None:
    cfg = connector(stdio([sys.executable, "-c", "import time; time.sleep(60)"]), extra="    timeout: 1\n")
    with pytest.raises(UpstreamError) as caught:
        await executor.list_tools(cfg, auth=LastMeterAuth(cfg.auth, None))
    assert caught.value.reason == "upstream_timeout"
    assert "within 1 s" in str(caught.value)


async def test_a_missing_command_and_a_closed_port_say_what_to_fix(
    executor: McpExecutor, vault: CredentialVault
) -> None:
    missing = connector(stdio(["/nonexistent/mcp-server"]))
    with pytest.raises(UpstreamError) as caught:
        await executor.list_tools(missing, auth=LastMeterAuth(missing.auth, None))
    assert caught.value.reason == "upstream_unreachable"
    assert "could not start" in str(caught.value) and "mcp.command" in str(caught.value)

    closed = connector(remote("http://127.0.0.1:9/mcp"))
    with pytest.raises(UpstreamError) as caught:
        await executor.list_tools(closed, auth=LastMeterAuth(closed.auth, None))
    assert caught.value.reason == "upstream_unreachable"
    assert "127.0.0.1:9" in str(caught.value)


async def test_the_secret_goes_into_the_stdio_env_and_a_new_secret_respawns_the_child(
    executor: McpExecutor, vault: CredentialVault
) -> None:
    await vault.put("up", SECRET)
    cfg = connector(stdio(lab_command(), env='{LAB_TOKEN: "tok:{secret}"}'), auth="{type: bearer}")
    up = await upstream(executor, vault, cfg)
    seen = structured(await up.call("whoami"))
    assert seen["env_token"] == f"tok:{SECRET}"  # the raw answer; the gateway redacts it (test below)
    assert up.redactor.redact_text(seen["env_token"]) == "tok:[redacted]"  # this call's redactor learned it
    before = structured(await up.call("pid"))["result"]
    assert structured(await up.call("pid"))["result"] == before

    await vault.put("up", "rotated-secret-value")
    assert structured(await up.call("whoami"))["env_token"] == "tok:rotated-secret-value"
    assert structured(await up.call("pid"))["result"] != before


async def test_closing_the_executor_stops_every_child(vault: CredentialVault) -> None:
    async with McpExecutor() as executor:
        up = await upstream(executor, vault, connector(stdio(lab_command())))
        pid = structured(await up.call("pid"))["result"]
        assert alive(pid)
    await wait_dead(pid)


# -- HTTP transports -------------------------------------------------------------------------------


async def test_streamable_http_with_header_auth_reconnects_after_a_restart(
    executor: McpExecutor, vault: CredentialVault
) -> None:
    await vault.put("up", SECRET)
    with McpHttpServer.lab("streamable-http") as server:
        up = await upstream(executor, vault, connector(remote(server.url), auth="{type: bearer}"))
        seen = structured(await up.call("whoami"))
        assert seen == {"env_token": None, "authorization": f"Bearer {SECRET}"}
        assert up.redactor  # the call's own auth applied the credential, so its redactor knows it
        before = structured(await up.call("pid"))["result"]

        server.restart()  # the server forgets the session
        assert structured(await up.call("whoami"))["authorization"] == f"Bearer {SECRET}"
        assert structured(await up.call("pid"))["result"] != before

        server.stop()
        with pytest.raises(UpstreamError) as caught:
            await up.call("peek", {"key": "k"})
        assert caught.value.reason == "upstream_unreachable"
        server.start()
        assert structured(await up.call("peek", {"key": "kk"}))["value"] == 2


async def test_a_rejected_credential_is_a_401_outcome_or_an_auth_failure(
    executor: McpExecutor, vault: CredentialVault
) -> None:
    with McpHttpServer.lab("streamable-http", env={"LAB_REQUIRE_BEARER": SECRET}) as server:
        cfg = connector(remote(server.url), auth="{type: bearer}")
        await vault.put("up", "wrong-token")
        with pytest.raises(UpstreamError) as caught:  # at sync: the handshake itself is refused
            await executor.list_tools(cfg, auth=LastMeterAuth(cfg.auth, await vault.sealed("up", principal="*")))
        assert caught.value.reason == "auth_failed" and caught.value.upstream_status == 401
        assert "wrong-token" not in str(caught.value)

        await vault.put("up", SECRET)
        up = await upstream(executor, vault, cfg)
        assert structured(await up.call("peek", {"key": "a"}))["value"] == 1
        await vault.put("up", "revoked-token")  # the call's own credential goes on its request
        outcome = await up.call("peek", {"key": "a"})
        assert outcome.http_status == 401  # the gateway turns it into needs_auth with a connect link


async def test_legacy_sse_transport_with_header_auth(executor: McpExecutor, vault: CredentialVault) -> None:
    await vault.put("up", SECRET)
    with McpHttpServer.lab("sse") as server:
        up = await upstream(executor, vault, connector(remote(server.url, "sse"), auth="{type: bearer}"))
        assert structured(await up.call("whoami"))["authorization"] == f"Bearer {SECRET}"
        assert structured(await up.call("peek", {"key": "abc"}))["value"] == 3


async def test_streamable_http_over_tls_trusts_the_connectors_private_ca(
    vault: CredentialVault, tmp_path: Path
) -> None:
    from tests.support.mcp_lab import lab

    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(tmp_path / "server.pem"))
    app = lab.streamable_http_app()
    # The executor closes its sessions before the server stops (an open stream would hold its shutdown).
    with LoopbackServer(app, lifespan="on", ssl_certfile=str(tmp_path / "server.pem")) as server:
        async with McpExecutor() as executor:
            url = f"{server.base_url}/mcp"
            untrusting = connector(remote(url))
            with pytest.raises(UpstreamError) as caught:
                await executor.list_tools(untrusting, auth=LastMeterAuth(untrusting.auth, None))
            assert caught.value.reason == "upstream_unreachable"
            assert "is not trusted" in str(caught.value) and "tls.ca_file" in str(caught.value)

            trusting = connector(remote(url), extra=f'    tls: {{ca_file: "{tmp_path / "ca.pem"}"}}\n')
            up = await upstream(executor, vault, trusting)
            assert structured(await up.call("peek", {"key": "tls"}))["value"] == len("tls")


# -- real third-party servers ------------------------------------------------------------------------


async def test_server_everything_over_stdio(executor: McpExecutor, vault: CredentialVault) -> None:
    up = await upstream(executor, vault, connector(stdio(everything_command("stdio"))))
    assert {"echo", "get_sum", "get_tiny_image", "get_structured_content", "get_env"} <= set(up.actions)
    assert up.actions["echo"].risk == "read"  # readOnlyHint
    assert up.actions["toggle_simulated_logging"].risk == "write"  # readOnlyHint false, not destructive
    assert up.actions["get_sum"].binding.tool == "get-sum"  # type: ignore[union-attr]

    assert texts(await up.call("echo", {"message": "hi there"})) == ["Echo: hi there"]
    assert texts(await up.call("get_sum", {"a": 2, "b": 40})) == ["The sum of 2 and 40 is 42."]
    image = await up.call("get_tiny_image")
    assert [c["type"] for c in image.data["content"]] == ["text", "image", "text"]
    assert image.data["content"][1]["mimeType"] == "image/png"
    weather = await up.call("get_structured_content", {"location": "New York"})
    assert set(structured(weather)) == {"temperature", "conditions", "humidity"}


async def test_server_everything_over_streamable_http_reconnects_after_a_restart(
    executor: McpExecutor, vault: CredentialVault
) -> None:
    with McpHttpServer.everything("streamableHttp") as server:
        up = await upstream(executor, vault, connector(remote(server.url)))
        assert texts(await up.call("echo", {"message": "one"})) == ["Echo: one"]
        server.restart()
        assert texts(await up.call("echo", {"message": "two"})) == ["Echo: two"]


async def test_server_everything_over_legacy_sse(executor: McpExecutor, vault: CredentialVault) -> None:
    with McpHttpServer.everything("sse") as server:
        up = await upstream(executor, vault, connector(remote(server.url, "sse")))
        assert texts(await up.call("echo", {"message": "over sse"})) == ["Echo: over sse"]


async def test_mcp_server_time_over_stdio(executor: McpExecutor, vault: CredentialVault) -> None:
    up = await upstream(executor, vault, connector(stdio(time_command())))
    assert set(up.actions) == {"get_current_time", "convert_time"}
    assert {a.risk for a in up.actions.values()} == {"read"}
    now = structured(await up.call("get_current_time", {"timezone": "UTC"}))
    assert now["timezone"] == "UTC" and now["datetime"].endswith("+00:00")


class _Busy:
    """A streamable-HTTP MCP server that opens sessions and lists one tool, then answers every
    ``tools/call`` with an HTTP status of its own (a rate limit, a crash), as servers behind a proxy do."""

    def __init__(self, status: int, retry_after: str | None = None) -> None:
        self.status, self.retry_after = status, retry_after

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        assert scope["type"] == "http"
        body = await read_body(receive)
        request = json.loads(body) if body else {}
        headers = [(b"content-type", b"application/json"), (b"mcp-session-id", b"s-1")]
        if scope["method"] != "POST" or "id" not in request:
            await send({"type": "http.response.start", "status": 202, "headers": headers})
            await send({"type": "http.response.body", "body": b""})
            return
        method, status = request["method"], 200
        result: dict[str, Any] = {}
        if method == "initialize":
            result = {
                "protocolVersion": request["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "busy", "version": "1"},
            }
        elif method == "tools/list":
            result = {"tools": [{"name": "send", "inputSchema": {"type": "object"}}]}
        else:
            status = self.status
            if self.retry_after is not None:
                headers.append((b"retry-after", self.retry_after.encode()))
        answer = {"jsonrpc": "2.0", "id": request["id"], "result": result} if status == 200 else {"error": "busy"}
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": json.dumps(answer).encode()})


@pytest.mark.parametrize(("status", "retry_after"), [(429, "7"), (503, "2"), (500, None)])
async def test_an_http_status_of_the_server_itself_is_the_calls_outcome(
    executor: McpExecutor, vault: CredentialVault, status: int, retry_after: str | None
) -> None:
    with LoopbackServer(_Busy(status, retry_after)) as server:
        up = await upstream(executor, vault, connector(remote(f"{server.base_url}/mcp")))
        outcome = await up.call("send")
    assert outcome.http_status == status and outcome.data is None
    assert outcome.retry_after == (float(retry_after) if retry_after else None)


class _Answers:
    """A streamable-HTTP MCP server whose tools answer in one SSE event of ``size`` bytes, never
    (``hang``), or not at all (``cut``: the event stream ends without the answer)."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        assert scope["type"] == "http"
        body = await read_body(receive)
        request = json.loads(body) if body else {}
        if scope["method"] != "POST" or "id" not in request:
            await send({"type": "http.response.start", "status": 202, "headers": [(b"mcp-session-id", b"s-1")]})
            await send({"type": "http.response.body", "body": b""})
            return
        result: dict[str, Any] = {}
        if request["method"] == "initialize":
            result = {
                "protocolVersion": request["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "answers", "version": "1"},
            }
        elif request["method"] == "tools/list":
            schema = {"type": "object", "properties": {"size": {"type": "integer"}, "mode": {"type": "string"}}}
            read_only = {"readOnlyHint": True}
            result = {
                "tools": [
                    {"name": "make", "inputSchema": schema},
                    {"name": "look", "inputSchema": schema, "annotations": read_only},
                    {"name": "shaped", "inputSchema": schema, "outputSchema": {"type": "object", "required": ["n"]}},
                ]
            }
        else:
            arguments = request["params"]["arguments"]
            self.calls.append(request["params"]["name"])
            if arguments["mode"] == "hang":
                await anyio.sleep(30)
            if arguments["mode"] == "cut":
                await _sse(send, b": nothing but a comment\n\n")
                return
            if arguments["mode"] in _NOT_MCP:
                kind, body = _NOT_MCP[arguments["mode"]]
                await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", kind)]})
                await send({"type": "http.response.body", "body": body})
                return
            if arguments["mode"] == "error":
                error = {"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32603, "message": "hook failed"}}
                await _sse(send, b"event: message\ndata: " + json.dumps(error).encode() + b"\n\n")
                return
            result = {"content": [{"type": "text", "text": "z" * arguments["size"]}]}
        answer = {"jsonrpc": "2.0", "id": request["id"], "result": result}
        await _sse(send, b"event: message\ndata: " + json.dumps(answer).encode() + b"\n\n")


_NOT_MCP = {
    "json": (b"application/json", b'{"created": true, "id": 7}'),
    "text": (b"text/plain", b"OK created"),
    "html": (b"text/html", b"<html><body>created</body></html>"),
    "bad_sse": (b"text/event-stream", b"event: message\ndata: not json\n\n"),
}
"""200 answers to a call that are no MCP message: (content type, body)."""


async def _sse(send: Any, event: bytes) -> None:
    headers = [(b"content-type", b"text/event-stream"), (b"mcp-session-id", b"s-1")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": event})


async def test_an_answer_over_the_sdks_event_limit_is_read_and_capped(
    executor: McpExecutor, vault: CredentialVault
) -> None:
    with LoopbackServer(_Answers()) as server:
        up = await upstream(executor, vault, connector(remote(f"{server.base_url}/mcp")))
        outcome = await up.call("make", {"size": 2 * 1024 * 1024, "mode": "sse"})
    assert outcome.truncated is True


@pytest.mark.parametrize(("tool", "write"), [("make", True), ("look", False)])
async def test_an_answer_too_large_to_read_says_the_tool_ran(
    executor: McpExecutor, vault: CredentialVault, monkeypatch: pytest.MonkeyPatch, tool: str, write: bool
) -> None:
    monkeypatch.setattr(mcp_transport, "MAX_SSE_EVENT_BYTES", 64 * 1024)
    with LoopbackServer(_Answers()) as server:
        up = await upstream(executor, vault, connector(remote(f"{server.base_url}/mcp")))
        with pytest.raises(UpstreamError) as caught:
            await up.call(tool, {"size": 100_000, "mode": "sse"})
        message = str(caught.value)
        assert caught.value.reason == "upstream_error" and "refused" not in message
        assert f"ran '{tool}', but its answer was too large for the gateway to read (over 0.0625 MB)" in message
        assert ("may have taken effect" in message) == write
        # The session still serves.
        assert (await up.call(tool, {"size": 5, "mode": "sse"})).data["content"][0]["text"] == "zzzzz"


@pytest.mark.parametrize(("tool", "write"), [("make", True), ("look", False)])
async def test_a_call_that_times_out_says_whether_it_may_have_taken_effect(
    executor: McpExecutor, vault: CredentialVault, tool: str, write: bool
) -> None:
    with LoopbackServer(_Answers()) as server:
        up = await upstream(executor, vault, connector(remote(f"{server.base_url}/mcp"), extra="    timeout: 1\n"))
        with pytest.raises(UpstreamError) as caught:
            await up.call(tool, {"size": 0, "mode": "hang"})
    assert caught.value.reason == "upstream_timeout"
    assert ("may have reached it and taken effect, so check before calling again" in str(caught.value)) == write


@pytest.mark.parametrize("tool", ["make", "look"])
async def test_an_answer_stream_that_ends_without_the_answer_is_a_lost_call_sent_once(
    executor: McpExecutor, vault: CredentialVault, tool: str
) -> None:
    answers = _Answers()
    with LoopbackServer(answers) as server:
        up = await upstream(executor, vault, connector(remote(f"{server.base_url}/mcp")))
        with pytest.raises(UpstreamError) as caught:
            await up.call(tool, {"size": 0, "mode": "cut"})
    assert caught.value.reason == "upstream_unreachable" and "refused" not in str(caught.value)
    assert "may or may not have taken effect" in str(caught.value)
    assert answers.calls == [tool]  # a read too: sending it again is for retries.reads to decide


@pytest.mark.parametrize("mode", [*_NOT_MCP, "error"])
@pytest.mark.parametrize(("tool", "write"), [("make", True), ("look", False)])
async def test_a_call_answered_but_not_with_a_result_says_whether_it_may_have_taken_effect(
    executor: McpExecutor, vault: CredentialVault, mode: str, tool: str, write: bool
) -> None:
    with LoopbackServer(_Answers()) as server:
        up = await upstream(executor, vault, connector(remote(f"{server.base_url}/mcp")))
        with pytest.raises(UpstreamError) as caught:
            await up.call(tool, {"size": 0, "mode": mode})
    message = str(caught.value)
    assert caught.value.reason == "upstream_error"
    assert ("may have taken effect, so check before calling again" in message) == write
    if mode in _NOT_MCP:
        assert "refused" not in message and "with a message the MCP client could not read" in message
    else:
        assert ("refused" in message) == (not write)


async def test_a_write_whose_result_breaks_its_output_schema_may_have_taken_effect(
    executor: McpExecutor, vault: CredentialVault
) -> None:
    with LoopbackServer(_Answers()) as server:
        up = await upstream(executor, vault, connector(remote(f"{server.base_url}/mcp")))
        with pytest.raises(UpstreamError) as caught:
            await up.call("shaped", {"size": 1, "mode": "sse"})
    assert "with an invalid result" in str(caught.value)
    assert "may have taken effect, so check before calling again" in str(caught.value)


class _Failing:
    """A streamable-HTTP endpoint that answers every request with one HTTP status and an HTML page."""

    def __init__(self, status: int) -> None:
        self.status = status

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        assert scope["type"] == "http"
        await read_body(receive)
        await send({"type": "http.response.start", "status": self.status, "headers": [(b"content-type", b"text/html")]})
        await send({"type": "http.response.body", "body": b"<html><body><h1>Oops</h1></body></html>"})


@pytest.mark.parametrize(("status", "says"), [(500, "a failure on its side"), (429, "limiting how often"), (502, "")])
async def test_a_handshake_answered_with_an_http_status_names_it(executor: McpExecutor, status: int, says: str) -> None:
    with LoopbackServer(_Failing(status)) as server:
        cfg = connector(remote(f"{server.base_url}/mcp"))
        with pytest.raises(UpstreamError) as caught:
            await executor.list_tools(cfg, auth=LastMeterAuth(cfg.auth, None))
    assert caught.value.upstream_status == status
    assert f"answered the MCP handshake with HTTP {status}" in str(caught.value) and says in str(caught.value)


async def test_tools_past_the_page_limit_are_left_out_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    # A server that keeps paginating is cut at MAX_PAGES (a server bug must not hang a sync); the
    # tools after the cut were dropped without a word, so an operator could not tell why one was missing.
    from types import SimpleNamespace

    from mcp import types

    from mcp_gateway.execution import mcp_sessions

    class Endless:
        async def list_tools(self, cursor: str | None = None) -> Any:
            page = int(cursor or 0)
            tool = types.Tool(name=f"t{page}", input_schema={"type": "object"})
            return SimpleNamespace(tools=[tool], next_cursor=str(page + 1))

    with caplog.at_level("WARNING", logger="mcp_gateway.execution.mcp_sessions"):
        tools = await mcp_sessions._list_all(Endless(), "lab", "lab's MCP server")  # type: ignore[arg-type]
    assert len(tools) == mcp_sessions.MAX_PAGES
    said = [r.getMessage() for r in caplog.records]
    assert said == [
        f"connector lab: its MCP server listed tools over more than {mcp_sessions.MAX_PAGES} pages; the tools "
        f"after page {mcp_sessions.MAX_PAGES} (the first {mcp_sessions.MAX_PAGES}) are left out"
    ]


def malformed(mode: str = "some") -> str:
    return stdio([sys.executable, "-m", "tests.support.malformed_mcp", mode])


async def test_tools_the_sdk_cannot_read_are_left_out_one_by_one(
    executor: McpExecutor, vault: CredentialVault, caplog: pytest.LogCaptureFixture
) -> None:
    # One tool the SDK rejects (a string input schema, no name, a schema nested past its parser) failed
    # the whole tools/list: the connector loaded nothing, and was said to be slow.
    with caplog.at_level("WARNING", logger="mcp_gateway.execution.mcp_answers"):
        up = await upstream(executor, vault, connector(malformed(), extra="    timeout: 5\n"))
    assert sorted(up.actions) == ["deep_result", "ok"]
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 3, said
    assert "tool 'stringly' is left out" in said[0] and "inputSchema.type: Input should be 'object'" in said[0]
    assert "number 3 of the listing (it has no name)" in said[1] and "name: Field required" in said[1]
    assert "tool 'abyss' is left out" in said[2] and "nested 302 levels deep" in said[2]
    assert texts(await up.call("ok")) == ["ok"]  # the session the listing opened still works


async def test_a_listing_with_no_readable_tool_says_so(executor: McpExecutor) -> None:
    cfg = connector(malformed("none"), extra="    timeout: 5\n")
    with pytest.raises(UpstreamError) as caught:
        await executor.list_tools(cfg, auth=LastMeterAuth(cfg.auth, None))
    assert caught.value.reason == "upstream_error"
    assert "listed tools, but none of them could be read" in str(caught.value)
    assert "within" not in str(caught.value) and "timeout" not in str(caught.value)


async def test_an_answer_nested_past_the_parser_is_unreadable_at_once_not_late(
    executor: McpExecutor, vault: CredentialVault, caplog: pytest.LogCaptureFixture
) -> None:
    # Over stdio the SDK dropped such a line: the call waited its whole timeout and was told the server
    # had not answered, with advice to raise the timeout.
    up = await upstream(executor, vault, connector(malformed(), extra="    timeout: 5\n"))
    started = time.monotonic()
    with caplog.at_level("WARNING"), pytest.raises(UpstreamError) as caught:
        await up.call("deep_result", {"n": 240})
    assert time.monotonic() - started < 3
    assert not [r for r in caplog.records if r.levelname == "ERROR"]  # read again, not a stray line
    assert caught.value.reason == "upstream_error"
    assert "answered the call to 'deep_result' with a message the MCP client could not read" in str(caught.value)
    assert structured(await up.call("deep_result", {"n": 3})) == {"root": {"d": {"d": {"d": "bottom"}}}}
