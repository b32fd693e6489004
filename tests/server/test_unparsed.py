"""A client's stdio line that is no JSON-RPC message gets an error answer (``server/unparsed.py``): the
request's id when the line still shows one, a message saying what to send instead, and the session
goes on."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import types
from pydantic import ValidationError

from mcp_gateway.server.unparsed import unparsed_answer
from tests.support.one_connector import gateway_env, write_manifest

LONE_SURROGATE = (
    '{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"discover","arguments":{"query":"\\ud83d"}}}'
)
DEEP = '{"jsonrpc":"2.0","id":6,"method":"ping","params":{"x":' + "[" * 10_000 + "]" * 10_000 + "}}"
NESTED = '{"jsonrpc":"2.0","id":"n-3","method":"ping","params":{"x":' + '{"a":' * 300 + "1" + "}" * 300 + "}}"
"""Deeper than the SDK's parser reads, not deeper than Python's: still no lone surrogate to speak of."""
ID_LAST = '{"jsonrpc":"2.0","method":"ping","params":{"x":' + "[" * 10_000 + "]" * 10_000 + '}, "id" : 9}'
ID_NESTED_ONLY = '{"jsonrpc":"2.0","method":"ping","params":{"id":4,"x":' + "[" * 10_000 + "]" * 10_000 + "}}"
NOT_JSON = '{"jsonrpc":"2.0","id":7,"method":'
NOT_JSON_RPC = '{"jsonrpc":"2.0","id":"eight","foo":1}'


def _answer(line: str) -> dict[str, Any]:
    with pytest.raises(ValidationError) as raised:
        types.jsonrpc_message_adapter.validate_json(line, by_name=False)  # as the SDK's stdio transport reads
    return unparsed_answer(raised.value).model_dump(mode="json")


@pytest.mark.parametrize(
    ("line", "request_id", "code", "says"),
    [
        (LONE_SURROGATE, 5, types.PARSE_ERROR, "lone UTF-16 surrogate"),
        (DEEP, 6, types.PARSE_ERROR, "nests deeper"),
        (NESTED, "n-3", types.PARSE_ERROR, "nests deeper"),
        (ID_LAST, 9, types.PARSE_ERROR, "nests deeper"),
        (ID_NESTED_ONLY, None, types.PARSE_ERROR, "nests deeper"),
        (NOT_JSON, None, types.PARSE_ERROR, "not valid JSON"),
        (NOT_JSON_RPC, "eight", types.INVALID_REQUEST, "not a JSON-RPC 2.0 request"),
    ],
)
def test_each_kind_of_line_gets_its_error_and_its_id_when_it_shows_one(
    line: str, request_id: int | str | None, code: int, says: str
) -> None:
    answer = _answer(line)
    assert answer["id"] == request_id and answer["error"]["code"] == code
    assert says in answer["error"]["message"]


@pytest.mark.slow  # a real gateway process
def test_a_stdio_session_answers_every_line_and_goes_on(tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path)
    env = gateway_env(tmp_path, MCP_GATEWAY_DISCOVERY_MODE="lexical")
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    lines = [
        json.dumps(initialize),
        '{"jsonrpc":"2.0","method":"notifications/initialized"}',
        "",  # blank lines between messages: ignored, never answered or logged
        " \t\r",
        LONE_SURROGATE,
        DEEP,
        NOT_JSON,
        NOT_JSON_RPC,
        '{"jsonrpc":"2.0","id":9,"method":"tools/list"}',
    ]
    argv = [sys.executable, "-m", "mcp_gateway", "serve", "--manifest", str(manifest), "--log-format", "json"]
    done = subprocess.run(
        argv, input="".join(f"{line}\n" for line in lines), capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    errors = [(a["id"], a["error"]["code"]) for a in answers if "error" in a]
    assert errors == [(5, -32700), (6, -32700), (None, -32700), ("eight", -32600)], answers
    tools = next(a for a in answers if a.get("id") == 9)
    assert len(tools["result"]["tools"]) == 6  # the session went on
    records = [json.loads(line) for line in done.stderr.splitlines()]  # the log stays one object a line
    assert sum("stdio: Parse error" in r["message"] for r in records) == 3, records
