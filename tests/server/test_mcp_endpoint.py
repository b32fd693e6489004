"""``/mcp``'s JSON-first answers (``server/mcp_endpoint.py``, ``server/fast/json_first.py``): a request
whose first message is its response is answered with ``application/json``; progress, an elicitation, a long silence or a
cancellation keep the SDK's SSE stream (or its answers), and the SDK's client sees the same results.

A real SDK ``MCPServer`` behind ``streamable_http_app``, served by uvicorn on loopback; the SDK's
own client over real HTTP, every answer's content type recorded on the wire.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx2
import pytest
import uvicorn
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server import _streamable_http_modern as modern_sdk  # pyright: ignore[reportPrivateUsage]
from mcp.server.elicitation import AcceptedElicitation
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata, SessionMessage
from mcp_types import ElicitRequestParams, ElicitResult, JSONRPCNotification
from pydantic import BaseModel
from starlette.types import Message, Receive, Scope

from mcp_gateway.server import fast
from mcp_gateway.server.fast.json_first import JsonFirstTransport
from mcp_gateway.server.mcp_endpoint import streamable_http_app
from tests.support.ports import free_port
from tests.support.serving import serving

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Answer(BaseModel):
    ok: bool


@dataclass
class Lab:
    url: str
    cancelled: anyio.Event = field(default_factory=anyio.Event)
    wire: list[tuple[str, str]] = field(default_factory=list)
    """(JSON-RPC method, content type of the answer) for every POST that carried a request."""


def lab_server(lab: Lab) -> MCPServer:
    server = MCPServer(name="lab", log_level="WARNING")

    @server.tool(name="quick")
    async def quick(n: int) -> str:
        return f"got {n}"

    @server.tool(name="progress")
    async def progress(ctx: Context) -> str:
        await ctx.report_progress(1, 2, "half way")
        await anyio.sleep(0.05)
        return "done"

    @server.tool(name="ask")
    async def ask(ctx: Context) -> str:
        answer = await ctx.elicit("Proceed?", Answer)
        return f"{answer.action}:{answer.data.ok if isinstance(answer, AcceptedElicitation) else None}"

    @server.tool(name="slow")
    async def slow(seconds: float) -> str:
        await anyio.sleep(seconds)
        return "slept"

    @server.tool(name="hang")
    async def hang() -> str:
        try:
            await anyio.sleep(30)
        finally:
            lab.cancelled.set()
        return "never"

    @server.tool(name="fails")
    async def fails() -> str:
        raise ValueError("tool failed on purpose")

    return server


@asynccontextmanager
async def served(*, sdk: bool = False, lean: bool = True) -> AsyncIterator[Lab]:
    """The lab server behind ``streamable_http_app`` (``lean=False``: as on an SDK release the lean paths
    were not written for), or with ``sdk`` behind the SDK's own."""
    port = free_port()
    lab = Lab(url=f"http://127.0.0.1:{port}/mcp")
    server = lab_server(lab)
    if sdk:
        app = server.streamable_http_app(streamable_http_path="/mcp")
    else:
        app = streamable_http_app(server, path="/mcp", lean=lean)[0]
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    async with serving(uvicorn.Server(config)):
        yield lab


@asynccontextmanager
async def client(lab: Lab, mode: str = "legacy", **options: object) -> AsyncIterator[Client]:
    async def record(response: httpx2.Response) -> None:
        request = response.request
        if request.method == "POST" and b'"id"' in request.content and b'"method"' in request.content:
            method = httpx2.Response(200, content=request.content).json()["method"]
            lab.wire.append((method, response.headers.get("content-type", "")))

    async with (
        httpx2.AsyncClient(timeout=30, event_hooks={"response": [record]}) as http,
        Client(streamable_http_client(lab.url, http_client=http), mode=mode, **options) as session,  # type: ignore[arg-type]
    ):
        yield session


def answered(lab: Lab, method: str) -> list[str]:
    return [kind.split(";")[0] for m, kind in lab.wire if m == method]


async def test_a_quick_call_is_answered_with_json_and_the_session_goes_on() -> None:
    async with served() as lab, client(lab) as session:
        for n in range(3):
            result = await session.call_tool("quick", {"n": n})
            assert result.structured_content == {"result": f"got {n}"}
        assert (await session.list_tools()).tools
    assert answered(lab, "tools/call") == ["application/json"] * 3
    assert set(answered(lab, "tools/list")) == {"application/json"}  # the client lists the tools itself too
    assert answered(lab, "initialize") == ["text/event-stream"]  # the SDK's path, unchanged


