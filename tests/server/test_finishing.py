"""``finishing``: the end of a stdio client's stream is held back until the requests it sent are answered."""

from __future__ import annotations

import time

import anyio
import pytest
from mcp.shared.message import SessionMessage
from mcp.types import JSONRPCNotification, JSONRPCRequest, JSONRPCResponse

from mcp_gateway.server.finishing import finishing


def _request(id_: int) -> SessionMessage:
    return SessionMessage(JSONRPCRequest(jsonrpc="2.0", id=id_, method="ping"))


def _answer(id_: int) -> SessionMessage:
    return SessionMessage(JSONRPCResponse(jsonrpc="2.0", id=id_, result={}))


def _cancelled(id_: int) -> SessionMessage:
    return SessionMessage(
        JSONRPCNotification(jsonrpc="2.0", method="notifications/cancelled", params={"requestId": id_})
    )


async def _seconds_until_end(
    messages: list[SessionMessage], *, answer_after: float | None, seconds: float = 5.0
) -> float:
    """How long the session's read stream takes to end once the client's has, the client having sent
    ``messages``; the server answers request 1 ``answer_after`` seconds into the wait (None: never)."""
    client_send, transport_read = anyio.create_memory_object_stream[SessionMessage | Exception](10)
    transport_write, client_read = anyio.create_memory_object_stream[SessionMessage](10)
    reader, writer = finishing(transport_read, transport_write, seconds=seconds)
    waited = float("inf")
    async with client_send, client_read:
        for message in messages:
            await client_send.send(message)
        await client_send.aclose()  # the client's EOF
        for _ in messages:
            await reader.receive()
        async with anyio.create_task_group() as tg:
            if answer_after is not None:

                async def answer() -> None:
                    await anyio.sleep(answer_after)
                    await writer.send(_answer(1))

                tg.start_soon(answer)
            started = time.monotonic()
            with pytest.raises(anyio.EndOfStream):
                await reader.receive()
            waited = time.monotonic() - started
    return waited


@pytest.mark.anyio
async def test_the_end_waits_for_the_answer_of_a_request_read_before_it() -> None:
    waited = await _seconds_until_end([_request(1)], answer_after=0.3)
    assert 0.25 <= waited < 3


@pytest.mark.anyio
async def test_nothing_unanswered_ends_at_once() -> None:
    assert await _seconds_until_end([], answer_after=None) < 0.2


@pytest.mark.anyio
async def test_a_cancelled_request_is_not_waited_for() -> None:
    assert await _seconds_until_end([_request(1), _cancelled(1)], answer_after=None) < 0.2


@pytest.mark.anyio
async def test_a_request_never_answered_is_waited_for_no_longer_than_the_limit() -> None:
    waited = await _seconds_until_end([_request(1)], answer_after=None, seconds=0.3)
    assert 0.25 <= waited < 3


@pytest.mark.anyio
async def test_once_the_server_asks_the_client_something_the_end_is_not_held() -> None:
    # An elicitation after EOF can never be answered: waiting for the call that asked it would only stall.
    client_send, transport_read = anyio.create_memory_object_stream[SessionMessage | Exception](10)
    transport_write, client_read = anyio.create_memory_object_stream[SessionMessage](10)
    reader, writer = finishing(transport_read, transport_write, seconds=5)
    async with client_send, client_read:
        await client_send.send(_request(1))
        await client_send.aclose()
        await reader.receive()
        await writer.send(SessionMessage(JSONRPCRequest(jsonrpc="2.0", id="s-1", method="elicitation/create")))
        started = time.monotonic()
        with pytest.raises(anyio.EndOfStream):
            await reader.receive()
        assert time.monotonic() - started < 0.2
