"""An OpenAI-compatible embeddings server for tests: ``POST /v1/embeddings`` backed by a real encoder.

    app = embeddings_app(MiniLmEncoder(), model="all-minilm", api_key="sk-...")
    with serve_asgi(app) as base_url:                    # tests/support/upstream.py
        provider = OpenAIEmbeddings(f"{base_url}/v1", "all-minilm", http, api_key=SecretValue("sk-..."))

It speaks the subset of the API that Ollama, vLLM and OpenAI share: a JSON body ``{"model",
"input"}`` (a string or a list of strings), answered with ``{"object": "list", "data": [{"object":
"embedding", "embedding": [...], "index": i}], "model", "usage"}``. A wrong bearer token gets 401
with a body that echoes the token it got (as careless servers do), so tests can check the client
never repeats it. Every request is recorded in ``app.requests`` (path, headers, body).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio.to_thread

from .upstream import Message, Receive, Scope, Send

__all__ = ["EmbeddingsApp", "embeddings_app"]


@dataclass
class EmbeddingsApp:
    encoder: Any
    """Anything with ``encode(texts) -> list of vectors`` (``MiniLmEncoder``, a test encoder)."""
    model: str
    api_key: str | None = None
    requests: list[dict[str, Any]] = field(default_factory=list)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {key.decode("latin-1").lower(): value.decode("latin-1") for key, value in scope["headers"]}
        self.requests.append({"method": scope["method"], "path": scope["path"], "headers": headers, "body": body})
        if scope["method"] != "POST" or scope["path"].rstrip("/") not in ("/embeddings", "/v1/embeddings"):
            await _reply(send, 404, {"error": {"message": f"no route {scope['path']}"}})
            return
        got = headers.get("authorization", "")
        if self.api_key is not None and got != f"Bearer {self.api_key}":
            await _reply(send, 401, {"error": {"message": f"Incorrect API key provided: {got}"}})
            return
        try:
            request = json.loads(body)
            texts = [request["input"]] if isinstance(request["input"], str) else list(request["input"])
            if request.get("model") != self.model or not all(isinstance(t, str) for t in texts):
                raise ValueError(f"model {request.get('model')!r} not found")
        except (ValueError, KeyError, TypeError) as exc:
            await _reply(send, 400, {"error": {"message": str(exc)}})
            return
        vectors = await anyio.to_thread.run_sync(self._encode, texts)
        await _reply(
            send,
            200,
            {
                "object": "list",
                "data": [{"object": "embedding", "embedding": vector, "index": i} for i, vector in enumerate(vectors)],
                "model": self.model,
                "usage": {"prompt_tokens": 0, "total_tokens": 0},
            },
        )

    def _encode(self, texts: Sequence[str]) -> list[list[float]]:
        return [[float(x) for x in vector] for vector in self.encoder.encode(texts)]


def embeddings_app(encoder: Any, *, model: str, api_key: str | None = None) -> EmbeddingsApp:
    return EmbeddingsApp(encoder, model, api_key)


async def _reply(send: Send, status: int, payload: Any) -> None:
    body = json.dumps(payload).encode()
    start: Message = {
        "type": "http.response.start",
        "status": status,
        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
    }
    await send(start)
    await send({"type": "http.response.body", "body": body})
