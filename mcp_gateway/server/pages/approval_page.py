"""``/approvals/{token}``: a human approves or denies one call.

The page shows who asks (the user, else the agent; a static token's id only as a detail), the
action, what it does and where the call goes (method and URL, or the upstream MCP tool), its risk,
why approval is needed (the verdict's source and rule), the fingerprint of the exact call, and
every redacted argument in full (``_arguments``: long values folded, hidden characters escaped).
Approve and Deny are buttons of one CSRF-protected form; the POST consumes the link, then decides
the approval by compare-and-set, so a decision is made once whatever is clicked twice or in two
tabs. A page that cannot show the arguments in full (cut when stored) offers no Approve.

Who decides: with the front door's approver sign-in (``pages.approver``), the user this browser
signed in as, recorded as the approval's ``decided_by``; else nobody known. An approval that wants
a separate approver (the rule's or the project's ``separate_approver``) can be approved here only
by a signed-in user other than the requester; anyone may deny it.
"""

from __future__ import annotations

from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ...primitives.sanitize import reveal, right_to_left
from ...services.approvals import ApprovalService, ApproverRefused, asked_by, explain, may_approve
from ...services.links import LinkService, hash_link_token
from ...store.contract import ApprovalRecord, LinkRecord
from ._arguments import ArgumentsView, Shown, arguments_view
from ._common import GONE, PageContext, approves, message, page
from .approver import ApproverSignIn

__all__ = ["ApprovalPage"]

_STATUS_WORDS = {
    "approved": "approved",
    "denied": "denied",
    "consumed": "approved and run",
    "expired": "left to expire",
}


def _already(approval: ApprovalRecord, *, deciding: bool) -> Response:
    said = _STATUS_WORDS.get(approval.status, approval.status)
    return message("Already decided", f"This call was already {said}.", status=409 if deciding else 200, tone="bad")