async def test_on_another_sdk_release_the_sdks_own_manager_answers() -> None:
    assert fast.SDK_TESTED  # the release these paths were written against is the one the tests run
    async with served(lean=False) as lab:
        async with client(lab) as session:
            assert (await session.call_tool("quick", {"n": 1})).structured_content == {"result": "got 1"}
        async with client(lab, mode="auto") as session:
            assert (await session.call_tool("quick", {"n": 2})).structured_content == {"result": "got 2"}
    assert answered(lab, "tools/call")[0] == "text/event-stream"  # the SDK's SSE, no JSON-first answer


async def test_errors_are_json_answers_with_the_content_the_sdks_stream_carried() -> None:
    calls = [("fails", {}), ("quick", {"n": "not a number"}), ("no_such_tool", {})]
    seen: dict[bool, list[object]] = {}
    for sdk in (True, False):
        async with served(sdk=sdk) as lab, client(lab) as session:
            seen[sdk] = [(await session.call_tool(name, args)).model_dump() for name, args in calls]
        kinds = answered(lab, "tools/call")
        assert kinds == ["text/event-stream"] * 3 if sdk else ["application/json"] * 3
    assert seen[False] == seen[True]
    assert all(result["is_error"] for result in seen[False])  # type: ignore[index]


async def test_progress_comes_first_so_the_answer_is_the_sse_stream_carrying_it() -> None:
    reports: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        reports.append((progress, total, message))

    async with served() as lab, client(lab) as session:
        done = await session.call_tool("progress", {}, progress_callback=on_progress)
        assert done.structured_content == {"result": "done"}
        assert (await session.call_tool("quick", {"n": 2})).structured_content == {"result": "got 2"}
    assert reports == [(1, 2, "half way")]
    assert answered(lab, "tools/call") == ["text/event-stream", "application/json"]


async def test_an_elicitation_goes_to_the_client_on_the_calls_stream() -> None:
    asked: list[str] = []

    async def on_elicit(_context: object, params: ElicitRequestParams) -> ElicitResult:
        asked.append(params.message)
        return ElicitResult(action="accept", content={"ok": True})

    async with served() as lab, client(lab, elicitation_callback=on_elicit) as session:
        result = await session.call_tool("ask", {})
    assert result.structured_content == {"result": "accept:True"}
    assert asked == ["Proceed?"]
    assert answered(lab, "tools/call") == ["text/event-stream"]


async def test_a_call_silent_past_the_commit_time_is_streamed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(JsonFirstTransport, "sse_commit_after", 0.1)
    async with served() as lab, client(lab) as session:
        assert (await session.call_tool("slow", {"seconds": 0.4})).structured_content == {"result": "slept"}
        assert (await session.call_tool("slow", {"seconds": 0})).structured_content == {"result": "slept"}
    assert answered(lab, "tools/call") == ["text/event-stream", "application/json"]


async def test_a_call_the_client_gives_up_on_is_cancelled_and_the_session_still_works() -> None:
    async with served() as lab, client(lab) as session:
        with pytest.raises(MCPError):
            await session.call_tool("hang", {}, read_timeout_seconds=0.3)
        with anyio.fail_after(5):
            await lab.cancelled.wait()  # the client's notifications/cancelled reached the tool
        assert (await session.call_tool("quick", {"n": 7})).structured_content == {"result": "got 7"}


async def test_2026_quick_calls_and_errors_are_json_answers_with_the_sdks_content() -> None:
    calls = [("quick", {"n": 1}), ("fails", {}), ("quick", {"n": "not a number"}), ("no_such_tool", {})]
    seen: dict[bool, list[object]] = {}
    for sdk in (True, False):
        async with served(sdk=sdk) as lab, client(lab, mode="auto") as session:
            seen[sdk] = [(await session.call_tool(name, args)).model_dump() for name, args in calls]
        assert answered(lab, "tools/call") == ["application/json"] * 4
    assert seen[False] == seen[True]


async def test_2026_progress_commits_the_answer_to_sse_and_reaches_the_client() -> None:
    reports: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        reports.append((progress, total, message))

    async with served() as lab, client(lab, mode="auto") as session:
        done = await session.call_tool("progress", {}, progress_callback=on_progress)
        assert done.structured_content == {"result": "done"}
    assert reports == [(1, 2, "half way")]
    assert answered(lab, "tools/call") == ["text/event-stream"]


