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

from datetime import timedelta

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from ...core import result_payload
from ...services.approvals import ApproverRefused
from ...services.identity import OPERATOR
from ...services.operator_tokens import OPERATOR_TOKEN_PREFIX, OperatorToken, OperatorTokens
from ._common import CookieSession, PageContext, approves, message, page, security_headers

__all__ = ["OPERATOR_TOKEN_PREFIX", "OperatorToken", "OperatorTokens", "operator_routes"]

SESSION = CookieSession("operator_session", "mgw_operator", timedelta(hours=8), "/operator", "strict")
"""Its rows hold the operator token's id."""
AUDIT_ROWS = 50


def operator_routes(ctx: PageContext) -> list[Route]:
    gateway = ctx.gateway
    tokens = gateway.operators

    async def who(request: Request) -> tuple[str | None, str | None]:
        """(token id, session hash) of the operator making this request; session hash None for bearer."""
        scheme, _, value = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer":
            return await tokens.verify(value.strip()), None
        key = SESSION.key(request)
        session = await SESSION.who(gateway, request)
        if session is None or not await tokens.active(session[0]):
            if key is not None:  # expired, logged out, or its token revoked since (any instance or the CLI)
                await gateway.sessions.delete_ephemeral(SESSION.kind, key)
            return None, None
        return session

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
        pending = await gateway.approvals.pending(now)
        audit = await gateway.auditor.recent(AUDIT_ROWS)  # rows are written in the background: the latest too
        await gateway.review.refresh()
        held = [
            {"name": f.name, "status": f.status, "flags": f.flags, "diff": f.diff()} for f in gateway.review.pending()
        ]
        return page(
            "operator.html",
            title="Operator overview",
            wide=True,
            connectors=connectors,
            personal={c.slug for c in gateway.manifest.connectors if c.credentials == "per_user"},
            approvals=pending,
            audit=audit,
            held=held,
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
        return await SESSION.start(gateway, token_id, "/operator")

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
        return await SESSION.end(gateway, request, "/operator")

    async def decide(request: Request) -> Response:
        _, refused = await guarded(request)
        if refused is not None:
            return refused
        form = await request.form()
        approve = approves(form)
        if isinstance(approve, Response):
            return approve
        try:
            decided = await gateway.approvals.decide(request.path_params["id"], approve, by=OPERATOR.user)
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

    async def review(request: Request) -> Response:
        token_id, refused = await guarded(request)
        if refused is not None:
            return refused
        form = await request.form()
        approve = approves(form)
        if isinstance(approve, Response):
            return approve
        await gateway.review.refresh()
        decided = await gateway.review.decide(request.path_params["name"], approve=approve, by=f"operator:{token_id}")
        if decided is None:
            return message("Already decided", "That action is not held for review (any more).", tone="bad")
        return RedirectResponse("/operator", status_code=303, headers=security_headers())

    return [
        Route("/operator", overview, methods=["GET"]),
        Route("/operator/review/{name:path}", review, methods=["POST"]),
        Route("/operator/login", login, methods=["POST"]),
        Route("/operator/logout", logout, methods=["POST"]),
        Route("/operator/approvals/{id}", decide, methods=["POST"]),
    ]
