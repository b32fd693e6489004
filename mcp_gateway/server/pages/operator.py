"""``/operator``: the operator's overview — connectors, pending approvals, recent audit rows.

Access needs an operator token, minted by ``mcp-gateway token create --operator`` (shown once,
stored as a SHA-256 hash in the state database's ``meta`` table, apart from the agents' MCP tokens:
an operator token opens no MCP session, and an agent token opens no overview). A script sends it
as ``Authorization: Bearer mgo_…``; a person pastes it into the login form once, which sets an
``HttpOnly; SameSite=Strict`` session cookie (8 hours, random). A session is kept in the store as
the cookie's SHA-256 (never the cookie), so every instance behind a load balancer knows it.
Forms on the overview (approve, deny, log out) carry a CSRF token bound to the session.

Everything shown is already redacted where it was recorded: approval summaries and audit argument
previews have credential-like values replaced, and no secret is ever stored in either.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from ...clock import Clock
from ...core import result_payload
from ...identity import OPERATOR
from ...store.base import Store
from ._common import PageContext, message, page, security_headers

__all__ = ["OPERATOR_TOKEN_PREFIX", "OperatorToken", "OperatorTokens", "operator_routes"]

OPERATOR_TOKEN_PREFIX = "mgo_"
_META_KEY = "operator_tokens"
_COOKIE = "mgw_operator"
SESSION_TTL = timedelta(hours=8)
SESSION_KIND = "operator_session"
"""The ``Store`` ephemeral kind: key the cookie's SHA-256, value the operator token's id."""
AUDIT_ROWS = 50


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class OperatorToken:
    id: str
    created_at: str
    revoked: bool = False


class OperatorTokens:
    """Operator tokens: few, long-lived, one JSON list in the store's ``meta`` table."""

    def __init__(self, store: Store, clock: Clock) -> None:
        self._store = store
        self._clock = clock

    async def _rows(self) -> list[dict[str, Any]]:
        rows = await self._store.get_meta(_META_KEY)
        return [r for r in rows if isinstance(r, dict)] if isinstance(rows, list) else []

    async def create(self) -> tuple[OperatorToken, str]:
        """Mint a token; the plaintext is returned once and never stored (256 random bits)."""
        token = OPERATOR_TOKEN_PREFIX + secrets.token_urlsafe(32)
        record = OperatorToken(id=secrets.token_hex(6), created_at=self._clock.now().isoformat(timespec="seconds"))
        rows = await self._rows()
        rows.append({"id": record.id, "hash": _hash(token), "created_at": record.created_at, "revoked": False})
        await self._store.set_meta(_META_KEY, rows)
        return record, token

    async def list(self) -> list[OperatorToken]:
        return [OperatorToken(str(r["id"]), str(r["created_at"]), bool(r.get("revoked"))) for r in await self._rows()]

    async def revoke(self, token_id: str) -> bool:
        rows = await self._rows()
        hit = next((r for r in rows if r.get("id") == token_id and not r.get("revoked")), None)
        if hit is None:
            return False
        hit["revoked"] = True
        await self._store.set_meta(_META_KEY, rows)
        return True

    async def verify(self, token: str | None) -> str | None:
        """The token's id if it is a live operator token, else None. Constant-time on the hash."""
        if not token or not token.startswith(OPERATOR_TOKEN_PREFIX) or len(token) > 256:
            return None
        digest = _hash(token)
        found = None
        for row in await self._rows():
            if hmac.compare_digest(str(row.get("hash", "")), digest) and not row.get("revoked"):
                found = str(row["id"])
        return found

    async def active(self, token_id: str) -> bool:
        return any(r.get("id") == token_id and not r.get("revoked") for r in await self._rows())