async def test_2026_a_call_silent_past_the_ping_interval_is_streamed_with_pings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(modern_sdk, "_SSE_PING_INTERVAL", 0.1)
    async with served() as lab, httpx2.AsyncClient(timeout=10) as http:
        call = {
            "jsonrpc": "2.0",
            "id": 5,
            "method": "tools/call",
            "params": {"name": "slow", "arguments": {"seconds": 0.35}},
        }
        answer = await http.post(lab.url, json=envelope(call), headers=modern_headers("tools/call", "slow"))
    assert answer.headers["content-type"] == "text/event-stream"
    *pings, last = answer.text.strip().split("\r\n\r\n")
    assert len(pings) >= 2 and set(pings) == {": ping"}
    assert last.startswith('event: message\r\ndata: {"jsonrpc":"2.0","id":5,"result":') and '"slept"' in last


async def test_2026_a_client_that_goes_away_cancels_its_call() -> None:
    async with served() as lab:
        call = {"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": "hang", "arguments": {}}}
        async with httpx2.AsyncClient(timeout=httpx2.Timeout(10, read=0.3)) as http:
            with pytest.raises(httpx2.ReadTimeout):
                await http.post(lab.url, json=envelope(call), headers=modern_headers("tools/call", "hang"))
        with anyio.fail_after(5):
            await lab.cancelled.wait()


async def test_2026_what_the_lean_path_does_not_vouch_for_gets_the_sdks_answers() -> None:
    call = {"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": "quick", "arguments": {"n": 4}}}
    headers = modern_headers("tools/call", "quick")
    async with served() as lab, httpx2.AsyncClient(timeout=10) as http:
        ok = await http.post(lab.url, json=envelope(call), headers=headers)
        assert ok.status_code == 200 and ok.json()["result"]["structuredContent"] == {"result": "got 4"}
        assert (await http.get(lab.url, headers=headers)).status_code == 405
        assert (
            await http.post(lab.url, json=envelope(call), headers=headers | {"accept": "text/plain"})
        ).status_code == 406
        parse = await http.post(lab.url, content=b"{nope", headers=headers)
        assert parse.status_code == 400 and parse.json()["error"]["code"] == -32700
        note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
        assert (await http.post(lab.url, json=note, headers=headers)).status_code == 202
        batch = await http.post(lab.url, json=[envelope(call)], headers=headers)
        assert batch.status_code == 400
        mismatch = await http.post(lab.url, json=envelope(call), headers=headers | {"mcp-name": "other"})
        assert mismatch.status_code == 400 and mismatch.json()["id"] == 8
        bare = await http.post(lab.url, json=call, headers=headers)  # no _meta envelope
        assert bare.status_code == 400
        again = await http.post(lab.url, json=envelope(call), headers=headers)
        assert again.json() == ok.json()


def envelope(message: dict[str, Any]) -> dict[str, Any]:
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
    }
    return message | {"params": message["params"] | {"_meta": meta}}


def modern_headers(method: str, name: str) -> dict[str, str]:
    return {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": method,
        "mcp-name": name,
    }


async def _handshake_session(http: httpx2.AsyncClient, url: str, headers: dict[str, str]) -> dict[str, str]:
    """A 2025-11-25 session opened on ``url``: the headers its later requests carry."""
    params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    opened = await http.post(
        url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}, headers=headers
    )
    return {"mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}


async def test_requests_the_transport_refuses_get_the_sdks_answers() -> None:
    async with served() as lab, httpx2.AsyncClient(timeout=10) as http:
        headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
        session = await _handshake_session(http, lab.url, headers)
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "quick", "arguments": {"n": 3}}}
        only_json = await http.post(lab.url, json=call, headers=headers | session | {"accept": "application/json"})
        assert only_json.status_code == 406
        no_session = await http.post(lab.url, json=call, headers=headers)
        assert no_session.status_code == 400
        wrong = await http.post(lab.url, content=b"{not json", headers=headers | session)
        assert wrong.status_code == 400 and wrong.json()["error"]["code"] == -32700
        answer = await http.post(lab.url, json=call, headers=headers | session)
        assert answer.status_code == 200 and answer.headers["content-type"] == "application/json"
        assert answer.headers["mcp-session-id"] == session["mcp-session-id"]
        assert answer.json()["id"] == 2 and answer.json()["result"]["structuredContent"] == {"result": "got 3"}
        ended = await http.delete(lab.url, headers=headers | session)
        assert ended.status_code == 200
        gone = await http.post(lab.url, json=call, headers=headers | session)
        assert gone.status_code == 404


