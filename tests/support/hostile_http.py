"""A hostile HTTP upstream on loopback: every answer is an error whose text is ``hostile_error`` of
the credential the request carried.

    with serve_asgi(HostileHttpApp()) as base_url:
        ...

- ``POST /token`` is an OAuth2 token endpoint that refuses: HTTP 400 with the hex of the client
  secret it was sent as its ``error`` code and ``hostile_error(client_secret)`` as ``error_description``;
- any other request gets HTTP 400 with ``{"message": hostile_error(bearer token)}``.
"""

from __future__ import annotations

from urllib.parse import parse_qsl

from .hostile_text import hostile_error
from .upstream import Receive, Scope, Send, read_body, reply_json

__all__ = ["HostileHttpApp"]


class HostileHttpApp:
    def __init__(self) -> None:
        self.paths: list[str] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        raw = await read_body(receive)
        self.paths.append(scope["path"])
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        if scope["path"] == "/token":
            secret = dict(parse_qsl(raw.decode())).get("client_secret", "")
            # The secret as its ``error`` code, hex-encoded: it then looks like a code (letters and digits).
            await reply_json(send, 400, {"error": secret.encode().hex(), "error_description": hostile_error(secret)})
            return
        token = headers.get("authorization", "").removeprefix("Bearer ")
        await reply_json(send, 400, {"message": hostile_error(token)})