def operator_routes(ctx: PageContext) -> list[Route]:
    gateway = ctx.gateway
    tokens = OperatorTokens(gateway.store, gateway.clock)
    store = gateway.store
    secure = gateway.links.public_url.startswith("https://")

    async def who(request: Request) -> tuple[str | None, str | None]:
        """(token id, session hash) of the operator making this request; session hash None for bearer."""
        scheme, _, value = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer":
            return await tokens.verify(value.strip()), None
        cookie = request.cookies.get(_COOKIE)
        if not cookie or len(cookie) > 128:
            return None, None
        key = _hash(cookie)
        found = await store.get_ephemeral(SESSION_KIND, key, gateway.clock.now())
        token_id = found.decode() if found is not None else None
        if token_id is None or not await tokens.active(token_id):
            # Expired, logged out, or its token revoked since (from any instance or the CLI).
            await store.delete_ephemeral(SESSION_KIND, key)
            return None, None
        return token_id, key

    def login_page(error: str | None = None, status: int = 200) -> Response:
        return page("operator_login.html", status, title="Operator sign-in", error=error)

    async def overview(request: Request) -> Response:
        token_id, session = await who(request)
        if token_id is None:
            if request.headers.get("authorization"):
                return message("Not signed in", "That operator token is not valid.", status=401, tone="bad")
            return login_page()
        now = gateway.clock.now()
        connectors = result_payload(await gateway.connectors(OPERATOR))["connectors"]
        pending = [a for a in await gateway.store.list_approvals("pending") if a.expires_at > now]
        await gateway.auditor.flush()  # rows are written in the background: show the latest calls too
        audit = await gateway.store.list_audit(AUDIT_ROWS)
        return page(
            "operator.html",
            title="Operator overview",
            wide=True,
            connectors=connectors,
            approvals=pending,
            audit=audit,
            audit_failures=gateway.auditor.failures,
            csrf=ctx.csrf(f"operator\0{session}") if session else "",
            project=gateway.manifest.project,
            now=now.strftime("%Y-%m-%d %H:%M:%S"),
        )

    async def login(request: Request) -> Response:
        if not ctx.same_site(request):
            return message("Request refused", "Sign in from the gateway's own page.", status=403, tone="bad")
        form = await request.form(max_files=0, max_fields=4, max_part_size=1024)
        token_id = await tokens.verify(str(form.get("token", "")).strip())
        if token_id is None:
            return login_page("That is not a valid operator token.", status=401)
        now = gateway.clock.now()
        cookie = secrets.token_urlsafe(32)
        # 256 random bits: a clash with a live session is not a case to handle.
        await store.put_ephemeral(SESSION_KIND, _hash(cookie), token_id.encode(), now + SESSION_TTL, now)
        response = RedirectResponse("/operator", status_code=303, headers=security_headers())
        response.set_cookie(
            _COOKIE,
            cookie,
            max_age=int(SESSION_TTL.total_seconds()),
            path="/operator",
            httponly=True,
            samesite="strict",
            secure=secure,
        )
        return response

    async def guarded(request: Request) -> tuple[str | None, Response | None]:
        """The operator behind a POST, or the response that refuses it (CSRF for cookie sessions)."""
        token_id, session = await who(request)
        if token_id is None:
            return None, message("Not signed in", "Sign in at /operator first.", status=401, tone="bad")
        if session is not None:
            form = await ctx.form(request, f"operator\0{session}")
            if isinstance(form, Response):
                return None, form
        return token_id, None

    async def logout(request: Request) -> Response:
        _, refused = await guarded(request)
        if refused is not None:
            return refused
        cookie = request.cookies.get(_COOKIE)
        if cookie:
            await store.delete_ephemeral(SESSION_KIND, _hash(cookie))
        response = RedirectResponse("/operator", status_code=303, headers=security_headers())
        response.delete_cookie(_COOKIE, path="/operator", httponly=True, samesite="strict", secure=secure)
        return response

    async def decide(request: Request) -> Response:
        _, refused = await guarded(request)
        if refused is not None:
            return refused
        form = await request.form()
        decision = str(form.get("decision", ""))
        if decision not in ("approve", "deny"):
            return message("Request refused", "Choose Approve or Deny.", status=400, tone="bad")
        decided = await gateway.approvals.decide(request.path_params["id"], decision == "approve")
        if decided is None:
            return message("Already decided", "That approval was already decided or has expired.", tone="bad")
        return RedirectResponse("/operator", status_code=303, headers=security_headers())

    return [
        Route("/operator", overview, methods=["GET"]),
        Route("/operator/login", login, methods=["POST"]),
        Route("/operator/logout", logout, methods=["POST"]),
        Route("/operator/approvals/{id}", decide, methods=["POST"]),
    ]