async def test_a_request_whose_id_is_no_string_nor_integer_is_refused_not_accepted() -> None:
    # The SDK reads it as a notification: a 202, and the client waits for an answer that never comes.
    async with served() as lab, httpx2.AsyncClient(timeout=10) as http:
        headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
        session = headers | await _handshake_session(http, lab.url, headers)
        for bad_id in (1.5, True, None, {}):
            call = {"jsonrpc": "2.0", "id": bad_id, "method": "tools/call", "params": {"name": "hang", "arguments": {}}}
            refused = await http.post(lab.url, json=call, headers=session)
            assert refused.status_code == 400 and refused.json()["id"] is None, refused.text
            assert refused.json()["error"]["code"] == -32600 and "string or an integer" in refused.text
        notified = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert (await http.post(lab.url, json=notified, headers=session)).status_code == 202
    assert not lab.cancelled.is_set()  # no call of ``hang`` began


# -- a session that ends while a POST is read: one answer, never two ---------------------------------------


class Wire:
    """An ASGI ``send`` holding the server's rule: one response per request (uvicorn raises past it).
    With ``gone``, writing a body fails as an ASGI 2.4 server's does once the client has left."""

    def __init__(self, *, gone: bool = False) -> None:
        self.statuses: list[int] = []
        self.complete = False
        self.gone = gone

    async def __call__(self, message: Message) -> None:
        if self.complete:
            raise RuntimeError(f"Unexpected ASGI message {message['type']!r} sent, after response already completed.")
        if message["type"] == "http.response.start":
            if self.statuses:
                raise RuntimeError("Expected ASGI message 'http.response.body', but got 'http.response.start'.")
            self.statuses.append(int(message["status"]))
        elif self.gone and message.get("body"):
            raise OSError("the client went away")
        elif not message.get("more_body", False):
            self.complete = True


def _post(message: dict[str, Any], body_sent: anyio.Event) -> tuple[Scope, Receive]:
    """A POST of ``message`` to session ``s1``, its body arriving once ``body_sent`` is set."""

    async def receive() -> Message:
        await body_sent.wait()
        return {"type": "http.request", "body": json.dumps(message).encode(), "more_body": False}

    headers = {
        "host": "127.0.0.1",
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-session-id": "s1",
        "mcp-protocol-version": "2025-11-25",
    }
    scope: Scope = {
        "type": "http",
        "method": "POST",
        "path": "/mcp",
        "query_string": b"",
        "root_path": "",
        "scheme": "http",
        "server": ("127.0.0.1", 80),
        "client": ("127.0.0.1", 5000),
        "headers": [(k.encode(), v.encode()) for k, v in headers.items()],
    }
    return scope, receive


async def _post_as_the_session_ends(message: dict[str, Any]) -> Wire:
    """POST ``message`` to a live session's transport; the session is terminated (what a DELETE does)
    while the POST's body is on its way; returns what was sent back."""
    transport = JsonFirstTransport(mcp_session_id="s1", is_json_response_enabled=False, event_store=None)
    wire, body_sent = Wire(), anyio.Event()
    scope, receive = _post(message, body_sent)
    async with transport.connect():
        with anyio.fail_after(10):  # a request nothing will answer would hang here
            async with anyio.create_task_group() as tg:
                tg.start_soon(transport.handle_request, scope, receive, wire)
                await anyio.wait_all_tasks_blocked()
                await transport.terminate()
                body_sent.set()
    return wire


async def test_a_notification_whose_session_ends_while_it_is_read_is_answered_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cancelled = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}}
    with caplog.at_level(logging.DEBUG):
        wire = await _post_as_the_session_ends(cancelled)
    assert wire.statuses == [202] and wire.complete
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING or r.exc_info]


async def test_a_request_whose_session_ends_while_it_is_read_is_told_so_at_once() -> None:
    call = {"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": "quick", "arguments": {"n": 1}}}
    wire = await _post_as_the_session_ends(call)
    assert wire.statuses == [404] and wire.complete


async def test_a_streamed_answer_whose_client_is_gone_is_not_answered_again(caplog: pytest.LogCaptureFixture) -> None:
    transport = JsonFirstTransport(mcp_session_id="s1", is_json_response_enabled=False, event_store=None)
    wire, body_sent = Wire(gone=True), anyio.Event()
    body_sent.set()
    call = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "progress", "arguments": {}}}
    scope, receive = _post(call, body_sent)
    progress = JSONRPCNotification(
        jsonrpc="2.0", method="notifications/progress", params={"progressToken": 1, "progress": 1}
    )
    async with transport.connect() as (read, write):
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(transport.handle_request, scope, receive, wire)
                await read.receive()  # the session has the request; its first message is not the answer
                await write.send(SessionMessage(progress, metadata=ServerMessageMetadata(related_request_id=9)))
    assert wire.statuses == [200]  # the SSE stream's, and no 500 after it
    assert "SSE response error" in caplog.text
