"""``Retry-After`` on ``/mcp``'s whole-body JSON answers that hold a rate-limited tool result."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from mcp_gateway.server.retry_after import retry_after_header, with_retry_after


def answer(shown: dict[str, Any]) -> bytes:
    result = {"content": [{"type": "text", "text": json.dumps(shown)}], "structuredContent": shown, "isError": True}
    return json.dumps({"jsonrpc": "2.0", "id": 1, "result": result}).encode()


@pytest.mark.parametrize(
    ("shown", "header"),
    [
        ({"status": "error", "reason": "rate_limited", "retry_after": 0.3}, "1"),
        ({"status": "error", "reason": "rate_limited", "retry_after": 99.2}, "100"),
        ({"status": "error", "reason": "upstream_unavailable", "retry_after": 30.0}, "30"),
        ({"status": "error", "reason": "rate_limited"}, None),  # nothing said about when
        ({"status": "error", "reason": "rate_limited", "retry_after": "soon"}, None),
        ({"status": "ok", "data": {"reason": "rate_limited", "retry_after": 5}}, None),  # an upstream's words
        ({"status": "error", "reason": "policy_block"}, None),
    ],
)
def test_the_header_is_the_results_retry_after_rounded_up(shown: dict[str, Any], header: str | None) -> None:
    assert retry_after_header(answer(shown)) == header


def test_streamed_and_other_answers_pass_through_unchanged() -> None:
    def app_sending(*messages: dict[str, Any]) -> list[dict[str, Any]]:
        sent: list[dict[str, Any]] = []

        async def app(scope: Any, receive: Any, send: Any) -> None:
            for message in messages:
                await send(message)

        async def record(message: Any) -> None:
            sent.append(message)

        anyio.run(with_retry_after(app), {"type": "http"}, None, record)
        return sent

    json_start = {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]}
    limited = {"type": "http.response.body", "body": answer({"reason": "rate_limited", "retry_after": 2.5})}
    whole = app_sending(json_start, limited)
    assert whole[0]["headers"] == [(b"content-type", b"application/json"), (b"retry-after", b"3")]
    assert whole[1] is limited
    streamed = app_sending(json_start, {**limited, "more_body": True}, {"type": "http.response.body", "body": b""})
    assert streamed[0] is json_start and len(streamed) == 3  # its headers went before the result existed
    sse_start = {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]}
    assert app_sending(sse_start, limited)[0] is sse_start
    assert app_sending(json_start) == [json_start]  # a start with no body is not lost
