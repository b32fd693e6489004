"""``/mcp``'s plain-text refusals answered as JSON-RPC errors (``server.rpc_refusals``)."""

from __future__ import annotations

import json

from starlette.applications import Starlette
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.testclient import TestClient
from starlette.types import Receive, Scope, Send

from mcp_gateway.server.rpc_refusals import json_rpc_refusals, refusal_body


def app() -> Starlette:
    async def refuse(_: object) -> Response:
        return Response("Request body too large", status_code=413)  # as the SDK writes it: no content type

    async def json_error(_: object) -> JSONResponse:
        return JSONResponse({"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "x"}}, status_code=404)

    routes = [Route("/mcp", refuse, methods=["POST"]), Route("/mcp", json_error, methods=["GET"])]
    return Starlette(routes=[*routes, Route("/page", refuse, methods=["POST"])])


def test_a_text_refusal_on_mcp_says_what_to_do_as_json_rpc_with_its_status() -> None:
    with TestClient(json_rpc_refusals(app())) as client:
        answer = client.post("/mcp", content=b"{}")
        assert answer.status_code == 413 and answer.headers["content-type"] == "application/json"
        error = answer.json()["error"]
        assert error["code"] == -32600 and error["data"] == {"reason": "request_too_large", "http_status": 413}
        assert "4 MB" in error["message"] and "send less per call" in error["message"]
        assert client.get("/mcp").json()["error"]["code"] == -32601  # a JSON-RPC answer is left alone
        assert client.post("/page", content=b"{}").text == "Request body too large"  # pages keep their text


def test_an_unforeseen_refusal_keeps_its_text_cut_short() -> None:
    said = json.loads(refusal_body(502, b"Bad gateway " + b"x" * 1000))
    assert said["id"] is None and said["error"]["code"] == -32603
    assert said["error"]["message"].startswith("http_error: the gateway refused the request (HTTP 502): Bad gateway")
    assert len(said["error"]["message"]) < 400


def test_a_refusal_written_in_pieces_is_read_whole() -> None:
    async def pieces(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 421, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"Invalid Host ", "more_body": True})
        await send({"type": "http.response.body", "body": b"header"})

    answer = TestClient(json_rpc_refusals(pieces)).post("/mcp", content=b"{}")
    assert answer.status_code == 421 and answer.json()["error"]["data"]["reason"] == "invalid_host"
