"""Rate limits over real HTTP: discovery has its own per-agent bucket, and a rate-limited answer on
``/mcp`` carries an HTTP ``Retry-After`` header beside ``retry_after`` in its body."""

from __future__ import annotations

import json
import math
import os
from typing import Any

import httpx2

from .conftest import GatewayEnv, serving
from .test_http_transport import INITIALIZE, MCP_HEADERS


def tool_call(http: httpx2.Client, url: str, n: int, name: str, arguments: dict[str, Any]) -> httpx2.Response:
    message = {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
    return http.post(f"{url}/mcp", json=message)


JSON_FIRST = os.environ.get("MCP_GATEWAY_FAST_PATHS", "1") != "0"
"""The JSON-first answer is a fast path; with the fast paths off the SDK answers on an SSE stream,
whose headers leave before the result exists: the limit is then in the body alone."""


def structured(response: httpx2.Response) -> dict[str, Any]:
    """The tool result's structured content, from a JSON answer or an SSE stream's one message."""
    if response.headers["content-type"].startswith("application/json"):
        return json.loads(response.content)["result"]["structuredContent"]
    assert not JSON_FIRST, "the JSON-first fast path answered on a stream"
    data = [line[len("data:") :] for line in response.text.splitlines() if line.startswith("data:")]
    return json.loads(data[-1])["result"]["structuredContent"]


def retry_after_header(response: httpx2.Response) -> str | None:
    header = response.headers.get("retry-after")
    assert header is None or response.headers["content-type"].startswith("application/json")
    return header


def test_a_rate_limited_answer_carries_retry_after(gateway_env: GatewayEnv) -> None:
    # One call every 100 s per agent; discovery gets four times that: a burst of four.
    text = gateway_env.manifest.read_text()
    gateway_env.manifest.write_text(text + "limits:\n  - {agent: '*', rate: 0.01, burst: 1}\n")
    gateway_env.cli("secret", "set", "bearer_api", input="bearer-secret-value")
    with serving(gateway_env) as server:
        token = gateway_env.cli("token", "create", "--agent", "bot").stdout.strip()
        headers = MCP_HEADERS | {"Authorization": f"Bearer {token}"}
        with httpx2.Client(headers=headers, timeout=30) as http:
            init = http.post(f"{server.url}/mcp", json=INITIALIZE)
            http.headers["mcp-session-id"] = init.headers["mcp-session-id"]
            http.post(f"{server.url}/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"})

            called = tool_call(http, server.url, 2, "call", {"tool": "bearer_api.items.get", "args": {"id": "1"}})
            assert called.status_code == 200 and retry_after_header(called) is None
            assert structured(called)["status"] == "ok"
            limited = tool_call(http, server.url, 3, "call", {"tool": "bearer_api.items.get", "args": {"id": "1"}})
            body = structured(limited)
            assert body["reason"] == "rate_limited" and body["retry_after"] > 90
            if JSON_FIRST:
                assert retry_after_header(limited) == str(math.ceil(body["retry_after"]))

            # The call bucket is empty; discovery still answers, from its own bucket, then stops too.
            found = [tool_call(http, server.url, 10 + i, "discover", {"query": "items"}) for i in range(4)]
            assert all(structured(r).get("results") for r in found)
            assert all(retry_after_header(r) is None for r in found)
            stopped = tool_call(http, server.url, 20, "describe", {"tool": "bearer_api.items.get"})
            shown = structured(stopped)
            assert shown["reason"] == "rate_limited" and "discovery rate limit" in shown["message"]
            if JSON_FIRST:
                assert int(retry_after_header(stopped) or 0) >= 1
