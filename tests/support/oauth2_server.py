"""A real OAuth 2.0 authorization server and an API it protects, both on loopback, for the OAuth2 tests.

    with OAuth2MockServer(expires_in=3600) as auth:      # npm oauth2-mock-server, via oauth2_mock.mjs
        api = ProtectedApi(auth.jwks())                  # an ASGI upstream that verifies its RS256 JWTs
        with serve_asgi(api) as api_url: ...
        auth.events("token")                             # what the gateway sent to the token endpoint

The authorization server is the npm package ``oauth2-mock-server`` (pinned in package.json,
installed by scripts/test.sh), not a fake: it runs the authorization code grant with PKCE (it
checks the S256 verifier against the challenge), client credentials and refresh tokens, and signs
real JWTs. ``ProtectedApi`` checks each bearer token's signature against the server's JWKS and its
expiry, so a call only succeeds with a token that server issued. Without node or the package the
tests skip, except under CI=true, where they must run (``require_oauth2_mock``).
"""

from __future__ import annotations

import base64
import json
import os
import queue
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import httpx2
import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from .upstream import EchoApp

__all__ = ["OAuth2MockServer", "ProtectedApi", "require_oauth2_mock"]

ROOT = Path(__file__).resolve().parents[2]
LAUNCHER = Path(__file__).with_name("oauth2_mock.mjs")
PACKAGE = ROOT / "node_modules" / "oauth2-mock-server" / "package.json"


def require_oauth2_mock() -> str:
    """The node binary, when node and the npm package are installed; else skip (fail under CI)."""
    node = shutil.which("node")
    missing = "node" if node is None else None if PACKAGE.is_file() else "the npm package oauth2-mock-server"
    if missing:
        reason = f"{missing} is not installed; run `bash scripts/test.sh` (it runs npm install)"
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the OAuth2 tests: {reason}")
        pytest.skip(reason)
    assert node is not None
    return node


class OAuth2MockServer:
    """``oauth2-mock-server`` in a child process on 127.0.0.1 (a free port), with its event log."""

    def __init__(self, *, expires_in: int | None = None, rotate_refresh_tokens: bool = False) -> None:
        node = require_oauth2_mock()
        command = [node, str(LAUNCHER), "--port", "0"]
        if expires_in is not None:
            command += ["--expires-in", str(expires_in)]
        if rotate_refresh_tokens:
            command.append("--rotate-refresh-tokens")  # each refresh token works once (see oauth2_mock.mjs)
        self._proc = subprocess.Popen(
            command,
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        self._lines: queue.Queue[dict[str, Any]] = queue.Queue()
        self._events: list[dict[str, Any]] = []
        self._syncs = 0
        self._lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()
        ready = self._next("ready", timeout=30)
        self.url: str = ready["url"]
        self.authorize_url = f"{self.url}/authorize"
        self.token_url = f"{self.url}/token"

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            with self._lock:
                self._events.append(event)
            self._lines.put(event)

    def _next(self, kind: str, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            try:
                event = self._lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                stderr = self._proc.stderr.read() if self._proc.poll() is not None and self._proc.stderr else ""
                raise RuntimeError(f"oauth2-mock-server sent no {kind!r} event in {timeout} s. {stderr}") from None
            if event.get("event") == kind:
                return event

    def events(self, kind: str | None = None) -> list[dict[str, Any]]:
        """Every event the server has written so far. The server writes a request's event before it
        answers, but this process reads its output on a thread that may lag behind the answer the
        test already holds: a command's acknowledgement comes after every earlier line, so waiting
        for one first means nothing written before this call is missed."""
        if self._proc.poll() is None and self._proc.stdin is not None and not self._proc.stdin.closed:
            self._syncs += 1
            self.command(f"sync {self._syncs}")  # not a command the server knows: it only acknowledges it
        return self._seen(kind)

    def _seen(self, kind: str | None) -> list[dict[str, Any]]:
        with self._lock:
            return [e for e in self._events if kind is None or e.get("event") == kind]

    def command(self, line: str) -> None:
        """Send a command (see oauth2_mock.mjs) and wait until the server has taken it."""
        assert self._proc.stdin is not None
        self._proc.stdin.write(line + "\n")
        self._proc.stdin.flush()
        deadline = time.monotonic() + 10
        while not any(e.get("command") == line for e in self._seen("ack")):
            if time.monotonic() > deadline:
                raise RuntimeError(f"oauth2-mock-server did not take {line!r}")
            time.sleep(0.01)

    def jwks(self) -> dict[str, Any]:
        return httpx2.get(f"{self.url}/jwks", timeout=10).json()

    def issued_tokens(self) -> list[str]:
        """Every access and refresh token the server handed out (for leak checks)."""
        out = []
        for e in self.events("token"):
            out += [t for t in (e.get("access_token"), e.get("refresh_token")) if t]
        return out

    def stop(self) -> None:
        if self._proc.stdin is not None:
            self._proc.stdin.close()  # the launcher stops the server and exits
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        for stream in (self._proc.stdout, self._proc.stderr):
            if stream is not None:
                stream.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


# -- the protected API ---------------------------------------------------------------------------


def _b64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def verify_jwt(token: str, jwks: dict[str, Any]) -> dict[str, Any] | None:
    """The claims of an RS256 JWT signed by a key of ``jwks`` and not expired; else None."""
    try:
        header_b64, payload_b64, signature_b64 = token.split(".")
        header = json.loads(_b64url(header_b64))
        key = next(k for k in jwks["keys"] if k.get("kid") == header.get("kid"))
        if header.get("alg") != "RS256" or key.get("kty") != "RSA":
            return None
        numbers = rsa.RSAPublicNumbers(
            int.from_bytes(_b64url(key["e"]), "big"), int.from_bytes(_b64url(key["n"]), "big")
        )
        numbers.public_key().verify(
            _b64url(signature_b64), f"{header_b64}.{payload_b64}".encode(), padding.PKCS1v15(), hashes.SHA256()
        )
        claims = json.loads(_b64url(payload_b64))
    except Exception:
        return None
    return claims if isinstance(claims, dict) and claims.get("exp", 0) > time.time() else None


@dataclass
class ProtectedApi:
    """An upstream API that accepts only bearer JWTs from the authorization server.

    ``GET /me`` answers the token's claims; ``/forbidden`` always 403 (a valid token without the
    permission); a token in ``revoked``, or any token while ``reject_all`` is set, gets 401.
    Every request is recorded (``echo.requests``), headers included.
    """

    jwks: dict[str, Any]
    revoked: set[str] = field(default_factory=set)
    reject_all: bool = False
    echo: EchoApp = field(default_factory=EchoApp)
    accepted: list[str] = field(default_factory=list)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        request = await EchoApp._record(scope, receive)
        self.echo.requests.append(request)
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        claims = verify_jwt(token, self.jwks) if scheme == "Bearer" else None
        if claims is None or self.reject_all or token in self.revoked:
            status, body = 401, {"error": "invalid_token", "message": "the access token is not valid"}
        elif request.path == "/forbidden":
            status, body = 403, {"error": "insufficient_scope", "message": "this token may not do that"}
        else:
            self.accepted.append(token)
            status, body = 200, {"sub": claims.get("sub"), "scope": claims.get("scope"), "path": request.path}
        await send(
            {"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]}
        )
        await send({"type": "http.response.body", "body": json.dumps(body).encode()})