@dataclass(frozen=True)
class ApprovalPage:
    """``/approvals/{token}`` (GET shows the call, POST decides it) and, with approver sign-in,
    ``/approvals/{token}/sign-in``."""

    ctx: PageContext
    links: LinkService
    approvals: ApprovalService
    sign_in: ApproverSignIn | None = None

    def routes(self) -> list[Route]:
        # The sign-in callback first: ``{token}`` would match it.
        routes = [*self.sign_in.routes()] if self.sign_in is not None else []
        routes.append(Route("/approvals/{token}", self.approval, methods=["GET", "POST"]))
        if self.sign_in is not None:
            routes.append(Route("/approvals/{token}/sign-in", self.start_sign_in, methods=["POST"]))
        return routes

    async def approval(self, request: Request) -> Response:
        """The page of a pending approval (GET, and HEAD: a link previewer's), or the decision on it (POST)."""
        token = request.path_params["token"]
        # Only POST decides: HEAD, which starlette routes here beside GET, is a look like GET.
        deciding = request.method == "POST"
        found = await self._pending(token, deciding=deciding)
        if isinstance(found, Response):
            return found
        link, approval = found
        approver = await self.sign_in.who(request) if self.sign_in is not None else None
        view = arguments_view(approval.arguments)
        if not deciding:
            return self._show(token, link, approval, approver, view)
        return await self._decide(request, token, link, approval, approver, view)

    async def _pending(self, token: str, *, deciding: bool = False) -> tuple[LinkRecord, ApprovalRecord] | Response:
        """The link and its approval while it waits for a decision, else the page saying why not (a
        decision posted on one already decided: 409, nothing changed)."""
        link = await self.links.peek("approval", token)
        if link is None:
            # Used already: reopened (or clicked twice) after deciding, it says what was decided rather
            # than sending the human to the agent for a new approval of a call they settled.
            used = await self.links.record(hash_link_token(token))
            decided = await self.approvals.get(used.approval_id) if used and used.approval_id else None
            if used is None or used.kind != "approval" or used.used_at is None or decided is None:
                return message(*GONE, status=410, tone="bad")
            return _already(decided, deciding=deciding)
        approval = await self.approvals.get(link.approval_id) if link.approval_id else None
        if approval is None:
            return message(*GONE, status=410, tone="bad")
        if approval.status != "pending":
            return _already(approval, deciding=deciding)
        if approval.expires_at <= self.ctx.clock.now():
            return message("Expired", "This request for approval has expired. The agent can ask again.", tone="bad")
        return link, approval

    def _show(
        self, token: str, link: LinkRecord, approval: ApprovalRecord, approver: str | None, view: ArgumentsView
    ) -> Response:
        sign_in = self.sign_in
        # A static token's id names no person: the agent is the sentence's subject then.
        token_id = approval.principal.removeprefix("token:") if approval.principal.startswith("token:") else None
        return page(
            "approval.html",
            form_targets=(sign_in.provider_origin,) if sign_in is not None else (),
            separate_approver=approval.separate_approver,
            # Nobody approves what the page cannot show in full.
            may_approve=may_approve(approval, approver) and view.complete,
            approver=approver,
            can_sign_in=sign_in is not None and approver is None,
            sign_in_action=f"{token}/sign-in",
            title=f"Approve {approval.tool}?",
            approval=approval,
            why=explain(approval),
            view=view,
            calls=Shown(tuple(reveal(approval.calls))) if approval.calls else None,
            right_to_left=view.right_to_left or right_to_left(approval.calls or ""),
            csrf=self.ctx.csrf(link.token_hash),
            expires_at=approval.expires_at.strftime("%Y-%m-%d %H:%M"),
            asker=asked_by(approval.principal, approval.agent),
            user=None if token_id is not None else approval.principal,
            token=token_id,
        )

    async def _decide(
        self,
        request: Request,
        token: str,
        link: LinkRecord,
        approval: ApprovalRecord,
        approver: str | None,
        view: ArgumentsView,
    ) -> Response:
        form = await self.ctx.form(request, link.token_hash)
        if isinstance(form, Response):
            return form
        approve = approves(form)
        if isinstance(approve, Response):
            return approve
        if approve and not view.complete:
            return message(
                "Not approved",
                "The arguments are too long to show in full, so they cannot be approved here.",
                status=403,
                tone="bad",
            )
        can_sign_in = self.sign_in is not None
        if approve and not may_approve(approval, approver):
            return _someone_else(approver, can_sign_in)
        if await self.links.consume("approval", token) is None:
            # Another tab or instance decided between this page's read and now: say what it decided.
            decided = await self.approvals.get(approval.id)
            if decided is not None and decided.status != "pending":
                return _already(decided, deciding=True)
            return message(*GONE, status=410, tone="bad")
        try:
            decided = await self.approvals.decide(approval.id, approve, by=approver)
        except ApproverRefused:
            return _someone_else(approver, can_sign_in)
        if decided is None:
            return message("Already decided", "This call was already decided or has expired.", tone="bad")
        if approve:
            return message(
                "Approved", f"The agent may now run {approval.tool} once, exactly as shown. You can close this page."
            )
        return message("Denied", f"{approval.tool} will not run. You can close this page.", tone="bad")

    async def start_sign_in(self, request: Request) -> Response:
        """The approval page's "Sign in" button: off to the identity provider."""
        token = request.path_params["token"]
        link = await self.links.peek("approval", token)
        if link is None or self.sign_in is None:
            return message(*GONE, status=410, tone="bad")
        form = await self.ctx.form(request, link.token_hash)
        if isinstance(form, Response):
            return form
        return await self.sign_in.begin(token)


def _someone_else(approver: str | None, can_sign_in: bool) -> Response:
    """Why this approver may not approve: they asked for the call themselves, or nobody signed in."""
    if approver is not None:
        text = f"You ({approver}) asked for this call; someone else must approve it. You can still deny it."
    elif can_sign_in:
        text = "This call must be approved by someone other than the person who asked: sign in on this page first."
    else:
        # The link reaches whoever the agent shows it to, the requester included: approving takes
        # someone known to be someone else, an operator signed in on the overview.
        text = (
            "This project wants calls approved by someone other than the person who asked. "
            "An operator approves it on the overview (/operator)."
        )
    return message("Approval by someone else", text, status=403, tone="bad")
