"""A request whose id is neither a string nor an integer gets ``-32600`` (``server/request_ids.py``)."""

from __future__ import annotations

import json

import pytest

from mcp_gateway.server.request_ids import invalid_id_error


@pytest.mark.parametrize(
    ("raw_id", "kind"),
    [("1.5", "a number with a fraction"), ("1e2", "exponent"), ("-1.0", "fraction"), ("true", "true or false"),
     ("null", "null"), ("{}", "an object"), ("[1]", "an array")],
)  # fmt: skip
def test_an_id_of_another_type_is_an_invalid_request_answered_with_id_null(raw_id: str, kind: str) -> None:
    # The SDK reads each of these as a notification: never answered, and the client waits for ever.
    error = invalid_id_error(f'{{"jsonrpc": "2.0", "id" : {raw_id}, "method": "tools/list"}}\n'.encode())
    assert error is not None and error["id"] is None and error["error"]["code"] == -32600
    assert "id must be a string or an integer" in error["error"]["message"] and kind in error["error"]["message"]
    json.dumps(error)  # written to the wire as it is


@pytest.mark.parametrize(
    "line",
    [
        b'{"jsonrpc":"2.0","id":7,"method":"ping"}',
        b'{"jsonrpc":"2.0","id":-7,"method":"ping"}',
        b'{"jsonrpc":"2.0","id":"1.5","method":"ping"}',
        b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
        b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"arguments":{"id":1.5}}}',  # a nested id
        b'{"jsonrpc":"2.0","id":null,"error":{"code":-1,"message":"x"}}',  # a response: no method
        b'{"jsonrpc":"2.0","id":true,',  # no JSON at all: answered -32700 elsewhere
    ],
)
def test_every_other_message_passes(line: bytes) -> None:
    assert invalid_id_error(line) is None
