"""``/operator``: the operator's overview — connectors, pending approvals, recent audit rows.

Access needs an operator token, minted by ``mcp-gateway token create --operator`` (shown once,
stored as a SHA-256 hash, one row per token: ``operator_tokens.py``; apart from the agents' MCP
tokens: an operator token opens no MCP session, and an agent token opens no overview). A script sends it
as ``Authorization: Bearer mgo_…``; a person pastes it into the login form once, which sets an
``HttpOnly; SameSite=Strict`` session cookie (8 hours, random). A session is kept in the store as
the cookie's SHA-256 (never the cookie), so every instance behind a load balancer knows it.
Forms on the overview (approve, deny, log out) carry a CSRF token bound to the session.

The overview also lists the upstream actions held for review (new, changed since approval,
or flagged as instructions to the model) with their diff and flags: Approve pins that exact snapshot
and makes the action visible to agents at once; Deny keeps it quarantined and off the list until the
upstream changes it again.

Everything shown is already redacted where it was recorded: approval summaries and audit argument
previews have credential-like values replaced, and no secret is ever stored in either.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from ...core import result_payload
from ...core.held_actions import HeldActions
from ...core.results import ConnectorsResult
from ...manifest import Manifest
from ...services.approvals import ApprovalService, ApproverRefused, ArgumentsUnshown
from ...services.audit import Auditor
from ...services.identity import OPERATOR, Principal
from ...services.operator_tokens import OPERATOR_TOKEN_PREFIX, OperatorToken, OperatorTokens
from ._arguments import arguments_view
from ._common import CookieSession, PageContext, approves, message, page, security_headers

__all__ = ["OPERATOR_TOKEN_PREFIX", "OperatorPages", "OperatorToken", "OperatorTokens", "Overseen"]

SESSION = CookieSession("operator_session", "mgw_operator", timedelta(hours=8), "/operator", "strict")
"""Its rows hold the operator token's id."""
AUDIT_ROWS = 50


class Overseen(Protocol):
    """What the overview reads of the gateway itself: the manifest in force and ``connectors``."""

    @property
    def manifest(self) -> Manifest: ...

    async def connectors(self, principal: Principal) -> ConnectorsResult: ...


@dataclass(frozen=True)
class OperatorPages:
    """``/operator`` and its forms: sign in and out, decide an approval, review a held action."""

    ctx: PageContext
    gateway: Overseen
    approvals: ApprovalService
    auditor: Auditor
    review: HeldActions
    tokens: OperatorTokens

    def routes(self) -> list[Route]:
        return [
            Route("/operator", self.overview, methods=["GET"]),
            Route("/operator/review/{name:path}", self.decide_held, methods=["POST"]),
            Route("/operator/login", self.login, methods=["POST"]),
            Route("/operator/logout", self.logout, methods=["POST"]),
            Route("/operator/approvals/{id}", self.decide_approval, methods=["POST"]),
        ]

    async def who(self, request: Request) -> tuple[str | None, str | None]:
        """(token id, session hash) of the operator making this request; session hash None for bearer."""
        scheme, _, value = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer":
            return await self.tokens.verify(value.strip()), None
        key = SESSION.key(request)
        session = await SESSION.who(self.ctx, request)
        if session is None or not await self.tokens.active(session[0]):
            if key is not None:  # expired, logged out, or its token revoked since (any instance or the CLI)
                await self.ctx.sessions.delete_ephemeral(SESSION.kind, key)
            return None, None
        return session

    async def overview(self, request: Request) -> Response:
        token_id, session = await self.who(request)
        if token_id is None:
            if request.headers.get("authorization"):
                return message("Not signed in", "That operator token is not valid.", status=401, tone="bad")
            return _login_page()
        now = self.ctx.clock.now()
        connectors = result_payload(await self.gateway.connectors(OPERATOR))["connectors"]
        pending = [(a, arguments_view(a.arguments)) for a in await self.approvals.pending(now)]
        audit = await self.auditor.recent(AUDIT_ROWS)  # rows are written in the background: the latest too
        await self.review.refresh()
        held = [{"name": f.name, "status": f.status, "flags": f.flags, "diff": f.diff()} for f in self.review.pending()]
        return page(
            "operator.html",
            title="Operator overview",
            wide=True,
            connectors=connectors,
            personal={c.slug for c in self.gateway.manifest.connectors if c.credentials == "per_user"},
            approvals=pending,
            audit=audit,
            held=held,
            audit_failures=self.auditor.failures,
            csrf=self.ctx.csrf(f"operator\0{session}") if session else "",
            project=self.gateway.manifest.project,
            now=now.strftime("%Y-%m-%d %H:%M:%S"),
        )

    async def login(self, request: Request) -> Response:
        if not self.ctx.same_site(request):
            return message("Request refused", "Sign in from the gateway's own page.", status=403, tone="bad")
        form = await request.form(max_files=0, max_fields=4, max_part_size=1024)
        token_id = await self.tokens.verify(str(form.get("token", "")).strip())
        if token_id is None:
            return _login_page("That is not a valid operator token.", status=401)
        return await SESSION.start(self.ctx, token_id, "/operator")

    async def guarded(self, request: Request) -> tuple[str | None, Response | None]:
        """The operator behind a POST, or the response that refuses it (CSRF for cookie sessions)."""
        token_id, session = await self.who(request)
        if token_id is None:
            return None, message("Not signed in", "Sign in at /operator first.", status=401, tone="bad")
        if session is not None:
            form = await self.ctx.form(request, f"operator\0{session}")
            if isinstance(form, Response):
                return None, form
        return token_id, None

    async def logout(self, request: Request) -> Response:
        _, refused = await self.guarded(request)
        if refused is not None:
            return refused
        return await SESSION.end(self.ctx, request, "/operator")

    async def decide_approval(self, request: Request) -> Response:
        _, refused = await self.guarded(request)
        if refused is not None:
            return refused
        approve = approves(await request.form())
        if isinstance(approve, Response):
            return approve
        try:
            decided = await self.approvals.decide(request.path_params["id"], approve, by=OPERATOR.user)
        except ArgumentsUnshown:
            return message(
                "Not approved",
                "The arguments are too long to show in full, so they cannot be approved here.",
                status=403,
                tone="bad",
            )
        except ApproverRefused:
            return message(
                "Approval by someone else",
                "The operator asked for this call itself; someone else must approve it.",
                status=403,
                tone="bad",
            )
        if decided is None:
            return message("Already decided", "That approval was already decided or has expired.", tone="bad")
        return RedirectResponse("/operator", status_code=303, headers=security_headers())

    async def decide_held(self, request: Request) -> Response:
        token_id, refused = await self.guarded(request)
        if refused is not None:
            return refused
        approve = approves(await request.form())
        if isinstance(approve, Response):
            return approve
        await self.review.refresh()
        decided = await self.review.decide(request.path_params["name"], approve=approve, by=f"operator:{token_id}")
        if decided is None:
            return message("Already decided", "That action is not held for review (any more).", tone="bad")
        return RedirectResponse("/operator", status_code=303, headers=security_headers())


def _login_page(error: str | None = None, status: int = 200) -> Response:
    return page("operator_login.html", status, title="Operator sign-in", error=error)
